package messages

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// Timer is the durable timer service's domain (docs/timers.md).
const Timer Domain = "timer"

// Timer commands.
var (
	TimerCreate = command[TimerCreatePayload](Timer, "timer.create")
	TimerDelete = command[TimerDeletePayload](Timer, "timer.delete")
	TimerDue    = command[TimerDuePayload](Timer, "timer.due")
)

// Timer events.
var (
	TimerCreated = event[TimerCreatedPayload](Timer, "timer.created")
	TimerDeleted = event[TimerDeletedPayload](Timer, "timer.deleted")
	TimerFired   = event[TimerFiredPayload](Timer, "timer.fired")
	TimerFailed  = event[TimerFailedPayload](Timer, "timer.failed")
)

// Timer limits.
const (
	maxTimerPayload = 64 << 10
	// MaxCallbackTimeout bounds one callback; the command that runs it
	// must outlast it (TRANSIT_COMMAND_TIMEOUT).
	MaxCallbackTimeout     = time.Minute
	defaultCallbackTimeout = 10 * time.Second
	maxTimerHorizon        = 10 * 365 * 24 * time.Hour
	maxCallbackLength      = 2048
	maxAttempts            = 1000
	maxMultiplier          = 100
	// minTimerYear is the earliest year an execute time may be written
	// with: an earlier one is a mistake (the zero time, a missing field),
	// and a year is something a schema pattern can check.
	minTimerYear = 1970
)

// Callback schemes. sqs:// and sns:// name a queue or topic of the same
// account and region; the payload is sent to it as the message body.
const (
	CallbackSQS = "sqs"
	CallbackSNS = "sns"
)

// Callback URL parts (RFC 3986): an http(s) callback is a URI with a
// plain host name, so a schema pattern and this code accept the same set,
// every member of which net/url parses with a host.
const (
	uriChar       = `[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2}`
	httpCallback  = `https?://[A-Za-z0-9._~-]+(?::[0-9]{1,5})?(?:/(?:` + uriChar + `|/)*)?(?:\?(?:` + uriChar + `|[/?])*)?(?:#(?:` + uriChar + `|[/?])*)?`
	queueCallback = `(?:sqs|sns)://[A-Za-z0-9_-]{1,80}`
)

var (
	timerIDPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]*$`)
	idempotencySafe = regexp.MustCompile(`^[\x21-\x7e]+$`)
	callbackPattern = regexp.MustCompile(`^(?:` + httpCallback + `|` + queueCallback + `)$`)
	// durationPattern is what time.ParseDuration reads, without a minus
	// sign: no duration here is negative.
	durationPattern = `^[+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)$`
	// timerTimePattern is an RFC 3339 date-time from minTimerYear on.
	timerTimePattern = dateTimePattern(`(?:19[7-9][0-9]|[2-9][0-9]{3})`)
)

// Duration is a length of time written in JSON as a Go duration string:
// decimal numbers each with a unit (ns, us or µs, ms, s, m, h), such as
// "1.5s" or "2m30s"; never negative.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"1.5s\" or \"2m\": %w", err)
	}
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("duration %q is negative", s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: durationPattern}
}

// RetryPolicy says how a failing callback is retried: the n-th retry
// waits InitialInterval × Multiplierⁿ⁻¹, at most MaxInterval, until
// MaxAttempts calls were made or the next would start more than
// MaxTotalDuration after the first.
type RetryPolicy struct {
	MaxAttempts      int      `json:"max_attempts,omitempty"`
	MaxTotalDuration Duration `json:"max_total_duration,omitempty"`
	InitialInterval  Duration `json:"initial_interval,omitempty"`
	Multiplier       float64  `json:"multiplier,omitempty"`
	MaxInterval      Duration `json:"max_interval,omitempty"`
}

// DefaultRetryPolicy fills what a timer's policy leaves out.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:      5,
	MaxTotalDuration: Duration(24 * time.Hour),
	InitialInterval:  Duration(time.Second),
	Multiplier:       2,
	MaxInterval:      Duration(5 * time.Minute),
}

func (p *RetryPolicy) setDefaults() {
	d := DefaultRetryPolicy
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxTotalDuration == 0 {
		p.MaxTotalDuration = d.MaxTotalDuration
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.Multiplier == 0 {
		p.Multiplier = d.Multiplier
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = d.MaxInterval
	}
}

func (RetryPolicy) JSONSchemaExtend(s *jsonschema.Schema) {
	attempts := property(s, "max_attempts")
	integerRange(attempts, 0, maxAttempts)
	nullable(attempts)
	// 0 is the default; anything else is 1 to maxMultiplier.
	mult := property(s, "multiplier")
	mult.AnyOf = []*jsonschema.Schema{{Const: 0}, {Minimum: number(1), Maximum: number(maxMultiplier)}}
	nullable(mult)
	d := DefaultRetryPolicy
	attempts.Default, mult.Default = d.MaxAttempts, d.Multiplier
	property(s, "max_total_duration").Default = time.Duration(d.MaxTotalDuration).String()
	property(s, "initial_interval").Default = time.Duration(d.InitialInterval).String()
	property(s, "max_interval").Default = time.Duration(d.MaxInterval).String()
}

func (p *RetryPolicy) validate() error {
	p.setDefaults()
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > maxAttempts:
		return invalid("retry_policy.max_attempts", "%d, want 1 to %d", p.MaxAttempts, maxAttempts)
	case p.InitialInterval < 0 || p.MaxInterval < 0 || p.MaxTotalDuration < 0:
		return invalid("retry_policy", "durations must not be negative")
	case p.MaxInterval < p.InitialInterval:
		return invalid("retry_policy.max_interval", "%s is shorter than initial_interval %s",
			time.Duration(p.MaxInterval), time.Duration(p.InitialInterval))
	case p.Multiplier < 1 || p.Multiplier > maxMultiplier:
		return invalid("retry_policy.multiplier", "%g, want 1 to %d", p.Multiplier, maxMultiplier)
	}
	return nil
}

// Next is when to call again after the attempts-th call failed at now,
// for a timer first due at first; ok is false when the policy is spent.
func (p RetryPolicy) Next(attempts int, first, now time.Time) (next time.Time, ok bool) {
	if attempts >= p.MaxAttempts {
		return time.Time{}, false
	}
	wait := float64(p.InitialInterval) * math.Pow(p.Multiplier, float64(attempts-1))
	wait = math.Min(wait, float64(p.MaxInterval))
	next = now.Add(time.Duration(wait))
	if next.Sub(first) > time.Duration(p.MaxTotalDuration) {
		return time.Time{}, false
	}
	return next, true
}

// TimerCreatePayload creates a timer, or replaces the timer with the same
// ID (an upsert: the replacement gets a new timer_uuid, so a firing of the
// old one already under way does not delete it).
type TimerCreatePayload struct {
	// TimerID is the producer's name for the timer, an identifier.
	TimerID string `json:"timer_id"`
	// GroupID is free for the producer, e.g. to find its timers later.
	GroupID string `json:"group_id,omitempty"`
	// ExecuteAt is when the callback is due, RFC 3339; a time already
	// past is due at once.
	ExecuteAt time.Time `json:"execute_at"`
	// Callback is an http(s) URL to POST the payload to, or sqs://queue or
	// sns://topic to send it as a message.
	Callback string `json:"callback"`
	// Payload is any JSON value, delivered to the callback as it is.
	Payload json.RawMessage `json:"payload,omitempty"`
	// CallbackTimeout bounds one call; default 10s, at most 1m.
	CallbackTimeout Duration     `json:"callback_timeout,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
}

func (TimerCreatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	timerIDSchema(property(s, "timer_id"))
	group := property(s, "group_id")
	textSchema(group, maxKeyField)
	nullable(group)
	property(s, "execute_at").Pattern = timerTimePattern
	cb := property(s, "callback")
	cb.Pattern = callbackPattern.String()
	cb.MaxLength = count(maxCallbackLength)
	cb.Format = "uri"
	property(s, "callback_timeout").Default = defaultCallbackTimeout.String()
	nullable(property(s, "retry_policy"))
	goOnly(s,
		fmt.Sprintf("execute_at is at most %d years ahead", maxTimerHorizon/(365*24*time.Hour)),
		fmt.Sprintf("payload, as sent, is at most %d KiB of JSON", maxTimerPayload>>10),
		fmt.Sprintf("callback_timeout is at most %s (0s means the default)", MaxCallbackTimeout),
		"retry_policy's max_interval is not shorter than its initial_interval, defaults applied",
		fmt.Sprintf("a duration is at most %s (int64 nanoseconds)", time.Duration(math.MaxInt64)))
}

func (p *TimerCreatePayload) Validate() error {
	if err := checkTimerID(p.TimerID); err != nil {
		return err
	}
	if err := checkText("group_id", p.GroupID, maxKeyField); err != nil {
		return err
	}
	if err := checkExecuteAt(p.ExecuteAt); err != nil {
		return err
	}
	if time.Until(p.ExecuteAt) > maxTimerHorizon {
		return invalid("execute_at", "%s is more than 10 years ahead", p.ExecuteAt.Format(time.RFC3339))
	}
	if err := CheckCallback(p.Callback); err != nil {
		return err
	}
	if len(p.Payload) > maxTimerPayload {
		return invalid("payload", "%d bytes, at most %d", len(p.Payload), maxTimerPayload)
	}
	if p.CallbackTimeout == 0 {
		p.CallbackTimeout = Duration(defaultCallbackTimeout)
	}
	if p.CallbackTimeout < 0 || time.Duration(p.CallbackTimeout) > MaxCallbackTimeout {
		return invalid("callback_timeout", "%s, want more than 0 and at most %s", time.Duration(p.CallbackTimeout), MaxCallbackTimeout)
	}
	if p.RetryPolicy == nil {
		p.RetryPolicy = &RetryPolicy{}
	}
	return p.RetryPolicy.validate()
}

// CheckCallback accepts an http(s) URI with a host name, sqs://<queue
// name> or sns://<topic name>.
func CheckCallback(v string) error {
	if err := required("callback", v, maxCallbackLength); err != nil {
		return err
	}
	if callbackPattern.MatchString(v) {
		return nil
	}
	scheme, _, _ := strings.Cut(v, "://")
	switch scheme {
	case "http", "https":
		return invalid("callback", "%q: want %s://host[:port][/path][?query][#fragment], the host letters, digits, '.', '_', '~' or '-', the rest URI characters or %%XX escapes", v, scheme)
	case CallbackSQS, CallbackSNS:
		return invalid("callback", "%q: want %s://<name>, the name 1-80 letters, digits, '-' or '_'", v, scheme)
	}
	return invalid("callback", "%q: want an http(s) URL, sqs://queue or sns://topic", v)
}

// checkExecuteAt requires an execute time written from minTimerYear on;
// the year is the one written, whatever the offset.
func checkExecuteAt(t time.Time) error {
	switch {
	case t.IsZero():
		return invalid("execute_at", "required")
	case t.Year() < minTimerYear:
		return invalid("execute_at", "%s is before %d", t.Format(time.RFC3339Nano), minTimerYear)
	}
	return nil
}

func timerIDSchema(p *jsonschema.Schema) { patternSchema(p, timerIDPattern, maxKeyField) }

func checkTimerID(v string) error {
	if err := required("timer_id", v, maxKeyField); err != nil {
		return err
	}
	if !timerIDPattern.MatchString(v) {
		return invalid("timer_id", "%q is not an identifier (letters, digits and . _ : @ / -)", v)
	}
	return nil
}

// TimerDeletePayload deletes a timer; deleting one that does not exist
// succeeds.
type TimerDeletePayload struct {
	TimerID string `json:"timer_id"`
}

func (TimerDeletePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	timerIDSchema(property(s, "timer_id"))
}

func (p *TimerDeletePayload) Validate() error { return checkTimerID(p.TimerID) }

// TimerDuePayload says one firing of a timer is due: the timer as it was
// when its shard's owner scheduled it. ExecuteAt tells this firing from a
// later retry of the same timer.
type TimerDuePayload struct {
	Shard   int    `json:"shard"`
	TimerID string `json:"timer_id"`
	// TimerUUID is the stored timer's identity, sent to the callback as
	// its idempotency key.
	TimerUUID string    `json:"timer_uuid"`
	ExecuteAt time.Time `json:"execute_at"`
}

func (TimerDuePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	// encoding/json reads a missing shard as shard 0, which is valid.
	optional(s, "shard", 0)
	shard := property(s, "shard")
	integerRange(shard, 0, maxSafeInteger)
	nullable(shard)
	timerIDSchema(property(s, "timer_id"))
	uuid := property(s, "timer_uuid")
	uuid.Pattern = idempotencySafe.String()
	uuid.MaxLength = count(MaxIDLength)
	property(s, "execute_at").Pattern = timerTimePattern
}

func (p *TimerDuePayload) Validate() error {
	if p.Shard < 0 || int64(p.Shard) > maxSafeInteger {
		return invalid("shard", "%d, want 0 to %d", p.Shard, int64(maxSafeInteger))
	}
	if err := checkTimerID(p.TimerID); err != nil {
		return err
	}
	if err := required("timer_uuid", p.TimerUUID, MaxIDLength); err != nil {
		return err
	}
	if !idempotencySafe.MatchString(p.TimerUUID) {
		return invalid("timer_uuid", "contains spaces or non-ASCII characters")
	}
	return checkExecuteAt(p.ExecuteAt)
}

// TimerCreatedPayload reports a stored timer.
type TimerCreatedPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	GroupID   string    `json:"group_id,omitempty"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	Callback  string    `json:"callback"`
	// Replaced is the uuid of the timer this one replaced, if any.
	Replaced string `json:"replaced,omitempty"`
}

// TimerDeletedPayload reports a deletion; TimerUUID is empty when there
// was no such timer.
type TimerDeletedPayload struct {
	TimerID   string `json:"timer_id"`
	TimerUUID string `json:"timer_uuid,omitempty"`
	Shard     int    `json:"shard"`
}

// TimerFiredPayload reports a callback that succeeded; ExecuteAt is when
// that call was due (a retry's time, after failures).
type TimerFiredPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	FiredAt   time.Time `json:"fired_at"`
	Attempts  int       `json:"attempts"`
	// Rescheduled is the next execute time the callback asked for, and
	// NextUUID the uuid the rescheduled timer carries.
	Rescheduled *time.Time `json:"rescheduled,omitempty"`
	NextUUID    string     `json:"next_uuid,omitempty"`
}

// TimerFailedPayload reports a timer whose retry policy is spent; the
// timer is removed. ExecuteAt is when its last call was due.
type TimerFailedPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
}
