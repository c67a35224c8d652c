package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"transit/config"
	"transit/internal/metering"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// Roles of the process under measurement.
const (
	RoleTransit  = "transit"
	RoleBaseline = "baseline"
)

// PipelineResult is one role at one concurrency.
type PipelineResult struct {
	Role        string          `json:"role"`
	Concurrency int             `json:"concurrency"`
	Commands    int             `json:"commands"`
	Elapsed     time.Duration   `json:"elapsed_ns"`
	PerSecond   float64         `json:"commands_per_second"`
	P50         time.Duration   `json:"latency_p50_ns"`
	P99         time.Duration   `json:"latency_p99_ns"`
	Cost        metering.Report `json:"cost"`
	// Anomalies counts outcomes that contradict an earlier event: a track
	// told its own fresh sandbox is not its own. Zero on DynamoDB Local;
	// moto's non-atomic transactions produce them (DECISIONS.md).
	Anomalies int `json:"anomalies"`
	// Replicas is how many workers served the stack (one but in the
	// scale-out case), each at Concurrency; Cost is their sum.
	Replicas int `json:"replicas"`
	// Repeats counts commands answered again with the same outcome (a
	// redelivery replayed); Doubled those answered again with another
	// outcome: applied twice.
	Repeats int `json:"repeats"`
	Doubled int `json:"doubled"`
}

// stack is one freshly provisioned stack with its event reader: the
// clients' side of one domain.
type stack struct {
	svc      *service.Service
	queueURL string
	tap      *service.Tap
	// stopDispatch ends the event reader; dispatched is closed when it has.
	stopDispatch context.CancelFunc
	dispatched   chan struct{}

	mu      sync.Mutex
	waiters map[string]chan service.TapEvent
	// outcomes is each command's first answer, its type and payload, to
	// tell an answer repeated from one that differs.
	outcomes  map[string]string
	anomalies atomic.Int32
	repeats   atomic.Int32
	doubled   atomic.Int32
}

// newStack provisions a stack named prefix and seeds a pool of n sandboxes.
func newStack(ctx context.Context, prefix string, pool int) (*stack, error) {
	svc, err := provisioned(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if err := seed(ctx, svc, prefix, pool); err != nil {
		return nil, err
	}
	return openStack(ctx, svc, messages.Sandbox)
}

// provisioned is a freshly provisioned stack named prefix.
func provisioned(ctx context.Context, prefix string) (*service.Service, error) {
	cfg, err := defaultConfig(prefix)
	if err != nil {
		return nil, err
	}
	svc, err := service.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return svc, svc.Provision(ctx)
}

// openStack is the clients' side of svc's domain d: its command queue
// to send to, and a tap on its events with their reader running.
func openStack(ctx context.Context, svc *service.Service, d messages.Domain) (*stack, error) {
	q, err := svc.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(svc.Stack.CommandQueue(d))})
	if err != nil {
		return nil, err
	}
	tap, err := svc.NewTap(ctx, "", d)
	if err != nil {
		return nil, err
	}
	dctx, stop := context.WithCancel(ctx)
	s := &stack{svc: svc, queueURL: aws.ToString(q.QueueUrl), tap: tap, waiters: map[string]chan service.TapEvent{}, outcomes: map[string]string{},
		stopDispatch: stop, dispatched: make(chan struct{})}
	go s.dispatch(dctx)
	return s, nil
}

// defaultConfig is the configuration transit would run with, from the
// environment, under another prefix.
func defaultConfig(prefix string) (config.Config, error) {
	var cfg config.Config
	binder := config.Bind(flag.NewFlagSet("bench", flag.ContinueOnError), &cfg)
	if err := binder.Resolve(&cfg, os.LookupEnv); err != nil {
		return cfg, err
	}
	cfg.Prefix = prefix
	return cfg, cfg.Validate()
}

// seed adds sandboxes through the store's sync, 99 at a time (one
// transaction each); every call lists all so far, so none goes stale.
func seed(ctx context.Context, svc *service.Service, prefix string, n int) error {
	var inventory []messages.InventoryItem
	for i := 0; i < n; {
		for j := 0; j < 99 && i < n; j, i = j+1, i+1 {
			inventory = append(inventory, messages.InventoryItem{ExternalID: fmt.Sprintf("%s-ext-%d", prefix, i), Name: fmt.Sprintf("lab-%d", i), LabDurationHours: 4})
		}
		cmd := store.Cmd{ID: uuid.NewString(), Type: string(messages.SandboxSync), At: time.Now()}
		if _, err := svc.Store.Sync(ctx, cmd, inventory); err != nil {
			return fmt.Errorf("seed pool: %w", err)
		}
	}
	return nil
}

// close stops the event reader before deleting its queue: a reader left
// polling a deleted queue fails at once, again and again, and loaded moto
// for every measurement after it (transit's always ran after its baseline).
func (s *stack) close(ctx context.Context) {
	s.stopDispatch()
	<-s.dispatched
	s.tap.Close(ctx)
}

// dispatch hands each event to whoever waits for its command.
func (s *stack) dispatch(ctx context.Context) {
	defer close(s.dispatched)
	for ctx.Err() == nil {
		events, err := s.tap.Receive(ctx, 1)
		if err != nil {
			// Not a busy loop if the emulator keeps failing.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		for _, ev := range events {
			if ch := s.answer(ev); ch != nil {
				ch <- ev
			}
		}
	}
}

// answer records ev as an answer to its command, counting a second one
// as repeated or doubled, and returns the channel of whoever waits for
// the first.
func (s *stack) answer(ev service.TapEvent) chan service.TapEvent {
	id, outcome := ev.Envelope.CausationID, string(ev.Envelope.Type)+" "+string(ev.Envelope.Payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.waiters[id]
	delete(s.waiters, id)
	first, answered := s.outcomes[id]
	switch {
	case !answered:
		s.outcomes[id] = outcome
	case first == outcome:
		s.repeats.Add(1)
	default:
		s.doubled.Add(1)
	}
	return ch
}

// do sends one command and waits for its event.
func (s *stack) do(ctx context.Context, t messages.Type, payload any) (service.TapEvent, error) {
	id := uuid.NewString()
	ch := make(chan service.TapEvent, 1)
	s.mu.Lock()
	s.waiters[id] = ch
	s.mu.Unlock()
	if err := s.send(ctx, id, t, payload); err != nil {
		return service.TapEvent{}, err
	}
	select {
	case ev := <-ch:
		return ev, nil
	case <-time.After(2 * time.Minute):
		return service.TapEvent{}, fmt.Errorf("no event for %s %s within 2m", t, id)
	case <-ctx.Done():
		return service.TapEvent{}, ctx.Err()
	}
}

func (s *stack) send(ctx context.Context, id string, t messages.Type, payload any) error {
	body, err := messages.NewCommand(id, t, payload, time.Now())
	if err != nil {
		return err
	}
	_, err = s.svc.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(s.queueURL),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(t))},
		},
	})
	return err
}

// cycle allocates a sandbox to track and releases it: two commands.
func (s *stack) cycle(ctx context.Context, track string, latencies chan<- time.Duration) error {
	began := time.Now()
	ev, err := s.do(ctx, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: track})
	if err != nil {
		return err
	}
	latencies <- time.Since(began)
	if ev.Envelope.Type != messages.SandboxAllocated {
		// The pool is sized for every cycle: only lost writes empty it.
		s.anomalies.Add(1)
		return nil
	}
	var p messages.SandboxAllocatedPayload
	if err := json.Unmarshal(ev.Envelope.Payload, &p); err != nil {
		return err
	}
	began = time.Now()
	ev, err = s.do(ctx, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: p.SandboxID, TrackID: track})
	if err != nil {
		return err
	}
	latencies <- time.Since(began)
	if ev.Envelope.Type != messages.SandboxDeletionMarked {
		s.anomalies.Add(1)
	}
	return nil
}

// worker is the process under measurement: transit's serve or the
// baseline, each a worker subcommand of the transit-bench binary
// (bench-serve, bench-baseline) that meters itself.
type worker struct {
	cmd   *exec.Cmd
	stats string
}

// startWorker starts the process for role with env added to this
// process's environment; extra flags come last and win.
// The sandbox pipeline's allocations arm no expiry timers: the baseline
// has none, and the timer case measures timers on its own.
func startWorker(exe, dir, role, prefix string, concurrency int, env []string, extra ...string) (*worker, error) {
	stats := filepath.Join(dir, fmt.Sprintf("%s-c%d.stats.json", role, concurrency))
	args := []string{"bench-serve", "--prefix", prefix, "--concurrency", strconv.Itoa(concurrency),
		"--stats-out", stats, "--sweep-interval", "0", "--provider-url", "http://127.0.0.1:9", "--log-level", "warn",
		"--domains", string(messages.Sandbox), "--sandbox-expiry", "sweep",
		// Replicas side by side: each its own ops port.
		"--http-addr", "127.0.0.1:0"}
	if role == RoleBaseline {
		args[0] = "bench-baseline"
	}
	cmd := exec.Command(exe, append(args, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	return &worker{cmd: cmd, stats: stats}, nil
}

// mark asks the worker for its figures so far and waits for them.
func (w *worker) mark() (metering.Report, error) {
	_ = os.Remove(w.stats + ".mark")
	if err := w.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return metering.Report{}, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := readReport(w.stats + ".mark"); err == nil {
			return r, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return metering.Report{}, errors.New("worker wrote no mark")
}

// stop drains the worker with SIGTERM and returns its final figures.
func (w *worker) stop() (metering.Report, error) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return metering.Report{}, fmt.Errorf("worker exited: %w", err)
		}
	case <-time.After(60 * time.Second):
		_ = w.cmd.Process.Kill()
		return metering.Report{}, errors.New("worker did not drain within 60s")
	}
	return readReport(w.stats)
}

func readReport(path string) (metering.Report, error) {
	var r metering.Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// runPipeline measures one role at one concurrency: cycles allocate +
// mark-deletion cycles by as many closed-loop clients as the concurrency.
// The worker gets env and extra flags (startWorker).
func runPipeline(ctx context.Context, o Options, role string, concurrency int, env []string, extra ...string) (PipelineResult, error) {
	return runReplicas(ctx, o, role, concurrency, 1, env, extra...)
}

// runReplicas is runPipeline with replicas workers of role serving one
// stack, each at concurrency, and as many clients as all their consumer
// slots together.
func runReplicas(ctx context.Context, o Options, role string, concurrency, replicas int, env []string, extra ...string) (PipelineResult, error) {
	prefix := fmt.Sprintf("b%s%d-%s", role[:1], concurrency, uuid.NewString()[:6])
	if replicas > 1 {
		prefix = fmt.Sprintf("b%s%dx%d-%s", role[:1], concurrency, replicas, uuid.NewString()[:6])
	}
	cycles, slots := o.Commands/2, replicas*concurrency
	st, err := newStack(ctx, prefix, cycles+slots)
	if err != nil {
		return PipelineResult{}, err
	}
	defer st.close(ctx)
	// workers[stopped:] are still running if the measurement fails.
	workers, stopped := make([]*worker, 0, replicas), 0
	defer func() {
		for _, w := range workers[stopped:] {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	}()
	for i := range replicas {
		flags := extra
		var stats string
		if replicas > 1 {
			// Stats of its own each: startWorker names them by role and
			// concurrency only.
			stats = filepath.Join(o.OutDir, fmt.Sprintf("%s-x%d-r%d-c%d.stats.json", role, replicas, i+1, concurrency))
			flags = append(slices.Clone(extra), "--stats-out", stats)
		}
		w, err := startWorker(o.Executable, o.OutDir, role, prefix, concurrency, env, flags...)
		if err != nil {
			return PipelineResult{}, err
		}
		if stats != "" {
			w.stats = stats
		}
		workers = append(workers, w)
	}
	discard := make(chan time.Duration, 2*slots)
	// Warm-up: one cycle per client, so connections and caches are set up
	// before the figures start.
	if err := clients(ctx, st, slots, slots, "warm", discard); err != nil {
		return PipelineResult{}, err
	}
	starts := make([]metering.Report, replicas)
	for i, w := range workers {
		if starts[i], err = w.mark(); err != nil {
			return PipelineResult{}, err
		}
	}
	latencies := make(chan time.Duration, 2*cycles)
	began := time.Now()
	if err := clients(ctx, st, slots, cycles, "run", latencies); err != nil {
		return PipelineResult{}, err
	}
	elapsed := time.Since(began)
	var cost metering.Report
	for i, w := range workers {
		stopped = i + 1
		end, err := w.stop()
		if err != nil {
			return PipelineResult{}, err
		}
		cost = sumReports(cost, end.Minus(starts[i]))
	}
	close(latencies)
	var lat []time.Duration
	for l := range latencies {
		lat = append(lat, l)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := 2 * cycles
	return PipelineResult{
		Role: role, Concurrency: concurrency, Commands: n, Elapsed: elapsed,
		PerSecond: float64(n) / elapsed.Seconds(),
		P50:       lat[len(lat)/2], P99: lat[(len(lat)*99)/100],
		Cost:      cost,
		Anomalies: int(st.anomalies.Load()),
		Replicas:  replicas,
		Repeats:   int(st.repeats.Load()), Doubled: int(st.doubled.Load()),
	}, nil
}

// sumReports adds up the figures of processes side by side.
func sumReports(a, b metering.Report) metering.Report {
	sum := metering.Report{Requests: map[string]int64{}, Units: map[string]float64{},
		ReadUnits: a.ReadUnits + b.ReadUnits, WriteUnits: a.WriteUnits + b.WriteUnits,
		CPU: a.CPU + b.CPU, Mallocs: a.Mallocs + b.Mallocs, AllocBytes: a.AllocBytes + b.AllocBytes}
	for _, r := range []metering.Report{a, b} {
		for k, v := range r.Requests {
			sum.Requests[k] += v
		}
		for k, v := range r.Units {
			sum.Units[k] += v
		}
	}
	return sum
}

// clients runs cycles allocate/release cycles spread over n clients.
func clients(ctx context.Context, st *stack, n, cycles int, tag string, latencies chan<- time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, cycles)
	for i := range cycles {
		next <- i
	}
	close(next)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := st.cycle(ctx, fmt.Sprintf("%s-%d", tag, i), latencies); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
