package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"transit/internal/metering"
	"transit/messages"
	"transit/service"
	"transit/transport"
)

// longPoll is the wait of the subscribers' receives (transport's default
// and the baseline's), which sets what an idle queue costs.
const longPoll = 20 * time.Second

// SQSCase is what SQS costs with a full queue and with an empty one, per
// role, at one concurrency.
type SQSCase struct {
	Concurrency int       `json:"concurrency"`
	Transit     SQSResult `json:"transit"`
	Baseline    SQSResult `json:"baseline"`
}

// SQSResult is one role's worker draining a backlog, then idle.
type SQSResult struct {
	// Backlog is how many sandbox.allocate commands were queued before
	// the worker started.
	Backlog int `json:"backlog"`
	// Drain is the time from the first answer on the topic to the last.
	Drain     time.Duration `json:"drain_ns"`
	PerSecond float64       `json:"commands_per_second"`
	// Loaded is the worker's figures from its start until every command
	// was answered.
	Loaded metering.Report `json:"loaded"`
	// Idle is the worker's figures over IdleWindow with nothing queued.
	IdleWindow time.Duration   `json:"idle_window_ns"`
	Idle       metering.Report `json:"idle"`
	// Anomalies counts answers other than sandbox.allocated (the pool
	// holds a sandbox for every command).
	Anomalies int `json:"anomalies"`
}

// runSQSCase measures both roles at concurrency c.
func runSQSCase(ctx context.Context, o Options, c int) (SQSCase, error) {
	sc := SQSCase{Concurrency: c}
	var err error
	if sc.Baseline, err = runSQS(ctx, o, RoleBaseline, c); err != nil {
		return sc, fmt.Errorf("%s: %w", RoleBaseline, err)
	}
	if sc.Transit, err = runSQS(ctx, o, RoleTransit, c); err != nil {
		return sc, fmt.Errorf("%s: %w", RoleTransit, err)
	}
	return sc, nil
}

// runSQS queues o.Commands sandbox.allocate commands, one per track,
// then starts role's worker and waits for every answer: the worker finds
// the whole backlog at its first receive, which a worker started first
// would not (its long polls would take the first commands sent one or
// two at a time). The figures run from the worker's start, so they hold
// its start-up requests too (sqsRequests leaves out those that look up
// queues and topics). Then the worker is left idle for o.SQSIdle.
func runSQS(ctx context.Context, o Options, role string, c int) (SQSResult, error) {
	n := o.Commands
	res := SQSResult{Backlog: n, IdleWindow: o.SQSIdle}
	prefix := fmt.Sprintf("bq%s%d-%s", role[:1], c, uuid.NewString()[:6])
	st, err := newStack(ctx, prefix, n)
	if err != nil {
		return res, err
	}
	defer st.close(ctx)
	// One channel for every command's answer: they are read as they come.
	answers := make(chan service.TapEvent, n)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		id := uuid.NewString()
		st.mu.Lock()
		st.waiters[id] = answers
		st.mu.Unlock()
		if msgs[i], err = transport.NewCommand(id, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: fmt.Sprintf("q-%d", i)}, time.Now()); err != nil {
			return res, err
		}
	}
	if err := sendBacklog(ctx, st, msgs); err != nil {
		return res, err
	}
	// Stats of its own: the pipeline's worker at c wrote role-c<c>.
	stats := filepath.Join(o.OutDir, fmt.Sprintf("%s-sqs-c%d.stats.json", role, c))
	w, err := startWorker(o.Executable, o.OutDir, role, prefix, c, nil, "--stats-out", stats)
	if err != nil {
		return res, err
	}
	w.stats = stats
	defer func() { _, _ = w.stop() }()
	var first, last time.Time
	for i := range n {
		select {
		case ev := <-answers:
			last = time.Now()
			if i == 0 {
				first = last
			}
			if ev.Envelope.Type != messages.SandboxAllocated {
				res.Anomalies++
			}
		case <-time.After(2 * time.Minute):
			return res, fmt.Errorf("%d of %d commands answered within 2m", i, n)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Drain = last.Sub(first)
	if res.Drain > 0 {
		res.PerSecond = float64(n-1) / res.Drain.Seconds()
	}
	// A command is deleted after its answer is published: the last deletes
	// land just after the last answer. The long polls sent since count
	// only when they return, in the idle window.
	time.Sleep(time.Second)
	if res.Loaded, err = w.mark(); err != nil {
		return res, err
	}
	select {
	case <-time.After(o.SQSIdle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	end, err := w.mark()
	if err != nil {
		return res, err
	}
	res.Idle = end.Minus(res.Loaded)
	return res, nil
}

// sendBacklog sends msgs to st's command queue, ten to a request, from
// eight senders.
func sendBacklog(ctx context.Context, st *stack, msgs []*message.Message) error {
	batches := make(chan []*message.Message, len(msgs)/10+1)
	for start := 0; start < len(msgs); start += 10 {
		batches <- msgs[start:min(len(msgs), start+10)]
	}
	close(batches)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for b := range batches {
				if err := transport.SendBatch(ctx, st.svc.SQS, st.queueURL, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// lookup reports whether op only looks up a queue or topic: a worker's
// start-up, not its traffic.
func lookup(op string) bool {
	_, name, _ := strings.Cut(op, ".")
	return strings.HasPrefix(name, "GetQueue") || strings.HasPrefix(name, "GetTopic")
}

// sqsRequests is r's SQS requests other than lookups, by operation.
func sqsRequests(r metering.Report) map[string]float64 {
	out := map[string]float64{}
	for op, v := range r.Requests {
		if strings.HasPrefix(op, "SQS.") && !lookup(op) {
			out[op] = float64(v)
		}
	}
	return out
}

// write prints the SQS case.
func (sc SQSCase) write(out io.Writer, w *tabwriter.Writer) {
	t, b := sc.Transit, sc.Baseline
	fmt.Fprintf(out, "\nSQS requests: idle and loaded, concurrency %d (%d sandbox.allocate queued before the worker starts; then %s with nothing queued)\n",
		sc.Concurrency, t.Backlog, t.IdleWindow)
	fmt.Fprintln(w, "\ttransit\tbaseline\t")
	per := func(label string, tm, bm map[string]float64, tn, bn float64, format string) {
		fmt.Fprintf(w, "%s\t\t\t\n", label)
		var tAll, bAll float64
		for _, op := range keys(tm, bm) {
			fmt.Fprintf(w, "  %s\t"+format+"\t"+format+"\t\n", op, tm[op]/tn, bm[op]/bn)
			tAll, bAll = tAll+tm[op], bAll+bm[op]
		}
		fmt.Fprintf(w, "  all SQS\t"+format+"\t"+format+"\t\n", tAll/tn, bAll/bn)
	}
	per("loaded, per command", sqsRequests(t.Loaded), sqsRequests(b.Loaded), float64(t.Backlog), float64(b.Backlog), "%.2f")
	fmt.Fprintf(w, "  commands/s drained\t%.1f\t%.1f\t\n", t.PerSecond, b.PerSecond)
	per("idle, per second (one command queue)", sqsRequests(t.Idle), sqsRequests(b.Idle), t.IdleWindow.Seconds(), b.IdleWindow.Seconds(), "%.3f")
	w.Flush()
	fmt.Fprintf(out, "(a %s long poll per receive loop gives %.2f/s each: transit runs ceil(%d/10) = %d loops per queue, the baseline one per consumer, %d)\n",
		longPoll, 1/longPoll.Seconds(), sc.Concurrency, (sc.Concurrency+9)/10, sc.Concurrency)
	for role, r := range map[string]SQSResult{RoleTransit: t, RoleBaseline: b} {
		if r.Anomalies > 0 {
			fmt.Fprintf(out, "  %s: %d answers other than sandbox.allocated (lost writes in the emulator)\n", role, r.Anomalies)
		}
	}
}
