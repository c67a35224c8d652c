package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"transit/handlers"
	"transit/internal/metering"
	"transit/messages"
	"transit/service"
	"transit/store"
	"transit/timers"
	"transit/transport"
)

// timerShards and timerPoll are the timer case's settings for transit.
const (
	timerShards = 8
	timerPoll   = 250 * time.Millisecond
)

// TimerResult is the timer case: timers due within Spread fired by one
// `transit serve`, next to the emulators' ceiling for the same calls.
type TimerResult struct {
	Timers      int           `json:"timers"`
	Spread      time.Duration `json:"spread_ns"`
	Concurrency int           `json:"concurrency"`
	// Lateness is callback arrival minus execute time.
	LatenessP50 time.Duration `json:"lateness_p50_ns"`
	LatenessP99 time.Duration `json:"lateness_p99_ns"`
	LatenessMax time.Duration `json:"lateness_max_ns"`
	// FiredPerSecond is timers over the time from the first execute time
	// to the last callback.
	FiredPerSecond float64 `json:"fired_per_second"`
	// Repeats counts callbacks beyond the first per timer.
	Repeats int `json:"repeats"`
	// CeilingPerSecond is how fast a plain SDK loop makes the same calls
	// per firing (receive, claim, callback, record, publish, delete) on
	// the same emulators, with every timer already due.
	CeilingPerSecond float64 `json:"ceiling_per_second"`
	// CeilingP50 and CeilingP99 are the lateness that ceiling alone
	// implies for the same due times: a queue served at that rate.
	CeilingP50 time.Duration `json:"ceiling_lateness_p50_ns"`
	CeilingP99 time.Duration `json:"ceiling_lateness_p99_ns"`
	// Cost is the worker's from a poll interval before the first timer
	// fell due to a second after the last callback: the shards' polls
	// and claims included.
	Cost metering.Report `json:"cost"`
	// Floor is a firing's cost with nothing added (measureTimerFloor).
	Floor perCommand `json:"floor"`
}

// receiver is the callback endpoint: it records each timer's first call.
type receiver struct {
	url   string
	srv   *http.Server
	mu    sync.Mutex
	first map[string]time.Time
	calls int
	all   chan struct{}
	want  int
}

func newReceiver(want int) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/due", first: map[string]time.Time{}, all: make(chan struct{}), want: want}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		id := req.Header.Get("Transit-Timer-Id")
		r.mu.Lock()
		r.calls++
		if _, seen := r.first[id]; !seen {
			r.first[id] = at
			if len(r.first) == r.want {
				close(r.all)
			}
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// called counts the timers called back so far.
func (r *receiver) called() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.first)
}

func (r *receiver) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-r.all:
		return nil
	case <-time.After(timeout):
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("%d of %d timers called back within %s", len(r.first), r.want, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runTimers measures transit firing n timers due within spread, then the
// ceiling of the same calls.
func runTimers(ctx context.Context, o Options, n int, spread time.Duration, concurrency int) (TimerResult, error) {
	res := TimerResult{Timers: n, Spread: spread, Concurrency: concurrency}
	svc, err := timerStack(ctx, "btt-"+uuid.NewString()[:6])
	if err != nil {
		return res, err
	}
	rcv, err := newReceiver(n)
	if err != nil {
		return res, err
	}
	defer rcv.srv.Close()
	w, err := startWorker(o.Executable, o.OutDir, RoleTransit, svc.Config.Prefix, concurrency, nil,
		"--domains", string(messages.Timer), "--timer-shards", fmt.Sprint(timerShards), "--timer-poll-interval", timerPoll.String())
	if err != nil {
		return res, err
	}
	defer func() { _, _ = w.stop() }()
	if err := waitClaimed(ctx, svc); err != nil {
		return res, err
	}
	// Seeding goes straight to the table, as timer.create would write it:
	// the case measures firing, not the emulator's pace at taking commands.
	base := time.Now().Add(seedTime(n)).Truncate(time.Millisecond)
	due := make([]time.Time, n)
	for i := range due {
		due[i] = base.Add(time.Duration(i) * spread / time.Duration(n))
	}
	ids, err := seedTimers(ctx, svc, "t", rcv.url, due)
	if err != nil {
		return res, err
	}
	if time.Now().After(base) {
		return res, fmt.Errorf("seeding %d timers outlasted its %s head start", n, seedTime(n))
	}
	// The figures start a poll before the first timer falls due: the
	// idle polls of the head start are not the firings' cost.
	select {
	case <-time.After(time.Until(base.Add(-timerPoll))):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	before, err := w.mark()
	if err != nil {
		return res, err
	}
	if err := rcv.wait(ctx, spread+10*time.Minute); err != nil {
		return res, err
	}
	time.Sleep(time.Second) // a repeated call would show by now
	after, err := w.mark()
	if err != nil {
		return res, err
	}
	res.Cost = after.Minus(before)
	if res.Floor, err = measureTimerFloor(ctx, "bft-"+uuid.NewString()[:6], rcv.url); err != nil {
		return res, fmt.Errorf("floor: %w", err)
	}
	rcv.mu.Lock()
	late := make([]time.Duration, n)
	last := base
	for i, id := range ids {
		at := rcv.first[id]
		late[i] = at.Sub(due[i])
		if at.After(last) {
			last = at
		}
	}
	res.Repeats = rcv.calls - n
	rcv.mu.Unlock()
	res.LatenessP50, res.LatenessP99, res.LatenessMax = quantile(late, 0.5), quantile(late, 0.99), quantile(late, 1)
	res.FiredPerSecond = float64(n) / last.Sub(base).Seconds()

	if res.CeilingPerSecond, err = timerCeiling(ctx, n, concurrency); err != nil {
		return res, fmt.Errorf("ceiling: %w", err)
	}
	res.CeilingP50, res.CeilingP99 = queueLateness(due, res.CeilingPerSecond)
	return res, nil
}

// seedTime is the head start seeding n timers gets.
func seedTime(n int) time.Duration { return 15*time.Second + time.Duration(n)*10*time.Millisecond }

func timerStack(ctx context.Context, prefix string) (*service.Service, error) {
	cfg, err := defaultConfig(prefix)
	if err != nil {
		return nil, err
	}
	cfg.TimerShards = timerShards
	svc, err := service.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return svc, svc.Provision(ctx)
}

// waitClaimed waits until the worker owns every shard.
func waitClaimed(ctx context.Context, svc *service.Service) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		records, err := svc.Store.Shards(ctx, timerShards)
		if err != nil {
			return err
		}
		claimed := 0
		for _, r := range records {
			if r.Owner != "" {
				claimed++
			}
		}
		if claimed == timerShards {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the worker claimed no full set of %d timer shards within a minute", timerShards)
}

// seedTimers writes one timer per due time through the store, eight
// writers at a time, at the shard versions read once at the start (no
// claim moves while it runs), and returns their IDs in due order.
func seedTimers(ctx context.Context, svc *service.Service, tag, callback string, due []time.Time) ([]string, error) {
	ids := make([]string, len(due))
	records, err := svc.Store.Shards(ctx, timerShards)
	if err != nil {
		return nil, err
	}
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ids[i] = fmt.Sprintf("%s-%05d", tag, i)
				p := &messages.TimerCreatePayload{TimerID: ids[i], ExecuteAt: due[i], Callback: callback, Payload: json.RawMessage(`{"bench":true}`)}
				err := p.Validate()
				shard := store.ShardOf(ids[i], timerShards)
				var t store.Timer
				if err == nil {
					t, err = handlers.TimerRecord(shard, uuid.NewString(), p, time.Now())
				}
				if err == nil {
					cmd := store.Cmd{ID: uuid.NewString(), Type: string(messages.TimerCreate), CorrelationID: "bench", At: time.Now()}
					_, err = svc.Store.CreateTimer(ctx, cmd, records[shard].Version, t)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range due {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// timerCeiling fires n timers, all due already, by the plain SDK loop at
// the given concurrency, and returns firings per second.
func timerCeiling(ctx context.Context, n, concurrency int) (float64, error) {
	svc, err := timerStack(ctx, "btc-"+uuid.NewString()[:6])
	if err != nil {
		return 0, err
	}
	rcv, err := newReceiver(n)
	if err != nil {
		return 0, err
	}
	defer rcv.srv.Close()
	due := make([]time.Time, n)
	past := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for i := range due {
		due[i] = past
	}
	ids, err := seedTimers(ctx, svc, "c", rcv.url, due)
	if err != nil {
		return 0, err
	}
	var msgs []*message.Message
	for _, id := range ids {
		t, _, err := svc.Store.GetTimer(ctx, store.ShardOf(id, timerShards), id)
		if err != nil {
			return 0, err
		}
		d := messages.TimerDuePayload{Shard: t.ShardID, TimerID: t.ID, TimerUUID: t.UUID, ExecuteAt: t.ExecuteAt.Time}
		msg, err := transport.NewCommand(uuid.NewString(), messages.TimerDue, d, time.Now())
		if err != nil {
			return 0, err
		}
		msgs = append(msgs, msg)
	}
	q, err := svc.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(svc.Stack.CommandQueue(messages.Timer))})
	if err != nil {
		return 0, err
	}
	caller, err := svc.TimerCaller(ctx)
	if err != nil {
		return 0, err
	}
	// Not run: it only tells the handler the shard count.
	shards := timers.NewScheduler(timers.Config{Shards: timerShards}, svc.Store,
		func(context.Context, []timers.Due) error { return nil }, svc.Logger)
	handler := handlers.NewTimer(svc.Store, shards, caller, time.Now)
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	began := time.Now()
	loop := make(chan error, 1)
	go func() { loop <- runBaseline(loopCtx, svc, messages.Timer, handler, concurrency) }()
	// Fed as transit's scheduler feeds its queue: at most as many firings
	// outstanding as it allows, ten to a batch.
	outstanding := max(100, 10*concurrency)
	for sent := 0; sent < len(msgs); {
		if sent-rcv.called() >= outstanding {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		next := min(len(msgs), sent+10)
		if err := transport.SendBatch(ctx, svc.SQS, aws.ToString(q.QueueUrl), msgs[sent:next]); err != nil {
			return 0, err
		}
		sent = next
	}
	if err := rcv.wait(ctx, 10*time.Minute); err != nil {
		return 0, err
	}
	elapsed := time.Since(began)
	stop()
	return float64(n) / elapsed.Seconds(), <-loop
}

// queueLateness is the lateness of firings due at due (sorted) when they
// can be made at most rate per second: each starts at its due time or
// when the one before it is done, whichever is later.
func queueLateness(due []time.Time, rate float64) (p50, p99 time.Duration) {
	if rate <= 0 {
		return 0, 0
	}
	step := time.Duration(float64(time.Second) / rate)
	late := make([]time.Duration, len(due))
	var free time.Time
	for i, d := range due {
		start := d
		if free.After(start) {
			start = free
		}
		free = start.Add(step)
		late[i] = free.Sub(d)
	}
	return quantile(late, 0.5), quantile(late, 0.99)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
