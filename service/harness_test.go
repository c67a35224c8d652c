package service_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/internal/emulator"
	"transit/messages"
	"transit/provider"
	"transit/service"
	"transit/store"
	"transit/transport"
)

// TestMain runs every test of this package against emulators it starts
// itself: moto server for SQS, SNS, STS and Lambda, and for DynamoDB either
// DynamoDB Local (the default) or moto (TRANSIT_TEST_DYNAMODB=moto). With
// TRANSIT_TEST_ENDPOINT it starts none and sends every service there (an
// emulator the user runs: LocalStack, moto). moto's TransactWriteItems is
// not atomic under concurrent requests: a cancelled transaction restores
// the tables it copied at its start and so can undo a concurrent one that
// committed (see DECISIONS.md), which the concurrency tests catch as a
// sandbox allocated twice; so wherever DynamoDB is moto's, those tests skip
// (motoSafe). Each test gets its own stack (prefix) and deletes it when it
// ends; after the run, anything still named under this run's prefixes fails
// it.
func TestMain(m *testing.M) {
	ctx := context.Background()
	// The SDK would prefer a per-service endpoint left in the environment
	// to the emulators chosen here.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_ENDPOINT_URL_") {
			os.Unsetenv(k)
		}
	}
	var stop func()
	var err error
	if url := emulator.Endpoint(); url != "" {
		stop, err = useEndpoint(ctx, url)
	} else {
		stop, err = startEmulators(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration tests:", err)
		os.Exit(1)
	}
	flag.Parse()
	if run := flag.Lookup("test.run"); os.Getenv("TRANSIT_TEST_DYNAMODB") == "moto" && run.Value.String() == "" {
		// Filtered rather than skipped one by one: a test whose subtests
		// each skip in newStack could still fail on what they left undone.
		_ = run.Value.Set(motoSafe.String())
		fmt.Fprintf(os.Stderr, "DynamoDB is moto's: only the tests matching %s run; the others race DynamoDB transactions, which moto does not keep atomic under concurrency (DECISIONS.md)\n", motoSafe)
	}
	code := m.Run()
	if err := checkLeftovers(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	stop()
	os.Exit(code)
}

// useEndpoint sends every service to the user's emulator. On moto, DynamoDB
// is moto's, which TRANSIT_TEST_DYNAMODB=moto says to every test.
func useEndpoint(ctx context.Context, url string) (stop func(), err error) {
	isMoto, err := emulator.Probe(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", emulator.EndpointVariable, err)
	}
	switch want := os.Getenv("TRANSIT_TEST_DYNAMODB"); {
	case want == "" || want == "moto" && isMoto:
	default:
		return nil, fmt.Errorf("TRANSIT_TEST_DYNAMODB=%s does not apply with %s: every service is at %s", want, emulator.EndpointVariable, url)
	}
	if isMoto {
		os.Setenv("TRANSIT_TEST_DYNAMODB", "moto")
	}
	setAWSEnv(url)
	fmt.Fprintf(os.Stderr, "integration tests on %s (moto: %t)\n", url, isMoto)
	return func() {}, nil
}

func startEmulators(ctx context.Context) (stop func(), err error) {
	moto, err := emulator.StartMoto(ctx, os.Getenv("TRANSIT_TEST_MOTO_LOG"))
	if err != nil {
		return nil, fmt.Errorf("need moto server: %w", err)
	}
	setAWSEnv(moto.URL)
	switch os.Getenv("TRANSIT_TEST_DYNAMODB") {
	case "moto":
		return moto.Stop, nil
	case "", "local":
		ddb, err := startDynamoDBLocal(ctx)
		if err != nil {
			moto.Stop()
			return nil, fmt.Errorf("need DynamoDB Local: %w", err)
		}
		os.Setenv("AWS_ENDPOINT_URL_DYNAMODB", ddb.URL)
		os.Setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", ddb.URL)
		return func() { ddb.Stop(); moto.Stop() }, nil
	default:
		moto.Stop()
		return nil, fmt.Errorf("TRANSIT_TEST_DYNAMODB: want local or moto")
	}
}

func setAWSEnv(endpoint string) {
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	} {
		os.Setenv(k, v)
	}
}

// names hands out the test stacks' prefixes and finds what they left.
var names emulator.TestNames

// checkLeftovers fails the run if a test left anything under its prefix:
// each test deletes its stack (newStack), and on a user's emulator a
// leftover would stay there.
func checkLeftovers(ctx context.Context) error {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("check for leftovers: %w", err)
	}
	left, err := names.Leftovers(ctx, cfg)
	if err != nil {
		return fmt.Errorf("check for leftovers: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("the tests left %d resources behind (remove a stack with transit deprovision --prefix P --yes):\n  %s",
		len(left), strings.Join(left, "\n  "))
}

// motoSafe matches the tests that race no DynamoDB transactions: the only
// ones that can pass where DynamoDB is moto's (DECISIONS.md). A sync of
// thousands of sandboxes is left out too: moto copies a table for every
// transaction, so it takes minutes there. There
// TestMain runs only these unless -run says otherwise, and newStack skips
// any other test that runs all the same; a new test that is safe is added
// here.
var motoSafe = regexp.MustCompile(`^(TestSandbox_transitions|TestSandbox_crash|TestSandbox_(cleanup|stale|reinstate|allocation_|release_(answer|taken)|sync_(refreshes|decides|pulls|without))|TestPoison|TestProvision_(twice|provisioned_capacity|switches_capacity_mode)|TestDLQ_redrive|TestLayers|TestWireForms|TestServe_without_a_provider|TestTimers_firing_|TestConsole|TestAgent_(runs|reports|stops)|TestTasks_(lifecycle|illegal)|TestSecrets|TestNucleus|TestAudit_recent|TestTracing|TestTrace_|TestStatus|TestOps_metrics_count_a_known_mix)`)

func startDynamoDBLocal(ctx context.Context) (*emulator.DynamoDBLocal, error) {
	dir, err := emulator.InstallDynamoDBLocal(ctx, emulator.DefaultCacheDir())
	if err != nil {
		return nil, err
	}
	return emulator.StartDynamoDBLocal(ctx, dir, os.Getenv("TRANSIT_TEST_DYNAMODB_LOG"))
}

// clock is a test clock: real time shifted by an offset the test sets.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time        { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Shift(d time.Duration) { c.offset.Store(int64(d)) }

// stack is one provisioned transit stack with a tap on its event topic and
// a provider stub behind a real HTTP server.
type stack struct {
	t        *testing.T
	svc      *service.Service
	cfg      config.Config
	provider *provider.Stub
	clock    *clock
	tap      *service.Tap
	queueURL string
	dlqURL   string

	mu     sync.Mutex
	events []service.TapEvent
}

func testConfig(prefix, providerURL string) config.Config {
	return config.Config{
		Region:            "us-east-1",
		Prefix:            prefix,
		Concurrency:       4,
		CommandTimeout:    4 * time.Second,
		DrainTimeout:      10 * time.Second,
		VisibilityTimeout: 5 * time.Second,
		MaxReceiveCount:   5,
		RetryMax:          3,
		RetryInitial:      20 * time.Millisecond,
		AuditRetention:    24 * time.Hour,
		LayerRetention:    time.Hour,
		ProviderURL:       providerURL,
		ProviderTimeout:   2 * time.Second,
		// The defaults; the cleanup tests shorten them.
		CleanupMaxAttempts: 10,
		CleanupBackoff:     time.Minute,
		CleanupBackoffMax:  time.Hour,
		// The sandbox tests drive expiry by sweep and a shifted clock;
		// TestSandbox_expired_by_its_timer covers the timers.
		SandboxExpiry:     config.ExpirySweep,
		TimerShards:       4,
		TimerLease:        3 * time.Second,
		TimerPollInterval: 250 * time.Millisecond,
		// The task tests shorten the lease and silences they play out.
		Env:               config.EnvProduction,
		TaskLease:         2 * time.Minute,
		TaskMaxAttempts:   3,
		AgentStaleAfter:   90 * time.Second,
		AgentOfflineAfter: 5 * time.Minute,
		LogLevel:          "warn",
	}
}

func newStack(t *testing.T, modify ...func(*config.Config)) *stack {
	t.Helper()
	if os.Getenv("TRANSIT_TEST_DYNAMODB") == "moto" && !motoSafe.MatchString(t.Name()) {
		t.Skip("races DynamoDB transactions, which moto does not keep atomic under concurrency (DECISIONS.md); runs with DynamoDB Local or LocalStack")
	}
	ctx := context.Background()
	stub := provider.NewStub()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	cfg := testConfig(names.Prefix(), srv.URL)
	for _, m := range modify {
		m(&cfg)
	}
	names.LambdaRegion(cfg.Region)
	require.NoError(t, cfg.Validate())
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	// Registered before provisioning, so a stack half provisioned goes too;
	// cleanups run last-in first-out, after the consumers and the tap stop.
	t.Cleanup(func() { removeStack(t, svc) })
	require.NoError(t, svc.Provision(ctx))
	tap, err := svc.NewTap(ctx, "", messages.Domains()...)
	require.NoError(t, err)
	t.Cleanup(func() { tap.Close(ctx) })
	s := &stack{t: t, svc: svc, cfg: cfg, provider: stub, clock: &clock{}, tap: tap}
	s.queueURL = s.url(svc.Stack.CommandQueue(messages.Sandbox))
	s.dlqURL = s.url(svc.Stack.DeadLetterQueue(messages.Sandbox))
	return s
}

// removeStack deletes the Lambda layers the test published under the
// stack's prefix, then the stack itself (service.Deprovision).
func removeStack(t *testing.T, svc *service.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, region := range layerRegions(ctx, svc) {
		names.LambdaRegion(region)
		assert.NoError(t, deleteLambdaLayers(ctx, svc, region), "delete Lambda layers in %s", region)
	}
	assert.NoError(t, svc.Deprovision(ctx), "deprovision stack %s", svc.Config.Prefix)
}

// layerRegions are the stack's region and every region its layers table
// recorded a layer version in: where its tests published Lambda layers.
func layerRegions(ctx context.Context, svc *service.Service) []string {
	regions := []string{svc.Config.Region}
	pages := dynamodb.NewScanPaginator(svc.DynamoDB, &dynamodb.ScanInput{
		TableName:            aws.String(store.TableName(svc.Config.Prefix, store.Layers)),
		ProjectionExpression: aws.String("rgn"),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			// No table (provisioning failed): nothing was recorded.
			return regions
		}
		for _, item := range page.Items {
			if r, ok := item["rgn"].(*types.AttributeValueMemberS); ok && !slices.Contains(regions, r.Value) {
				regions = append(regions, r.Value)
			}
		}
	}
	return regions
}

// deleteLambdaLayers deletes every version of the layers named under the
// stack's prefix in one region.
func deleteLambdaLayers(ctx context.Context, svc *service.Service, region string) error {
	client := lambda.NewFromConfig(svc.AWS, func(o *lambda.Options) { o.Region = region })
	var layers []string
	pages := lambda.NewListLayersPaginator(client, &lambda.ListLayersInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, l := range page.Layers {
			if strings.HasPrefix(aws.ToString(l.LayerName), svc.Config.Prefix+"-") {
				layers = append(layers, aws.ToString(l.LayerName))
			}
		}
	}
	for _, name := range layers {
		versions := lambda.NewListLayerVersionsPaginator(client, &lambda.ListLayerVersionsInput{LayerName: aws.String(name)})
		for versions.HasMorePages() {
			page, err := versions.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, v := range page.LayerVersions {
				if _, err := client.DeleteLayerVersion(ctx, &lambda.DeleteLayerVersionInput{LayerName: aws.String(name), VersionNumber: aws.Int64(v.Version)}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *stack) url(name string) string {
	out, err := s.svc.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	require.NoError(s.t, err)
	return aws.ToString(out.QueueUrl)
}

// serve runs one transit consumer until the test ends or stop is called;
// stop waits for its drain and returns Serve's error.
func (s *stack) serve(opts service.ServeOptions) (stop func() error) {
	return s.serveOn(s.svc, opts)
}

// serveOn runs svc (the stack's, or one wired differently) as serve does.
func (s *stack) serveOn(svc *service.Service, opts service.ServeOptions) (stop func() error) {
	if opts.Now == nil {
		opts.Now = s.clock.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := svc.Serve(ctx, opts)
		if ctx.Err() == nil {
			// Nothing asked it to stop: the test would only see a timeout.
			s.t.Errorf("serve stopped by itself: %v", err)
		}
		done <- err
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("serve did not stop within 30s")
			}
		})
		return err
	}
	s.t.Cleanup(func() { _ = stop() })
	return stop
}

// send sends a command the way a producer in any language would: the JSON
// envelope as the body and its type as an attribute.
func (s *stack) send(id string, t messages.Type, payload any) {
	body, err := messages.NewCommand(id, t, payload, time.Now())
	require.NoError(s.t, err)
	d, _ := messages.DomainOf(t)
	s.sendTo(s.url(s.svc.Stack.CommandQueue(d)), string(body), map[string]string{messages.TypeAttribute: string(t)})
}

// sendRaw sends any body to the sandbox command queue.
func (s *stack) sendRaw(body string, attrs map[string]string) {
	s.sendTo(s.queueURL, body, attrs)
}

func (s *stack) sendTo(queueURL, body string, attrs map[string]string) {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), MessageAttributes: map[string]sqstypes.MessageAttributeValue{}}
	for k, v := range attrs {
		in.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	_, err := s.svc.SQS.SendMessage(context.Background(), in)
	require.NoError(s.t, err)
}

// sync seeds the pool through the sync command and waits for its event.
func (s *stack) sync(externalIDs ...string) []string {
	return s.syncInventory(uuid.NewString(), inventoryOf(externalIDs...)).Added
}

// collect reads the tap until cond holds for the events seen so far.
func (s *stack) collect(timeout time.Duration, cond func([]service.TapEvent) bool) []service.TapEvent {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		seen := append([]service.TapEvent(nil), s.events...)
		s.mu.Unlock()
		if cond(seen) {
			return seen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("condition on events not met within %s; saw %d events", timeout, len(seen))
		}
		got, err := s.tap.Receive(context.Background(), 1)
		require.NoError(s.t, err)
		s.mu.Lock()
		s.events = append(s.events, got...)
		s.mu.Unlock()
	}
}

// causedBy lists the events caused by command id.
func causedBy(events []service.TapEvent, id string) []service.TapEvent {
	var out []service.TapEvent
	for _, e := range events {
		if e.Envelope.CausationID == id {
			out = append(out, e)
		}
	}
	return out
}

// eventFor waits for the one event command id caused and checks its type.
func (s *stack) eventFor(id string, want messages.Type) service.TapEvent {
	s.t.Helper()
	events := s.collect(60*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, id)) > 0 })
	ev := causedBy(events, id)[0]
	require.Equal(s.t, want, ev.Envelope.Type, "event of %s: %s", id, ev.Envelope.Payload)
	require.Equal(s.t, string(want), ev.Attributes[messages.TypeAttribute], "type attribute")
	require.Equal(s.t, messages.DerivedID(id, want, ""), ev.MessageID, "event ID derives from the command")
	return ev
}

func payloadOf[T any](t *testing.T, ev service.TapEvent) T {
	var p T
	require.NoError(t, json.Unmarshal(ev.Envelope.Payload, &p))
	return p
}

// sandbox reads a SandboxPool item as it is in the table.
func (s *stack) sandbox(id string) (store.Sandbox, bool) {
	sb, found, err := s.svc.Store.GetSandbox(context.Background(), id)
	require.NoError(s.t, err)
	return sb, found
}

// audit reads the recorded outcome of a command straight from the table.
func (s *stack) audit(commandID string) map[string]any {
	out, err := s.svc.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(store.TableName(s.cfg.Prefix, store.Audit)),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "CMD#" + commandID}, "sk": &types.AttributeValueMemberS{Value: "OUTCOME"}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(s.t, err)
	if out.Item == nil {
		return nil
	}
	var item map[string]any
	require.NoError(s.t, attributevalue.UnmarshalMap(out.Item, &item))
	return item
}

// auditCount counts every recorded outcome in the stack.
func (s *stack) auditCount() int {
	out, err := s.svc.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, store.Audit)),
		Select:    types.SelectCount,
	})
	require.NoError(s.t, err)
	return int(out.Count)
}

// deadLetters waits until the DLQ holds n messages and returns them.
func (s *stack) deadLetters(n int) []transport.DeadLetter {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		letters, err := transport.ListDeadLetters(context.Background(), s.svc.SQS, s.dlqURL, 100)
		require.NoError(s.t, err)
		if len(letters) >= n || time.Now().After(deadline) {
			require.Len(s.t, letters, n)
			return letters
		}
		time.Sleep(500 * time.Millisecond)
	}
}
