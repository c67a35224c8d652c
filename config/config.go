// Package config reads transit's settings from the environment and flags
// (a flag wins over its variable) and validates them at start, naming the
// setting in every error.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"transit/store"
)

// Config is every setting of a transit process.
type Config struct {
	// Region is the AWS region. AWS_REGION, --region; default us-east-1.
	Region string
	// EndpointURL sends every AWS call to one endpoint (moto, LocalStack).
	// --endpoint-url only: the SDK itself reads AWS_ENDPOINT_URL and the
	// per-service AWS_ENDPOINT_URL_<SERVICE>, which a flag would override.
	EndpointURL string
	// Prefix names this stack's tables, queues and topics, so several
	// stacks can share an account. TRANSIT_PREFIX, --prefix; default transit.
	Prefix string
	// Concurrency is how many commands of one queue a process handles at once.
	// TRANSIT_CONCURRENCY, --concurrency; default 4.
	Concurrency int
	// CommandTimeout bounds one attempt at one command.
	// TRANSIT_COMMAND_TIMEOUT, --command-timeout; default 20s.
	CommandTimeout time.Duration
	// DrainTimeout bounds the wait for in-flight commands on SIGTERM.
	// TRANSIT_DRAIN_TIMEOUT, --drain-timeout; default 30s.
	DrainTimeout time.Duration
	// VisibilityTimeout is the command queues' visibility timeout, set by
	// provision; it must exceed CommandTimeout by a second. TRANSIT_VISIBILITY_TIMEOUT,
	// --visibility-timeout; default 60s.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many deliveries a command gets before SQS
	// moves it to the DLQ, set by provision. TRANSIT_MAX_RECEIVE_COUNT,
	// --max-receive-count; default 5.
	MaxReceiveCount int
	// RetryMax is how many in-process retries a transient failure gets
	// before the command goes back to the queue. TRANSIT_RETRY_MAX,
	// --retry-max; default 3.
	RetryMax int
	// RetryInitial is the first retry's backoff; it doubles up to 2s.
	// TRANSIT_RETRY_INITIAL, --retry-initial; default 100ms.
	RetryInitial time.Duration
	// AuditRetention is how long outcomes are kept (the audit TTL); a
	// command redelivered later than this would be applied again.
	// TRANSIT_AUDIT_RETENTION, --audit-retention; default 720h (30 days).
	AuditRetention time.Duration
	// LayerRetention is how long a deprecated layer version is kept before
	// its TTL removes it and its Lambda layer version is deleted.
	// TRANSIT_LAYER_RETENTION, --layer-retention; default 168h (7 days).
	LayerRetention time.Duration
	// LayerDeleteOnAnyRemove makes the fan-in delete a layer version from
	// Lambda when its item is removed in any way, not only by TTL. Only for
	// emulators: their streams do not mark TTL removals, so a test or demo
	// plays one by deleting the item. TRANSIT_LAYER_DELETE_ON_ANY_REMOVE,
	// --layer-delete-on-any-remove; default false.
	LayerDeleteOnAnyRemove bool
	// ProviderURL is the sandbox provider's base URL. Without it serve
	// runs, but answers every sandbox.cleanup provider_not_configured.
	// TRANSIT_PROVIDER_URL, --provider-url.
	ProviderURL string
	// ProviderTimeout bounds one provider call. TRANSIT_PROVIDER_TIMEOUT,
	// --provider-timeout; default 10s.
	ProviderTimeout time.Duration
	// CleanupMaxAttempts is how many times the provider is asked to
	// delete a sandbox before it is left cleanup_stuck with a
	// sandbox.cleanup-stuck event. TRANSIT_CLEANUP_MAX_ATTEMPTS,
	// --cleanup-max-attempts; default 10.
	CleanupMaxAttempts int
	// CleanupBackoff is the wait after a sandbox's first failed deletion;
	// it doubles with each further failure up to CleanupBackoffMax, and the
	// cleanup sweep skips the sandbox until it has passed.
	// TRANSIT_CLEANUP_BACKOFF, --cleanup-backoff; default 1m.
	CleanupBackoff time.Duration
	// CleanupBackoffMax caps that wait. TRANSIT_CLEANUP_BACKOFF_MAX,
	// --cleanup-backoff-max; default 1h.
	CleanupBackoffMax time.Duration
	// SweepInterval is how often serve sends the expiry and cleanup
	// sweeps; 0 disables them. TRANSIT_SWEEP_INTERVAL, --sweep-interval;
	// default 1m.
	SweepInterval time.Duration
	// Domains lists the domains whose commands serve consumes
	// (comma-separated; empty for all), so a domain can get its own
	// consumers. The fan-in rules that send a served domain's commands run
	// with it. TRANSIT_DOMAINS, --domains.
	Domains string
	// StreamRules adds fan-in rules (a JSON array; see router.StreamRule)
	// to the built-in one. TRANSIT_STREAM_RULES, --stream-rules.
	StreamRules string
	// SandboxExpiry is how allocations expire: "timer" (a durable timer
	// per allocation firing sandbox.expire at its lab window's end, with
	// the sweep as a safety net) or "sweep" (the periodic sweep alone).
	// TRANSIT_SANDBOX_EXPIRY, --sandbox-expiry; default timer.
	SandboxExpiry string
	// TimerShards is the number of durable timer shards; every instance of
	// a stack must use the same number, and it must not shrink while
	// timers are stored. TRANSIT_TIMER_SHARDS, --timer-shards; default 8.
	TimerShards int
	// TimerLease is how long an instance's claim on a timer shard lasts
	// without renewal: a dead instance's timers are taken over after it.
	// TRANSIT_TIMER_LEASE, --timer-lease; default 15s.
	TimerLease time.Duration
	// TimerPollInterval is how often an owned shard is read for timers
	// coming due (two intervals ahead). TRANSIT_TIMER_POLL_INTERVAL,
	// --timer-poll-interval; default 1s.
	TimerPollInterval time.Duration
	// Env is production or development: only development stores an org's
	// secrets unencrypted when no KMS key is configured. TRANSIT_ENV,
	// --env; default production.
	Env string
	// KMSKey is the KMS key (ID, ARN or alias/<name>) that seals stored
	// secrets; "auto" uses alias/<prefix>-secrets, creating it if missing
	// (a customer managed key costs about 1 USD a month); empty seals
	// nothing, so secrets are refused outside development.
	// TRANSIT_KMS_KEY, --kms-key.
	KMSKey string
	// TaskLease is how long an agent's lease on a task lasts without a
	// heartbeat renewing it. TRANSIT_TASK_LEASE, --task-lease; default 2m.
	TaskLease time.Duration
	// TaskMaxAttempts is how many leases a task gets: the last one's
	// expiry ends it in ERROR (QUEUE_STUCK). TRANSIT_TASK_MAX_ATTEMPTS,
	// --task-max-attempts; default 3.
	TaskMaxAttempts int
	// AgentStaleAfter is the silence after which an agent is stale, and
	// AgentOfflineAfter the further silence after which it is offline.
	// TRANSIT_AGENT_STALE_AFTER, --agent-stale-after; default 90s.
	// TRANSIT_AGENT_OFFLINE_AFTER, --agent-offline-after; default 5m.
	AgentStaleAfter, AgentOfflineAfter time.Duration
	// LogLevel is debug, info, warn or error. TRANSIT_LOG_LEVEL,
	// --log-level; default info.
	LogLevel string
	// LogFormat is text or json (one object per line, for a log
	// collector). TRANSIT_LOG_FORMAT, --log-format; default text.
	LogFormat string
	// HTTPAddr is where serve answers /healthz, /readyz and /metrics;
	// "off" serves nothing. TRANSIT_HTTP_ADDR, --http-addr; default :9090.
	HTTPAddr string
	// ConsoleToken, when set, is asked of every request to the operator
	// console on HTTPAddr, from any address; unset, the console answers
	// loopback clients only. TRANSIT_CONSOLE_TOKEN, --console-token (the
	// variable keeps it out of the process list).
	ConsoleToken string
	// Capacity is how provision bills the tables: on-demand, or
	// provisioned with each table's figures (store/tables.go) and
	// auto-scaling. TRANSIT_CAPACITY, --capacity; default on-demand.
	Capacity string
	// TableCapacity overrides tables' provisioned figures, as
	// "Tasks=50/40,Logs=200/100" (read/write units, tables by their
	// definition names); provisioned only. TRANSIT_TABLE_CAPACITY,
	// --table-capacity.
	TableCapacity string
}

// HTTPOff turns the ops endpoints off (HTTPAddr).
const HTTPOff = "off"

// OpsServed says serve answers on HTTPAddr: "off" or unset serve
// nothing, and then no metrics are kept, since nothing could read them.
func (c Config) OpsServed() bool { return c.HTTPAddr != "" && c.HTTPAddr != HTTPOff }

// Environments (Env).
const (
	EnvProduction  = "production"
	EnvDevelopment = "development"
)

// Capacity modes (Capacity).
const (
	CapacityOnDemand    = "on-demand"
	CapacityProvisioned = "provisioned"
)

// Sandbox expiry modes (SandboxExpiry).
const (
	ExpiryTimer = "timer"
	ExpirySweep = "sweep"
)

type binding struct {
	flag, env string
	set       func(string) error
}

// Binder registers Config's settings on a flag set and, after parsing,
// fills the ones no flag set from the environment.
type Binder struct {
	fs       *flag.FlagSet
	bindings []binding
}

// Bind registers every setting of c on fs with its default.
func Bind(fs *flag.FlagSet, c *Config) *Binder {
	b := &Binder{fs: fs}
	b.str(&c.Region, "region", "AWS_REGION", "us-east-1", "AWS region")
	b.str(&c.EndpointURL, "endpoint-url", "", "", "send every AWS call to this endpoint (default: the SDK's, from AWS_ENDPOINT_URL*)")
	b.str(&c.Prefix, "prefix", "TRANSIT_PREFIX", "transit", "name prefix of this stack's tables, queues and topics")
	b.integer(&c.Concurrency, "concurrency", "TRANSIT_CONCURRENCY", 4, "commands of one queue handled at once per process")
	b.duration(&c.CommandTimeout, "command-timeout", "TRANSIT_COMMAND_TIMEOUT", 20*time.Second, "time limit of one attempt at one command")
	b.duration(&c.DrainTimeout, "drain-timeout", "TRANSIT_DRAIN_TIMEOUT", 30*time.Second, "wait for in-flight commands on SIGTERM")
	b.duration(&c.VisibilityTimeout, "visibility-timeout", "TRANSIT_VISIBILITY_TIMEOUT", time.Minute, "command queues' visibility timeout (provision)")
	b.integer(&c.MaxReceiveCount, "max-receive-count", "TRANSIT_MAX_RECEIVE_COUNT", 5, "deliveries before SQS moves a command to the DLQ (provision)")
	b.integer(&c.RetryMax, "retry-max", "TRANSIT_RETRY_MAX", 3, "in-process retries of a transient failure")
	b.duration(&c.RetryInitial, "retry-initial", "TRANSIT_RETRY_INITIAL", 100*time.Millisecond, "first retry backoff")
	b.duration(&c.AuditRetention, "audit-retention", "TRANSIT_AUDIT_RETENTION", 30*24*time.Hour, "how long command outcomes are kept")
	b.duration(&c.LayerRetention, "layer-retention", "TRANSIT_LAYER_RETENTION", 7*24*time.Hour, "how long deprecated layer versions are kept")
	b.boolean(&c.LayerDeleteOnAnyRemove, "layer-delete-on-any-remove", "TRANSIT_LAYER_DELETE_ON_ANY_REMOVE", false, "delete a layer version from Lambda on any removal of its item, not only TTL's (emulators)")
	b.str(&c.ProviderURL, "provider-url", "TRANSIT_PROVIDER_URL", "", "sandbox provider base URL")
	b.duration(&c.ProviderTimeout, "provider-timeout", "TRANSIT_PROVIDER_TIMEOUT", 10*time.Second, "time limit of one provider call")
	b.integer(&c.CleanupMaxAttempts, "cleanup-max-attempts", "TRANSIT_CLEANUP_MAX_ATTEMPTS", 10, "provider deletions tried before a sandbox is left cleanup_stuck")
	b.duration(&c.CleanupBackoff, "cleanup-backoff", "TRANSIT_CLEANUP_BACKOFF", time.Minute, "wait after a sandbox's first failed deletion, doubling with each further one")
	b.duration(&c.CleanupBackoffMax, "cleanup-backoff-max", "TRANSIT_CLEANUP_BACKOFF_MAX", time.Hour, "longest wait between a sandbox's deletion attempts")
	b.duration(&c.SweepInterval, "sweep-interval", "TRANSIT_SWEEP_INTERVAL", time.Minute, "expiry and cleanup sweep period; 0 disables")
	b.str(&c.Domains, "domains", "TRANSIT_DOMAINS", "", "domains whose commands to consume, comma-separated (default all)")
	b.str(&c.StreamRules, "stream-rules", "TRANSIT_STREAM_RULES", "", "extra stream fan-in rules, a JSON array")
	b.str(&c.SandboxExpiry, "sandbox-expiry", "TRANSIT_SANDBOX_EXPIRY", "timer", "how allocations expire: timer or sweep")
	b.integer(&c.TimerShards, "timer-shards", "TRANSIT_TIMER_SHARDS", 8, "number of durable timer shards (same on every instance)")
	b.duration(&c.TimerLease, "timer-lease", "TRANSIT_TIMER_LEASE", 15*time.Second, "timer shard claim lifetime without renewal")
	b.duration(&c.TimerPollInterval, "timer-poll-interval", "TRANSIT_TIMER_POLL_INTERVAL", time.Second, "how often owned timer shards are read")
	b.str(&c.Env, "env", "TRANSIT_ENV", EnvProduction, "production or development (development may store secrets unencrypted)")
	b.str(&c.KMSKey, "kms-key", "TRANSIT_KMS_KEY", "", "KMS key that seals stored secrets, or auto for alias/<prefix>-secrets")
	b.duration(&c.TaskLease, "task-lease", "TRANSIT_TASK_LEASE", 2*time.Minute, "an agent's lease on a task without a heartbeat")
	b.integer(&c.TaskMaxAttempts, "task-max-attempts", "TRANSIT_TASK_MAX_ATTEMPTS", 3, "leases a task gets before it ends stuck")
	b.duration(&c.AgentStaleAfter, "agent-stale-after", "TRANSIT_AGENT_STALE_AFTER", 90*time.Second, "silence after which an agent is stale")
	b.duration(&c.AgentOfflineAfter, "agent-offline-after", "TRANSIT_AGENT_OFFLINE_AFTER", 5*time.Minute, "further silence after which a stale agent is offline")
	b.str(&c.LogLevel, "log-level", "TRANSIT_LOG_LEVEL", "info", "debug, info, warn or error")
	b.str(&c.LogFormat, "log-format", "TRANSIT_LOG_FORMAT", "text", "text or json")
	b.str(&c.HTTPAddr, "http-addr", "TRANSIT_HTTP_ADDR", ":9090", "address of /healthz and /readyz (serve); off for none")
	b.str(&c.ConsoleToken, "console-token", "TRANSIT_CONSOLE_TOKEN", "", "password of the operator console on --http-addr; unset, it answers loopback clients only")
	b.str(&c.Capacity, "capacity", "TRANSIT_CAPACITY", CapacityOnDemand, "how provision bills the tables: on-demand or provisioned (with auto-scaling)")
	b.str(&c.TableCapacity, "table-capacity", "TRANSIT_TABLE_CAPACITY", "", "provisioned figures of some tables, as Tasks=50/40,Logs=200/100 (read/write units)")
	return b
}

// Resolve fills settings no flag set from lookupEnv (os.LookupEnv in
// production), then validates them all.
func (b *Binder) Resolve(c *Config, lookupEnv func(string) (string, bool)) error {
	set := map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, bd := range b.bindings {
		if set[bd.flag] || bd.env == "" {
			continue
		}
		if v, ok := lookupEnv(bd.env); ok && v != "" {
			if err := bd.set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", bd.env, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.Validate()
}

func (b *Binder) str(p *string, name, env, def, usage string) {
	b.fs.StringVar(p, name, def, usage+envNote(env))
	b.bindings = append(b.bindings, binding{name, env, func(v string) error { *p = v; return nil }})
}

func (b *Binder) integer(p *int, name, env string, def int, usage string) {
	b.fs.IntVar(p, name, def, usage+envNote(env))
	b.bindings = append(b.bindings, binding{name, env, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
		return nil
	}})
}

func (b *Binder) boolean(p *bool, name, env string, def bool, usage string) {
	b.fs.BoolVar(p, name, def, usage+envNote(env))
	b.bindings = append(b.bindings, binding{name, env, func(v string) error {
		t, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = t
		return nil
	}})
}

func (b *Binder) duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	b.fs.DurationVar(p, name, def, usage+envNote(env))
	b.bindings = append(b.bindings, binding{name, env, func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 30s or 5m", v)
		}
		*p = d
		return nil
	}})
}

func envNote(env string) string {
	if env == "" {
		return ""
	}
	return " [$" + env + "]"
}

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Validate checks every setting and reports all problems at once, each
// naming its variable and flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(env, flag, format string, args ...any) {
		name := "--" + flag
		if env != "" {
			name = env + " (--" + flag + ")"
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if c.Region == "" {
		bad("AWS_REGION", "region", "required")
	}
	if c.EndpointURL != "" && !isHTTPURL(c.EndpointURL) {
		bad("", "endpoint-url", "%q is not an http(s) URL", c.EndpointURL)
	}
	if !prefixPattern.MatchString(c.Prefix) {
		bad("TRANSIT_PREFIX", "prefix", "%q must be 1-40 letters, digits, '-' or '_'", c.Prefix)
	}
	if c.Concurrency < 1 || c.Concurrency > 1000 {
		bad("TRANSIT_CONCURRENCY", "concurrency", "%d, want 1 to 1000", c.Concurrency)
	}
	if c.CommandTimeout <= 0 {
		bad("TRANSIT_COMMAND_TIMEOUT", "command-timeout", "%s, want more than 0", c.CommandTimeout)
	}
	if c.DrainTimeout <= 0 {
		bad("TRANSIT_DRAIN_TIMEOUT", "drain-timeout", "%s, want more than 0", c.DrainTimeout)
	}
	// A second over the command timeout leaves an acked message time to
	// wait for its delete batch (transport's deleteLinger) and be deleted.
	if c.VisibilityTimeout%time.Second != 0 || c.VisibilityTimeout < c.CommandTimeout+time.Second || c.VisibilityTimeout > 12*time.Hour {
		bad("TRANSIT_VISIBILITY_TIMEOUT", "visibility-timeout", "%s, want whole seconds, at least a second more than the command timeout (%s) and at most 12h", c.VisibilityTimeout, c.CommandTimeout)
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		bad("TRANSIT_MAX_RECEIVE_COUNT", "max-receive-count", "%d, want 1 to 1000", c.MaxReceiveCount)
	}
	if c.RetryMax < 0 || c.RetryMax > 20 {
		bad("TRANSIT_RETRY_MAX", "retry-max", "%d, want 0 to 20", c.RetryMax)
	}
	if c.RetryInitial <= 0 {
		bad("TRANSIT_RETRY_INITIAL", "retry-initial", "%s, want more than 0", c.RetryInitial)
	}
	if c.AuditRetention < time.Hour {
		bad("TRANSIT_AUDIT_RETENTION", "audit-retention", "%s, want at least 1h", c.AuditRetention)
	}
	if c.LayerRetention < time.Minute {
		bad("TRANSIT_LAYER_RETENTION", "layer-retention", "%s, want at least 1m", c.LayerRetention)
	}
	if c.ProviderURL != "" && !isHTTPURL(c.ProviderURL) {
		bad("TRANSIT_PROVIDER_URL", "provider-url", "%q is not an http(s) URL", c.ProviderURL)
	}
	if c.ProviderTimeout <= 0 {
		bad("TRANSIT_PROVIDER_TIMEOUT", "provider-timeout", "%s, want more than 0", c.ProviderTimeout)
	}
	if c.CleanupMaxAttempts < 1 || c.CleanupMaxAttempts > 1000 {
		bad("TRANSIT_CLEANUP_MAX_ATTEMPTS", "cleanup-max-attempts", "%d, want 1 to 1000", c.CleanupMaxAttempts)
	}
	// Retry times are stored in whole seconds.
	if c.CleanupBackoff < time.Second {
		bad("TRANSIT_CLEANUP_BACKOFF", "cleanup-backoff", "%s, want at least 1s", c.CleanupBackoff)
	}
	if c.CleanupBackoffMax < c.CleanupBackoff || c.CleanupBackoffMax > 30*24*time.Hour {
		bad("TRANSIT_CLEANUP_BACKOFF_MAX", "cleanup-backoff-max", "%s, want at least the cleanup backoff (%s) and at most 720h", c.CleanupBackoffMax, c.CleanupBackoff)
	}
	if c.SweepInterval < 0 {
		bad("TRANSIT_SWEEP_INTERVAL", "sweep-interval", "%s, want 0 (off) or more", c.SweepInterval)
	}
	if c.SandboxExpiry != ExpiryTimer && c.SandboxExpiry != ExpirySweep {
		bad("TRANSIT_SANDBOX_EXPIRY", "sandbox-expiry", "%q, want timer or sweep", c.SandboxExpiry)
	}
	if c.TimerShards < 1 || c.TimerShards > 1000 {
		bad("TRANSIT_TIMER_SHARDS", "timer-shards", "%d, want 1 to 1000", c.TimerShards)
	}
	if c.TimerLease < time.Second {
		bad("TRANSIT_TIMER_LEASE", "timer-lease", "%s, want at least 1s", c.TimerLease)
	}
	if c.TimerPollInterval < 10*time.Millisecond || c.TimerPollInterval >= c.TimerLease {
		bad("TRANSIT_TIMER_POLL_INTERVAL", "timer-poll-interval", "%s, want at least 10ms and less than the timer lease (%s)", c.TimerPollInterval, c.TimerLease)
	}
	if c.Env != EnvProduction && c.Env != EnvDevelopment {
		bad("TRANSIT_ENV", "env", "%q, want production or development", c.Env)
	}
	if c.TaskLease < time.Second || c.TaskLease > 12*time.Hour {
		bad("TRANSIT_TASK_LEASE", "task-lease", "%s, want 1s to 12h", c.TaskLease)
	}
	if c.TaskMaxAttempts < 1 || c.TaskMaxAttempts > 100 {
		bad("TRANSIT_TASK_MAX_ATTEMPTS", "task-max-attempts", "%d, want 1 to 100", c.TaskMaxAttempts)
	}
	if c.AgentStaleAfter < time.Second {
		bad("TRANSIT_AGENT_STALE_AFTER", "agent-stale-after", "%s, want at least 1s", c.AgentStaleAfter)
	}
	// An agent's item expires an hour after its last heartbeat: it must
	// go offline (AGENT_OFFLINE) before that.
	if c.AgentOfflineAfter < time.Second || c.AgentStaleAfter+c.AgentOfflineAfter >= 55*time.Minute {
		bad("TRANSIT_AGENT_OFFLINE_AFTER", "agent-offline-after", "%s, want at least 1s, and with the stale delay (%s) under 55m: an agent's item expires an hour after its last heartbeat", c.AgentOfflineAfter, c.AgentStaleAfter)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("TRANSIT_LOG_LEVEL", "log-level", "%q, want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		bad("TRANSIT_LOG_FORMAT", "log-format", "%q, want text or json", c.LogFormat)
	}
	if c.OpsServed() {
		_, port, err := net.SplitHostPort(c.HTTPAddr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			bad("TRANSIT_HTTP_ADDR", "http-addr", "%q is not host:port, such as :9090 or 127.0.0.1:9090", c.HTTPAddr)
		}
	}
	if c.ConsoleToken != "" && len(c.ConsoleToken) < 16 {
		bad("TRANSIT_CONSOLE_TOKEN", "console-token", "%d characters, want at least 16: it is the console's only password", len(c.ConsoleToken))
	}
	// Empty, as in a Config built without Bind, is on demand.
	if c.Capacity != "" && c.Capacity != CapacityOnDemand && c.Capacity != CapacityProvisioned {
		bad("TRANSIT_CAPACITY", "capacity", "%q, want on-demand or provisioned", c.Capacity)
	}
	if _, err := store.ParseCapacityOverrides(c.TableCapacity); err != nil {
		bad("TRANSIT_TABLE_CAPACITY", "table-capacity", "%v", strings.ReplaceAll(err.Error(), "\n", "; "))
	} else if c.TableCapacity != "" && c.Capacity != CapacityProvisioned {
		bad("TRANSIT_TABLE_CAPACITY", "table-capacity", "%q is for provisioned tables, but TRANSIT_CAPACITY is %q", c.TableCapacity, c.Capacity)
	}
	return errors.Join(errs...)
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
