package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"transit/internal/balance"
	"transit/messages"
	"transit/service"
)

// ScaleCase is transit's serve scaled out: 1 to Replicas replicas on one
// stack each, and the timer shards and stream leases moving when a
// replica joins and when one dies.
type ScaleCase struct {
	// Concurrency is each replica's; the clients are as many as all the
	// replicas' consumer slots together.
	Concurrency int              `json:"concurrency"`
	Runs        []PipelineResult `json:"runs"`
	Rebalance   RebalanceResult  `json:"rebalance"`
}

// RebalanceResult is how long ownership took to settle: replica 2
// joining replica 1, then replica 1 killed.
type RebalanceResult struct {
	Domains     string        `json:"domains"`
	TimerShards int           `json:"timer_shards"`
	TimerLease  time.Duration `json:"timer_lease_ns"`
	// StreamLeases is how many stream shard leases the fan-in held on
	// the stack's streams; 0 when it took none (none was measured).
	StreamLeases int `json:"stream_leases"`
	// Join runs from replica 2's start until the timer shards are split
	// evenly between the two, and until every stream lease is held, none
	// by a replica above its even share.
	Join Settled `json:"join"`
	// Kill runs from replica 1's SIGKILL until replica 2 holds every
	// timer shard, and every stream lease.
	Kill Settled `json:"kill"`
}

// Settled is how long the timer shards and the stream leases each took
// to reach an ownership and keep it until both had.
type Settled struct {
	Timers  time.Duration `json:"timers_ns"`
	Streams time.Duration `json:"streams_ns"`
}

func (s Settled) all() time.Duration { return max(s.Timers, s.Streams) }

// rebalanceDomains are served in the rebalance case: timer runs the
// timer scheduler, layer the stream fan-in (its built-in rule reads the
// Layers table's stream).
var rebalanceDomains = string(messages.Timer) + "," + string(messages.Layer)

// runScale measures 1 to replicas replicas at concurrency c each, then
// the rebalance.
func runScale(ctx context.Context, o Options, replicas, c int, out io.Writer) (ScaleCase, error) {
	sc := ScaleCase{Concurrency: c}
	for k := 1; k <= replicas; k++ {
		r, err := runReplicas(ctx, o, RoleTransit, c, k, nil)
		if err != nil {
			return sc, fmt.Errorf("%d replicas: %w", k, err)
		}
		sc.Runs = append(sc.Runs, r)
	}
	fmt.Fprintln(out, "scale: rebalance, replica 2 joining replica 1, then replica 1 killed...")
	rb, err := runRebalance(ctx, o)
	if err != nil {
		return sc, fmt.Errorf("rebalance: %w", err)
	}
	sc.Rebalance = rb
	return sc, nil
}

// ownership is who holds the timer shards and stream leases, as `transit
// status` reads them (Service.Status): lapsed claims and expired leases
// count as nobody's.
type ownership struct {
	timers, streams map[string]int
}

func readOwnership(ctx context.Context, svc *service.Service) (ownership, error) {
	st, err := svc.Status(ctx, "", false)
	if err != nil {
		return ownership{}, err
	}
	return ownership{timers: st.TimerShards, streams: st.StreamLeases}, nil
}

// timersOf is how many timer shards w holds.
func (o ownership) timersOf(w *worker) int { return o.timersOfPID(w.cmd.Process.Pid) }

// timersOfPID is how many timer shards process pid holds: a scheduler's
// owner ID is host/pid/random.
func (o ownership) timersOfPID(pid int) int {
	n := 0
	for owner, c := range o.timers {
		if strings.Contains(owner, fmt.Sprintf("/%d/", pid)) {
			n += c
		}
	}
	return n
}

// streamLeases is how many stream leases owners other than not hold
// (all of them when not is "").
func (o ownership) streamLeases(not string) int {
	n := 0
	for owner, c := range o.streams {
		if owner != not {
			n += c
		}
	}
	return n
}

// runRebalance starts replica 1 on a fresh stack and waits until it owns
// everything, starts replica 2 and times the even split, then kills
// replica 1 and times replica 2's taking over.
func runRebalance(ctx context.Context, o Options) (RebalanceResult, error) {
	prefix := "bsr-" + uuid.NewString()[:6]
	cfg, err := defaultConfig(prefix)
	if err != nil {
		return RebalanceResult{}, err
	}
	// The replicas' domains, so the status read covers their queues only.
	cfg.Domains = rebalanceDomains
	svc, err := service.New(ctx, cfg)
	if err != nil {
		return RebalanceResult{}, err
	}
	if err := svc.Provision(ctx); err != nil {
		return RebalanceResult{}, err
	}
	res := RebalanceResult{Domains: rebalanceDomains, TimerShards: cfg.TimerShards, TimerLease: cfg.TimerLease}
	start := func(i int) (*worker, error) {
		stats := filepath.Join(o.OutDir, fmt.Sprintf("rebalance-r%d.stats.json", i))
		w, err := startWorker(o.Executable, o.OutDir, RoleTransit, prefix, 1, nil, "--domains", rebalanceDomains, "--stats-out", stats)
		if err == nil {
			w.stats = stats
		}
		return w, err
	}
	w1, err := start(1)
	if err != nil {
		return res, err
	}
	defer func() {
		if w1.cmd.ProcessState == nil {
			_ = w1.cmd.Process.Kill()
			_ = w1.cmd.Wait()
		}
	}()
	// Replica 1 alone: every shard its own, and whichever stream leases
	// the fan-in takes (their owner is then replica 1's fan-in).
	var first ownership
	anyway := func(ownership) bool { return true }
	if _, err := waitOwnership(ctx, svc, time.Minute, func(ow ownership) bool {
		first = ow
		return ow.timersOf(w1) == res.TimerShards
	}, anyway); err != nil {
		return res, fmt.Errorf("replica 1 alone: %w", err)
	}
	// The fan-in takes its leases at its first round; give it that long.
	_, _ = waitOwnership(ctx, svc, 10*time.Second, anyway, func(ow ownership) bool {
		first = ow
		return len(ow.streams) > 0
	})
	if len(first.streams) > 1 {
		return res, fmt.Errorf("stream leases of one replica under %d owners: %v", len(first.streams), first.streams)
	}
	var fanIn1 string
	for owner, n := range first.streams {
		fanIn1, res.StreamLeases = owner, n
	}

	w2, err := start(2)
	if err != nil {
		return res, err
	}
	defer func() { _, _ = w2.stop() }()
	timerShare := balance.Of(res.TimerShards, 2)
	streamShare := balance.Of(res.StreamLeases, 2)
	if res.Join, err = waitOwnership(ctx, svc, 2*time.Minute, func(ow ownership) bool {
		for _, w := range []*worker{w1, w2} {
			if n := ow.timersOf(w); n < timerShare.Low || n > timerShare.High {
				return false
			}
		}
		return true
	}, func(ow ownership) bool {
		for _, n := range ow.streams {
			if n > streamShare.High {
				return false
			}
		}
		return ow.streamLeases("") == res.StreamLeases
	}); err != nil {
		return res, fmt.Errorf("replica 2 joining: %w", err)
	}

	// No drain: its claims and leases stay until they lapse.
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return res, err
	}
	_ = w1.cmd.Wait()
	if res.Kill, err = waitOwnership(ctx, svc, 2*time.Minute, func(ow ownership) bool {
		return ow.timersOf(w2) == res.TimerShards
	}, func(ow ownership) bool {
		return ow.streamLeases(fanIn1) == res.StreamLeases
	}); err != nil {
		return res, fmt.Errorf("replica 1 killed: %w", err)
	}
	return res, nil
}

// waitOwnership reads the ownership every 250ms until the timer shards
// and the stream leases are both as wanted, and returns since when each
// has been.
func waitOwnership(ctx context.Context, svc *service.Service, timeout time.Duration, timers, streams func(ownership) bool) (Settled, error) {
	began := time.Now()
	var last ownership
	var s Settled
	since := func(d *time.Duration, holds bool) {
		switch {
		case !holds:
			*d = 0
		case *d == 0:
			*d = max(time.Nanosecond, time.Since(began))
		}
	}
	for time.Since(began) < timeout {
		ow, err := readOwnership(ctx, svc)
		if err != nil {
			return s, err
		}
		since(&s.Timers, timers(ow))
		since(&s.Streams, streams(ow))
		if s.Timers > 0 && s.Streams > 0 {
			return s, nil
		}
		last = ow
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
	return s, fmt.Errorf("not within %s: timer shards %v, stream leases %v", timeout, last.timers, last.streams)
}

// write prints the scale-out case.
func (sc ScaleCase) write(out io.Writer, w *tabwriter.Writer) {
	if len(sc.Runs) == 0 {
		return
	}
	one := sc.Runs[0]
	fmt.Fprintf(out, "\nScale-out: 1 to %d transit serve replicas on one stack, each at concurrency %d, %d commands each (pipeline cycles, one client per consumer slot of all replicas)\n",
		len(sc.Runs), sc.Concurrency, one.Commands)
	fmt.Fprintln(w, "replicas\tcmd/s\tratio to 1\tp50/p99 ms\tCPU µs/cmd (all replicas)\tDynamoDB requests/cmd\tanomalies\trepeated\tdoubled\t")
	for _, r := range sc.Runs {
		fmt.Fprintf(w, "%d\t%.1f\t%s\t%s / %s\t%.0f\t%.2f\t%d\t%d\t%d\t\n", r.Replicas, r.PerSecond, ratio(r.PerSecond, one.PerSecond), ms(r.P50), ms(r.P99),
			perCmd(float64(r.Cost.CPU.Microseconds()), r.Commands), costPerCommand(r.Cost, r.Commands, 1).byService()["DynamoDB"], r.Anomalies, r.Repeats, r.Doubled)
	}
	w.Flush()
	fmt.Fprintln(out, "(the emulators cap the total: every replica sends to the same moto, one process that saturates about one core, and the same DynamoDB Local, on the cores the replicas run on; DynamoDB requests per command rise with the replicas for allocation races lost (a candidate another replica took: its write refused, the pending outcome settled and decided again) and requests the emulator had not answered within the command timeout (the workers log these). No ceiling of the emulators is measured apart: the plain SDK loop is none, transit outruns it at one replica)")
	fmt.Fprintln(out, "(repeated: a command answered again with the same outcome, a redelivery replayed; doubled: answered again with another outcome, applied twice)")
	rb := sc.Rebalance
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	fmt.Fprintf(out, "Rebalance: replicas serving %s (timer scheduler, stream fan-in), %d timer shards, timer lease %s; ownership read as `transit status` reads it\n", rb.Domains, rb.TimerShards, rb.TimerLease)
	fmt.Fprintln(w, "\ttimer shards\tstream leases\tboth\t")
	streams := func(d time.Duration) string {
		if rb.StreamLeases == 0 {
			return "-"
		}
		return round(d).String()
	}
	fmt.Fprintf(w, "replica 2 joins replica 1: from its start to an even split\t%s\t%s\t%s\t\n", round(rb.Join.Timers), streams(rb.Join.Streams), round(rb.Join.all()))
	fmt.Fprintf(w, "replica 1 killed (SIGKILL, no drain): to replica 2 holding all\t%s\t%s\t%s\t\n", round(rb.Kill.Timers), streams(rb.Kill.Streams), round(rb.Kill.all()))
	w.Flush()
	if rb.StreamLeases == 0 {
		fmt.Fprintln(out, "(the fan-in took no stream lease on this stack: the timer shards alone were measured)")
	} else {
		fmt.Fprintf(out, "(the fan-in held %d stream lease(s), on the Layers table's stream, all replica 1's before replica 2 joined: an even split leaves them there, and its death hands them over once they expire)\n", rb.StreamLeases)
	}
	fmt.Fprintln(out, "(a dead replica's timer shards are taken once its claims lapse, its stream leases once they expire: the lease, plus up to one balancing round)")
}
