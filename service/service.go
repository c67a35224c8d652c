// Package service wires transit together: AWS clients, store, router and
// handlers. cmd/transit and the integration tests both build on it.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsns "github.com/ThreeDotsLabs/watermill-aws/sns"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"transit/config"
	"transit/handlers"
	"transit/machine"
	"transit/messages"
	"transit/metrics"
	"transit/provider"
	"transit/router"
	"transit/store"
	"transit/streams"
	"transit/timers"
	"transit/tracing"
	"transit/transport"
)

// Service holds one stack's clients and settings.
type Service struct {
	Config   config.Config
	AWS      aws.Config
	DynamoDB *dynamodb.Client
	// AutoScaling registers provisioned tables' auto-scaling (provision
	// only).
	AutoScaling *applicationautoscaling.Client
	SQS         *sqs.Client
	SNS         *sns.Client
	Stack       transport.Stack
	Store       *store.Store
	Logger      *slog.Logger
	// Calls counts every call the clients built from AWS make, for
	// /metrics; nil when the ops server is off (config.OpsServed).
	Calls *metrics.Calls
	// Tracing receives transit's spans (package tracing). New sets it
	// from the OTEL_* environment: the no-op provider, recording nothing,
	// unless OTEL_TRACES_EXPORTER names an exporter. Whoever sets another
	// (a test) instruments the AWS clients with it too, at New
	// (tracing.InstrumentAWS).
	Tracing trace.TracerProvider
	// flushTraces flushes and stops the provider New set up.
	flushTraces func(context.Context) error

	resolverMu sync.Mutex
	resolver   *wmsns.GenerateArnTopicResolver
	// queueURLs caches QueueURL's answers: a URL follows from the name.
	queueURLs sync.Map
}

// QueueURL is the URL of the stack's queue name, asked of SQS once per
// process.
func (s *Service) QueueURL(ctx context.Context, name string) (string, error) {
	if url, ok := s.queueURLs.Load(name); ok {
		return url.(string), nil
	}
	out, err := s.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", name, err)
	}
	s.queueURLs.Store(name, aws.ToString(out.QueueUrl))
	return aws.ToString(out.QueueUrl), nil
}

// New loads the AWS configuration (the SDK's chain: environment, shared
// files, instance role) and builds the clients. configure, if given,
// adjusts the AWS configuration first (the benchmark meters calls so).
func New(ctx context.Context, cfg config.Config, configure ...func(*aws.Config)) (*Service, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(cfg.Region),
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().
			// Longer than SQS's 20 s long poll.
			WithTimeout(35 * time.Second).
			// The SDK keeps 10 idle connections per host; each consumer
			// has a long poll, a handler's call, a publish and a delete in
			// flight at once, so past that every returning call closed its
			// connection and the next dialled a new one (a tenth of the
			// CPU at concurrency 16 on the emulators, and a TLS handshake
			// each on AWS).
			WithTransportOptions(func(t *http.Transport) {
				t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, 4*cfg.Concurrency*len(messages.Domains()))
				t.MaxIdleConns = max(t.MaxIdleConns, t.MaxIdleConnsPerHost)
			})),
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.EndpointURL != "" {
		awsCfg.BaseEndpoint = aws.String(cfg.EndpointURL)
	}
	for _, c := range configure {
		c(&awsCfg)
	}
	var calls *metrics.Calls
	if cfg.OpsServed() {
		calls = metrics.NewCalls()
		calls.Attach(&awsCfg)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("TRANSIT_LOG_LEVEL: %w", err)
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if cfg.LogFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(handler)
	// The SDK's own warnings go to the debug log: DynamoDB Local answers
	// every error (each lost condition race) with a checksum the SDK warns
	// about, which would drown everything else.
	awsCfg.Logger = logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
		logger.Debug(fmt.Sprintf(format, v...), "source", "aws-sdk")
	})
	tp, flushTraces, err := tracing.FromEnv(ctx)
	if err != nil {
		return nil, err
	}
	if tracing.Enabled(tp) {
		tracing.InstrumentAWS(&awsCfg, tp)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	return &Service{
		Config:      cfg,
		AWS:         awsCfg,
		DynamoDB:    ddb,
		AutoScaling: applicationautoscaling.NewFromConfig(awsCfg),
		SQS:         sqs.NewFromConfig(awsCfg),
		SNS:         sns.NewFromConfig(awsCfg),
		Stack:       transport.Stack{Prefix: cfg.Prefix},
		Store:       store.New(ddb, cfg.Prefix, store.Retention{Audit: cfg.AuditRetention, DeprecatedLayers: cfg.LayerRetention}),
		Logger:      logger,
		Calls:       calls,

		Tracing:     tp,
		flushTraces: flushTraces,
	}, nil
}

// FlushTraces exports the spans not yet sent and stops the exporter New
// set up from the environment: the last thing serve and send do.
func (s *Service) FlushTraces(ctx context.Context) error {
	return s.flushTraces(ctx)
}

// Provision creates every table, queue and topic of the stack; it is
// idempotent.
func (s *Service) Provision(ctx context.Context) error {
	capacity, err := s.capacity()
	if err != nil {
		return err
	}
	if err := store.Provision(ctx, s.DynamoDB, s.AutoScaling, s.Config.Prefix, capacity); err != nil {
		return err
	}
	return transport.Provision(ctx, s.SQS, s.SNS, s.Stack, s.queueSettings())
}

// capacity is how the tables are billed, from the configuration, for
// provisioning and its CloudFormation export alike.
func (s *Service) capacity() (store.Capacity, error) {
	overrides, err := store.ParseCapacityOverrides(s.Config.TableCapacity)
	if err != nil {
		return store.Capacity{}, fmt.Errorf("TRANSIT_TABLE_CAPACITY: %w", err)
	}
	return store.Capacity{Provisioned: s.Config.Capacity == config.CapacityProvisioned, Overrides: overrides}, nil
}

// queueSettings are the command queues' settings from the configuration,
// for provisioning and its CloudFormation export alike.
func (s *Service) queueSettings() transport.QueueSettings {
	return transport.QueueSettings{
		VisibilityTimeoutSeconds: int(s.Config.VisibilityTimeout / time.Second),
		MaxReceiveCount:          s.Config.MaxReceiveCount,
	}
}

// ServeOptions replace parts of the wiring; the zero value serves as in
// production.
type ServeOptions struct {
	// Provider replaces the HTTP sandbox provider client; one that also
	// has ListSandboxes (as the client has) serves sandbox.sync pulls.
	Provider interface {
		DeleteSandbox(ctx context.Context, externalID string) error
	}
	// Cloud replaces the client Nucleus windows start and stop resources
	// with (provider.Cloud); tests wrap it to die between a call and its
	// record.
	Cloud handlers.Cloud
	// WrapPublisher decorates the publisher every produced message goes
	// through; tests use it to inject a crash before publishing.
	WrapPublisher func(message.Publisher) message.Publisher
	// Now replaces the clock transitions decide by.
	Now func() time.Time
	// Console, when set, builds the operator console, served at / on
	// TRANSIT_HTTP_ADDR beside the ops endpoints; counts is this
	// replica's last minute of deliveries, as /status answers it.
	Console func(counts func() ServeStatus) http.Handler
}

// Serve consumes every domain's commands, and the streams of the tables
// the fan-in rules read, until ctx is cancelled, then drains: it stops
// receiving, lets in-flight commands and stream records finish and acks
// them.
func (s *Service) Serve(ctx context.Context, opts ServeOptions) error {
	opts = s.serveDefaults(opts)
	served, err := servedDomains(s.Config.Domains)
	if err != nil {
		return err
	}
	logger := watermill.NewSlogLogger(s.Logger)
	pub, err := s.publisher(ctx, logger)
	if err != nil {
		return err
	}
	var out message.Publisher = pub
	if opts.WrapPublisher != nil {
		out = opts.WrapPublisher(pub)
	}
	var counts *metrics.Metrics // nil: no ops server to read them
	if s.Config.OpsServed() {
		counts = metrics.New()
		if s.Calls != nil { // nil when the address was set after New
			counts.Register(s.Calls)
		}
	}
	domains, scheduler, err := s.domainHandlers(ctx, opts, served, counts)
	if err != nil {
		return err
	}
	r, rcfg, err := s.newRouter(logger, counts)
	if err != nil {
		return err
	}
	sub := transport.NewSubscriber(s.SQS, transport.SubscriberConfig{Concurrency: s.Config.Concurrency}, logger)
	for d, h := range domains {
		if err := router.Register(r, rcfg, d, sub, out, h); err != nil {
			return err
		}
	}
	fanin, err := s.registerFanIn(r, out, served, logger)
	if err != nil {
		return err
	}
	// Background work stops with Serve, even when Serve fails before ctx
	// ends.
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer func() {
		stopBackground()
		background.Wait()
	}()
	if scheduler != nil {
		background.Go(func() { scheduler.Run(bgCtx) })
	}
	if sweeps := s.sweeps(opts); len(sweeps) > 0 {
		background.Go(func() { s.sweep(bgCtx, pub, opts.Now, sweeps) })
	}
	stopOps, err := s.serveOps(&probe{serving: ctx, svc: s, served: served, router: r, scheduler: scheduler}, counts, s.state(served, scheduler, fanin), opts.Console)
	if err != nil {
		return err
	}
	defer stopOps()
	return s.runRouter(ctx, r, sub, fanin)
}

// serveDefaults fills in the production wiring opts leaves out.
func (s *Service) serveDefaults(opts ServeOptions) ServeOptions {
	if opts.Provider == nil && s.Config.ProviderURL != "" {
		opts.Provider = provider.New(s.Config.ProviderURL, s.Config.ProviderTimeout)
	}
	if opts.Provider == nil {
		s.Logger.Warn("no sandbox provider configured (TRANSIT_PROVIDER_URL): sandbox.cleanup is answered sandbox.deletion-failed (provider_not_configured) and the cleanup sweep is off")
	}
	if opts.Cloud == nil {
		opts.Cloud = provider.NewCloud(s.AWS)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

// newRouter is the router with the configured retry, timeouts, log and
// metrics.
func (s *Service) newRouter(logger watermill.LoggerAdapter, counts *metrics.Metrics) (*message.Router, router.Config, error) {
	cfg := router.Config{
		Metrics:        counts,
		Tracing:        s.Tracing,
		Stack:          s.Stack,
		CommandTimeout: s.Config.CommandTimeout,
		CloseTimeout:   s.Config.DrainTimeout,
		Log:            s.Logger,
		Retry: middleware.Retry{
			MaxRetries:      s.Config.RetryMax,
			InitialInterval: s.Config.RetryInitial,
			MaxInterval:     2 * time.Second,
			Multiplier:      2,
		},
	}
	r, err := router.New(cfg, logger)
	return r, cfg, err
}

// domainHandlers builds the handler of every served domain, and the timer
// scheduler when timers are served (nil otherwise).
func (s *Service) domainHandlers(ctx context.Context, opts ServeOptions, served map[messages.Domain]bool, counts *metrics.Metrics) (map[messages.Domain]router.Handler, *timers.Scheduler, error) {
	domains := map[messages.Domain]router.Handler{}
	if served[messages.Sandbox] {
		sandbox := handlers.NewSandbox(s.Store, opts.Provider, opts.Now).WithCleanupPolicy(machine.CleanupPolicy{
			MaxAttempts: s.Config.CleanupMaxAttempts, Backoff: s.Config.CleanupBackoff, BackoffMax: s.Config.CleanupBackoffMax,
		})
		if s.Config.SandboxExpiry == config.ExpiryTimer {
			sandbox.WithExpiryTimers(s.Stack.CommandQueue(messages.Sandbox))
		}
		domains[messages.Sandbox] = sandbox
	}
	if served[messages.Layer] {
		domains[messages.Layer] = handlers.NewLayer(s.Store, provider.NewLambda(s.AWS), opts.Now)
	}
	if served[messages.Org] {
		sealer, err := s.sealer(ctx)
		if err != nil {
			return nil, nil, err
		}
		domains[messages.Org] = handlers.NewOrg(s.Store, sealer, s.Config.Env == config.EnvDevelopment, opts.Now)
	}
	if served[messages.Task] {
		domains[messages.Task] = handlers.NewTaskFor(s.Store, s.Config, s.Stack.CommandQueue(messages.Task), opts.Now)
	}
	if served[messages.Nucleus] {
		domains[messages.Nucleus] = handlers.NewNucleus(s.Store, opts.Cloud, s.Stack.CommandQueue(messages.Nucleus), opts.Now)
	}
	if !served[messages.Timer] {
		return domains, nil, nil
	}
	scheduler, err := s.scheduler(ctx)
	if err != nil {
		return nil, nil, err
	}
	caller, err := s.TimerCaller(ctx)
	if err != nil {
		return nil, nil, err
	}
	timer := handlers.NewTimer(s.Store, scheduler, caller, opts.Now)
	if counts != nil {
		timer = timer.WithLateness(counts.FiringLate)
	}
	domains[messages.Timer] = timer
	return domains, scheduler, nil
}

// registerFanIn adds a handler per streamed table for the built-in layer
// rule and TRANSIT_STREAM_RULES, those whose commands go to a served
// domain, and returns the streams subscriber they read through.
func (s *Service) registerFanIn(r *message.Router, out message.Publisher, served map[messages.Domain]bool, logger watermill.LoggerAdapter) (*streams.Subscriber, error) {
	rules, err := router.ParseStreamRules(s.Config.StreamRules)
	if err != nil {
		return nil, fmt.Errorf("TRANSIT_STREAM_RULES (--stream-rules): %w", err)
	}
	layerRule := router.LayerRemovedRule
	if s.Config.LayerDeleteOnAnyRemove {
		layerRule = router.LayerRemovedOnAnyRemove()
		s.Logger.Info("TRANSIT_LAYER_DELETE_ON_ANY_REMOVE: any removal of a layer version item deletes it from Lambda, not only TTL's")
	}
	rules = append([]router.StreamRule{layerRule}, rules...)
	rules = slices.DeleteFunc(rules, func(r router.StreamRule) bool {
		d, _ := messages.DomainOf(r.Command)
		return !served[d]
	})
	fanin, err := streams.NewSubscriber(streams.SubscriberConfig{
		Tables:        s.DynamoDB,
		Streams:       dynamodbstreams.NewFromConfig(s.AWS),
		Leases:        streams.NewDynamoDBLeaseStore(s.DynamoDB, store.TableName(s.Config.Prefix, store.StreamLeases)),
		ConsumerGroup: fanInGroup,
		CloseTimeout:  s.Config.DrainTimeout,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("stream fan-in: %w", err)
	}
	for _, t := range router.StreamedTables(rules) {
		router.RegisterFanIn(r, store.TableName(s.Config.Prefix, t), t.Name, fanin, out, rules, s.Logger)
	}
	return fanin, nil
}

// sweeps are the periodic sweeps to send: expiry, and cleanup when a
// provider can delete; none when TRANSIT_SWEEP_INTERVAL is 0.
func (s *Service) sweeps(opts ServeOptions) []messages.Type {
	if s.Config.SweepInterval <= 0 {
		return nil
	}
	if opts.Provider == nil {
		return []messages.Type{messages.SandboxExpire}
	}
	return []messages.Type{messages.SandboxExpire, messages.SandboxCleanup}
}

// runRouter runs r until ctx ends, then drains both subscribers and
// closes it. The router runs on its own context, ended by Close: a stop
// that comes while it is still subscribing waits for the start to finish,
// so no handler already started is left running after Serve returns.
func (s *Service) runRouter(ctx context.Context, r *message.Router, drainers ...router.Drainer) error {
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	select {
	case <-r.Running():
	case err := <-ran:
		return err
	case <-ctx.Done():
		select {
		case <-r.Running():
		case err := <-ran:
			return err
		case <-time.After(s.Config.DrainTimeout):
			return fmt.Errorf("stopped while starting: the router did not start within the drain timeout (%s)", s.Config.DrainTimeout)
		}
	}
	<-ctx.Done()
	// The drain: the subscribers stop receiving and what is in flight
	// finishes and is acked, then the router closes. Only a running router
	// may be closed: Close during RunHandlers waits on the router's own
	// lock until its timeout.
	return errors.Join(router.Shutdown(r, s.Config.DrainTimeout, drainers...), <-ran)
}

// servedDomains parses TRANSIT_DOMAINS: every domain when empty.
func servedDomains(list string) (map[messages.Domain]bool, error) {
	served := map[messages.Domain]bool{}
	known := messages.Domains()
	if strings.TrimSpace(list) == "" {
		for _, d := range known {
			served[d] = true
		}
		return served, nil
	}
	for _, name := range strings.Split(list, ",") {
		d := messages.Domain(strings.TrimSpace(name))
		if !slices.Contains(known, d) {
			return nil, fmt.Errorf("TRANSIT_DOMAINS (--domains): %q is not a domain; domains: %v", d, known)
		}
		served[d] = true
	}
	return served, nil
}

// publisher sends events to SNS and commands to SQS.
func (s *Service) publisher(ctx context.Context, logger watermill.LoggerAdapter) (*transport.Publisher, error) {
	topics, queues, err := s.transports(ctx, logger)
	if err != nil {
		return nil, err
	}
	return transport.NewPublisher(s.Stack, topics, queues).Traced(s.Tracing), nil
}

// transports are the SNS and SQS publishers, which take a topic or queue
// name. Topic ARNs are built from the caller's account, read once from STS.
func (s *Service) transports(ctx context.Context, logger watermill.LoggerAdapter) (topics, queues message.Publisher, err error) {
	resolver, err := s.topicResolver(ctx)
	if err != nil {
		return nil, nil, err
	}
	topics, err = wmsns.NewPublisher(wmsns.PublisherConfig{
		AWSConfig:                   s.AWS,
		TopicResolver:               resolver,
		DoNotCreateTopicIfNotExists: true,
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("SNS publisher: %w", err)
	}
	queues, err = wmsqs.NewPublisher(wmsqs.PublisherConfig{
		AWSConfig:                   s.AWS,
		DoNotCreateQueueIfNotExists: true,
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("SQS publisher: %w", err)
	}
	return topics, queues, nil
}

// topicResolver builds topic ARNs in the caller's account, read from STS
// once per Service (publishers, taps and sends all need it).
func (s *Service) topicResolver(ctx context.Context) (*wmsns.GenerateArnTopicResolver, error) {
	s.resolverMu.Lock()
	defer s.resolverMu.Unlock()
	if s.resolver != nil {
		return s.resolver, nil
	}
	id, err := sts.NewFromConfig(s.AWS).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return nil, fmt.Errorf("read AWS account: %w", err)
	}
	r, err := wmsns.NewGenerateArnTopicResolver(aws.ToString(id.Account), s.AWS.Region)
	if err != nil {
		return nil, err
	}
	s.resolver = r
	return r, nil
}

// sweep sends the sweeps (expiry, cleanup) every SweepInterval. A sweep's
// ID names its interval, so replicas sweeping in the same interval fan out
// the same command IDs and each sandbox is handled once.
func (s *Service) sweep(ctx context.Context, pub message.Publisher, now func() time.Time, sweeps []messages.Type) {
	tick := time.NewTicker(s.Config.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		slot := now().Truncate(s.Config.SweepInterval).UTC().Format(time.RFC3339)
		for _, t := range sweeps {
			payload, _ := messages.NewCommandPayload(t)
			msg, err := transport.NewCommand("sweep/"+string(t)+"/"+slot, t, payload, now())
			if err == nil {
				err = pub.Publish(transport.ByType, msg)
			}
			if err != nil {
				s.Logger.Error("sweep not sent", "type", t, "error", err)
			}
		}
	}
}

// sealer seals the org's stored secrets with the KMS key of
// TRANSIT_KMS_KEY ("auto": alias/<prefix>-secrets, created if missing).
// Without one it is nil: development stores secrets unencrypted, and
// anywhere else they are refused; a WARN line says which at start.
func (s *Service) sealer(ctx context.Context) (handlers.Sealer, error) {
	key := s.Config.KMSKey
	if key == "" {
		if s.Config.Env == config.EnvDevelopment {
			s.Logger.Warn("no KMS key configured (TRANSIT_KMS_KEY) in development: secrets are stored unencrypted, marked encrypted=false")
		} else {
			s.Logger.Warn("no KMS key configured (TRANSIT_KMS_KEY): secret.stored and secret.rotated are refused (plaintext_refused)")
		}
		return nil, nil
	}
	client := kms.NewFromConfig(s.AWS)
	if key == "auto" {
		var err error
		if key, err = provider.EnsureKey(ctx, client, "alias/"+s.Config.Prefix+"-secrets"); err != nil {
			return nil, fmt.Errorf("TRANSIT_KMS_KEY=auto: %w", err)
		}
	}
	return provider.NewSealer(client, key), nil
}

// TimerCaller runs timer callbacks: HTTP, or the account's queues and topics.
func (s *Service) TimerCaller(ctx context.Context) (*timers.Caller, error) {
	topics, queues, err := s.transports(ctx, watermill.NewSlogLogger(s.Logger))
	if err != nil {
		return nil, err
	}
	return timers.NewCaller(queues, topics), nil
}

// scheduler is this instance's share of the timer shards; it sends
// timer.due in batches straight to the timer command queue. A firing's
// message ID names the timer's uuid and due time, so every instance that
// ever sends it sends the same command.
func (s *Service) scheduler(ctx context.Context) (*timers.Scheduler, error) {
	queueURL, err := s.QueueURL(ctx, s.Stack.CommandQueue(messages.Timer))
	if err != nil {
		return nil, fmt.Errorf("timer scheduler: %w", err)
	}
	host, _ := os.Hostname()
	meta, _ := json.Marshal(map[string]any{"host": host, "pid": os.Getpid()})
	cfg := timers.Config{
		Shards:       s.Config.TimerShards,
		Lease:        s.Config.TimerLease,
		PollInterval: s.Config.TimerPollInterval,
		// Enough to keep this instance's consumers busy between polls.
		MaxOutstanding: max(100, 10*s.Config.Concurrency),
		OwnerID:        fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8]),
		Metadata:       string(meta),
	}
	return timers.NewScheduler(cfg, s.Store, func(ctx context.Context, dues []timers.Due) error {
		msgs := make([]*message.Message, len(dues))
		for i, due := range dues {
			id := messages.DerivedID(due.Payload.TimerUUID, messages.TimerDue, store.At(due.Payload.ExecuteAt).String())
			msg, err := transport.NewCommand(id, messages.TimerDue, due.Payload, time.Now(), due.Cause)
			if err != nil {
				return err
			}
			msgs[i] = msg
		}
		return transport.SendBatch(ctx, s.SQS, queueURL, msgs, s.Tracing)
	}, s.Logger), nil
}

// Send sends a command to its domain's queue, as a producer would.
func (s *Service) Send(ctx context.Context, id string, t messages.Type, payload any) error {
	pub, err := s.publisher(ctx, watermill.NewSlogLogger(s.Logger))
	if err != nil {
		return err
	}
	msg, err := transport.NewCommand(id, t, payload, time.Now())
	if err != nil {
		return err
	}
	return pub.Publish(transport.ByType, msg)
}
