package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"transit/internal/metering"
)

// costPerCommand is r per command, with write transactions' units scaled
// by transactScale (see Report.TransactUnitsScale) and counted as writes.
func costPerCommand(r metering.Report, commands int, transactScale float64) perCommand {
	n := float64(commands)
	p := perCommand{Requests: map[string]float64{}, ReadUnits: r.ReadUnits / n, WriteUnits: r.WriteUnits / n, Units: map[string]float64{}}
	for k, v := range r.Units {
		if on, ok := strings.CutPrefix(k, metering.TransactWrite+" "); ok {
			p.WriteUnits -= (1 - transactScale) * v / n
			k, v = "write "+on, transactScale*v
		}
		p.Units[k] += v / n
	}
	for op, v := range r.Requests {
		if !strings.HasPrefix(op, "STS.") {
			p.Requests[op] = float64(v) / n
		}
	}
	return p
}

// pair finds the transit and baseline results at concurrency c.
func (r Report) pair(c int) (transit, baseline PipelineResult) {
	for _, p := range r.Pipeline {
		if p.Concurrency != c {
			continue
		}
		if p.Role == RoleTransit {
			transit = p
		} else {
			baseline = p
		}
	}
	return transit, baseline
}

func (r Report) concurrencies() []int {
	seen := map[int]bool{}
	var cs []int
	for _, p := range r.Pipeline {
		if !seen[p.Concurrency] {
			seen[p.Concurrency] = true
			cs = append(cs, p.Concurrency)
		}
	}
	sort.Ints(cs)
	return cs
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// Write prints the report as tables.
func (r Report) Write(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "\ntransit bench, %s, %s\n", r.At.Format(time.RFC3339), r.Emulators)
	fmt.Fprintln(out, "\nPipeline: allocate + mark-deletion cycles, send to event on the topic, closed loop with one client per consumer slot")
	fmt.Fprintln(w, "concurrency\ttransit cmd/s\tbaseline cmd/s\ttransit/baseline\ttransit p50/p99 ms\tbaseline p50/p99 ms\t")
	for _, c := range r.concurrencies() {
		t, b := r.pair(c)
		fmt.Fprintf(w, "%d\t%.1f\t%.1f\t%s\t%s / %s\t%s / %s\t\n", c, t.PerSecond, b.PerSecond, ratio(t.PerSecond, b.PerSecond), ms(t.P50), ms(t.P99), ms(b.P50), ms(b.P99))
	}
	w.Flush()
	for _, p := range r.Pipeline {
		if p.Anomalies > 0 {
			fmt.Fprintf(out, "  %s at concurrency %d: %d outcomes contradicted an earlier event (lost writes in the emulator)\n", p.Role, p.Concurrency, p.Anomalies)
		}
	}

	fmt.Fprintln(out, "\nCost of the process itself, per command (CPU user+system, heap allocations)")
	fmt.Fprintln(w, "concurrency\ttransit CPU µs\tbaseline CPU µs\tratio\ttransit allocs\tbaseline allocs\tratio\ttransit KiB\tbaseline KiB\t")
	for _, c := range r.concurrencies() {
		t, b := r.pair(c)
		tc, bc := perCmd(float64(t.Cost.CPU.Microseconds()), t.Commands), perCmd(float64(b.Cost.CPU.Microseconds()), b.Commands)
		ta, ba := perCmd(float64(t.Cost.Mallocs), t.Commands), perCmd(float64(b.Cost.Mallocs), b.Commands)
		tk, bk := perCmd(float64(t.Cost.AllocBytes)/1024, t.Commands), perCmd(float64(b.Cost.AllocBytes)/1024, b.Commands)
		fmt.Fprintf(w, "%d\t%.0f\t%.0f\t%s\t%.0f\t%.0f\t%s\t%.1f\t%.1f\t\n", c, tc, bc, ratio(tc, bc), ta, ba, ratio(ta, ba), tk, bk)
	}
	w.Flush()

	cs := r.concurrencies()
	if len(cs) > 0 {
		c := cs[len(cs)-1]
		t, b := r.pair(c)
		tp, bp := costPerCommand(t.Cost, t.Commands, r.TransactUnitsScale), costPerCommand(b.Cost, b.Commands, r.TransactUnitsScale)
		fmt.Fprintf(out, "\nCost on AWS per command at concurrency %d (minimum: the domain's access pattern alone, batched SQS)\n", c)
		writeCosts(w, "commands", []string{"transit", "baseline", "minimum"}, tp, bp, r.Floor)
		r.writePriceNotes(out)
	}

	ct := r.Contention
	fmt.Fprintf(out, "\nContention: %d allocators for %d sandboxes, %d rounds: %d correct, median round %s\n",
		ct.Allocators, ct.Sandboxes, ct.Rounds, ct.Correct, ct.Median.Round(time.Millisecond))
	for _, p := range ct.Problems {
		fmt.Fprintln(out, "  problem:", p)
	}

	if t := r.Timers; t != nil {
		fmt.Fprintf(out, "\nTimers: %d due within %s, one transit serve at concurrency %d, %d timer shards polled every %s\n",
			t.Timers, t.Spread, t.Concurrency, timerShards, timerPoll)
		fmt.Fprintln(w, "\tfired/s	lateness p50 ms	lateness p99 ms	")
		fmt.Fprintf(w, "transit	%.1f	%s	%s	\n", t.FiredPerSecond, ms(t.LatenessP50), ms(t.LatenessP99))
		fmt.Fprintf(w, "emulator ceiling (plain SDK loop, same calls)	%.1f	%s	%s	\n", t.CeilingPerSecond, ms(t.CeilingP50), ms(t.CeilingP99))
		fmt.Fprintf(w, "transit's own share		%s	%s	\n", ms(max(0, t.LatenessP50-t.CeilingP50)), ms(max(0, t.LatenessP99-t.CeilingP99)))
		w.Flush()
		fmt.Fprintf(out, "(the ceiling's lateness is what firing at the ceiling's rate alone would give the same due times; max lateness %s; callbacks repeated: %d)\n",
			t.LatenessMax.Round(time.Millisecond), t.Repeats)
		if t.Cost.Requests != nil {
			fmt.Fprintln(out, "Cost on AWS per firing, the shards' polls and claims included (minimum: every shard's due timers read, each fired timer deleted under a condition, a batched queue hop and one event)")
			writeCosts(w, "firings", []string{"transit", "minimum"}, costPerCommand(t.Cost, t.Timers, r.TransactUnitsScale), t.Floor)
			r.writePriceNotes(out)
		}
	}

	if r.Layers != nil {
		r.Layers.write(out, w, r)
	}
	if r.SQS != nil {
		r.SQS.write(out, w)
	}
	if r.Scale != nil {
		r.Scale.write(out, w)
	}
	if r.Instrumentation != nil {
		r.Instrumentation.write(out, w)
	}
	if r.Console != nil {
		r.Console.write(out, w)
	}
	if r.Tasks != nil {
		r.Tasks.write(out, w, r.TransactUnitsScale)
	}
}

// writeCosts prints costs per command side by side, one column each:
// requests, units by table and index, and the bill per million of what.
func writeCosts(w *tabwriter.Writer, what string, columns []string, ps ...perCommand) {
	row := func(label string, v func(perCommand) float64) {
		fmt.Fprintf(w, "%s\t", label)
		for _, p := range ps {
			fmt.Fprintf(w, "%.2f\t", v(p))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "request\t%s\t\n", strings.Join(columns, "\t"))
	requests, units := make([]map[string]float64, len(ps)), make([]map[string]float64, len(ps))
	for i, p := range ps {
		requests[i], units[i] = p.Requests, p.Units
	}
	for _, op := range keys(requests...) {
		row(op, func(p perCommand) float64 { return p.Requests[op] })
	}
	for _, svc := range []string{"SQS", "SNS", "DynamoDB"} {
		row("all "+svc, func(p perCommand) float64 { return p.byService()[svc] })
	}
	row("DynamoDB read units", func(p perCommand) float64 { return p.ReadUnits })
	row("DynamoDB write units", func(p perCommand) float64 { return p.WriteUnits })
	for _, u := range keys(units...) {
		row("  "+u, func(p perCommand) float64 { return p.Units[u] })
	}
	row("USD per million "+what, perCommand.billPerMillion)
	w.Flush()
}

// writePriceNotes says which prices the bills use, and how transaction
// units were counted.
func (r Report) writePriceNotes(out io.Writer) {
	fmt.Fprintf(out, "(on-demand list prices: SQS $%.2f/M requests, SNS $%.2f/M publishes, DynamoDB $%.3f/M write units, $%.3f/M read units)\n",
		sqsPerMillionRequests, snsPerMillionPublishes, dynamoPerMillionWriteUnits, dynamoPerMillionReadUnits)
	if r.TransactUnitsScale != 1 {
		fmt.Fprintf(out, "(write transactions' units × %.2f: DynamoDB Local reports 4 units per KB written in a transaction, tables and indexes alike; AWS bills 2)\n", r.TransactUnitsScale)
	}
}

// write prints the task lease case.
func (tc TaskCase) write(out io.Writer, w *tabwriter.Writer, transactScale float64) {
	t, b := tc.Transit, tc.Baseline
	fmt.Fprintf(out, "\nTask leases: %d tasks of one org, priorities 0-100, leased by %d agents, each a closed loop of task.lease to its answer on the topic; consumer concurrency %d; every task leased exactly once\n",
		tc.Tasks, tc.Agents, tc.Agents)
	fmt.Fprintln(w, "\tleases/s\tlease p50 ms\tlease p99 ms\ttask.lease-empty answers\t")
	fmt.Fprintf(w, "transit\t%.1f\t%s\t%s\t%d\t\n", t.PerSecond, ms(t.P50), ms(t.P99), t.Empty)
	fmt.Fprintf(w, "baseline (plain SDK loop, same calls)\t%.1f\t%s\t%s\t%d\t\n", b.PerSecond, ms(b.P50), ms(b.P99), b.Empty)
	fmt.Fprintf(w, "transit/baseline\t%s\t%s\t%s\t\t\n", ratio(t.PerSecond, b.PerSecond), ratio(float64(t.P50), float64(b.P50)), ratio(float64(t.P99), float64(b.P99)))
	w.Flush()
	tp, bp := costPerCommand(t.Cost, t.Leases, transactScale), costPerCommand(b.Cost, b.Leases, transactScale)
	fmt.Fprintln(out, "Per measured lease: AWS requests and the process's own cost (lost races and empty answers included)")
	fmt.Fprintln(w, "\ttransit\tbaseline\t")
	for _, op := range keys(tp.Requests, bp.Requests) {
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t\n", op, tp.Requests[op], bp.Requests[op])
	}
	for _, u := range keys(tp.Units, bp.Units) {
		fmt.Fprintf(w, "%s units\t%.2f\t%.2f\t\n", u, tp.Units[u], bp.Units[u])
	}
	fmt.Fprintf(w, "CPU µs\t%.0f\t%.0f\t\n", perCmd(float64(t.Cost.CPU.Microseconds()), t.Leases), perCmd(float64(b.Cost.CPU.Microseconds()), b.Leases))
	fmt.Fprintf(w, "heap allocations\t%.0f\t%.0f\t\n", perCmd(float64(t.Cost.Mallocs), t.Leases), perCmd(float64(b.Cost.Mallocs), b.Leases))
	w.Flush()
	fmt.Fprintln(out, "(TransactWriteItems past 1.00 per lease are races lost to another agent for the same task: leases/s follows them, and they vary from run to run in either role)")
}

func perCmd(v float64, commands int) float64 {
	if commands == 0 {
		return 0
	}
	return v / float64(commands)
}

// SVG draws commands per second against concurrency for both roles.
func (r Report) SVG() []byte {
	const w, h, pad = 640.0, 400.0, 60.0
	cs := r.concurrencies()
	top := 1.0
	for _, p := range r.Pipeline {
		top = math.Max(top, p.PerSecond)
	}
	top *= 1.15
	x := func(i int) float64 {
		if len(cs) == 1 {
			return w / 2
		}
		return pad + float64(i)*(w-2*pad)/float64(len(cs)-1)
	}
	y := func(v float64) float64 { return h - pad - v/top*(h-2*pad) }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="22" text-anchor="middle" font-size="15">commands/s against consumer concurrency</text>`+"\n", w/2)
	fmt.Fprintf(&b, `<text x="%.0f" y="40" text-anchor="middle" fill="#555">%s</text>`+"\n", w/2, r.Emulators)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n",
		pad, h-pad, w-pad, h-pad, pad, pad, pad, h-pad)
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", pad-6, y(v)+4, v, pad, y(v), w-pad, y(v))
	}
	for i, c := range cs {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(i), h-pad+18, c)
	}
	for _, s := range []struct{ role, color string }{{RoleTransit, "#d62728"}, {RoleBaseline, "#1f77b4"}} {
		var pts []string
		for i, c := range cs {
			t, bl := r.pair(c)
			p := t
			if s.role == RoleBaseline {
				p = bl
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(p.PerSecond)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", x(i), y(p.PerSecond), s.color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#d62728">transit</text><text x="%.0f" y="%.0f" fill="#1f77b4">baseline (SDK loop)</text>`+"\n", pad+12, pad+10, pad+12, pad+26)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">consumer concurrency</text></svg>`+"\n", w/2, h-16)
	return b.Bytes()
}

// keys are the keys of ms, sorted.
func keys(ms ...map[string]float64) []string {
	var all []string
	for _, m := range ms {
		for k := range m {
			all = append(all, k)
		}
	}
	slices.Sort(all)
	return slices.Compact(all)
}
