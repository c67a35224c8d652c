package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"transit/internal/metering"
	"transit/store"
)

// The capacity model: what the bench's sandbox mix (allocate and
// mark-deletion, one each per cycle) needs on AWS at a given rate, from
// the costs per command one bench run measured. `transit-bench model`
// writes it as docs/capacity.md.

// Limits and list prices the model applies (us-east-1, 2026).
const (
	// A partition serves at most 1,000 write units and 3,000 read units
	// a second, and one partition key value's items share a partition
	// (an index's too) unless DynamoDB splits it by sort key.
	partitionWriteUnits = 1000
	partitionReadUnits  = 3000
	// The default quota of one table or index, on-demand or provisioned
	// (raisable by a request to AWS).
	tableUnitsQuota = 40000
	// Provisioned capacity per unit-hour, and the utilisation transit's
	// auto-scaling targets (store.ScalingTargets).
	provisionedWriteUnitHour = 0.00065
	provisionedReadUnitHour  = 0.00013
	targetUtilisation        = 0.70
	hoursPerMonth            = 730
	// A serve replica's cores in the model, used up to targetUtilisation.
	replicaCores = 2
	// Replicas never fewer than this: one may be replaced at any time.
	minReplicas = 2
	// busyPerReplica is the rate per replica (commands a second) from
	// which its receives and deletes come about ten to a request: ten
	// messages within the subscriber's waits of a quarter to half a
	// second, with a margin.
	busyPerReplica = 100
)

// modelRates are the rates the model is written for, commands a second.
var modelRates = []float64{100, 1000, 10000}

// hotKeyShare is the share of a table's or index's writes that its
// busiest partition key value takes under the mix, for keys with few
// values: every other key (a sandbox, a track, a command, an entity) has
// as many values as there are of those, and no one takes a measurable
// share. StatusIndex is keyed by status: an allocation moves an item from
// available to allocated, a mark-deletion from allocated to
// pending_deletion, so allocated takes two of the four index writes of a
// cycle. The audit's global view is spread over AuditGlobalKeys keys.
var hotKeyShare = map[string]float64{
	"SandboxPool/StatusIndex": 0.5,
	"Audit/GlobalIndex":       1 / float64(store.AuditGlobalKeys),
}

// capacityModel is the costs per command a model is built from.
type capacityModel struct {
	// From says which measurement the costs are from.
	From string
	cost perCommand
	// sqs is SQS requests per command on a busy queue (the SQS case's
	// backlog), which every rate the model is written for is; nil when
	// the report has no SQS case, and then cost's own are used.
	sqs map[string]float64
	// cpu is the serve process's CPU time per command.
	cpu time.Duration
}

// newModel builds the model from the transit pipeline at the report's
// highest concurrency.
func newModel(r Report) (capacityModel, error) {
	cs := r.concurrencies()
	if len(cs) == 0 {
		return capacityModel{}, fmt.Errorf("the report has no pipeline run")
	}
	c := cs[len(cs)-1]
	t, _ := r.pair(c)
	if t.Commands == 0 {
		return capacityModel{}, fmt.Errorf("the report has no transit pipeline run at concurrency %d", c)
	}
	m := capacityModel{
		From: fmt.Sprintf("the transit pipeline at concurrency %d, %d commands, %s", c, t.Commands, r.At.Format(time.DateOnly)),
		cost: costPerCommand(t.Cost, t.Commands, r.TransactUnitsScale),
		cpu:  t.Cost.CPU / time.Duration(t.Commands),
	}
	if r.SQS != nil && r.SQS.Transit.Backlog > 0 {
		loaded := costPerCommand(r.SQS.Transit.Loaded, r.SQS.Transit.Backlog, r.TransactUnitsScale)
		m.sqs = map[string]float64{}
		for op, n := range loaded.Requests {
			// The worker's start-up looks its queues up once.
			if strings.HasPrefix(op, "SQS.") && op != "SQS.GetQueueUrl" {
				m.sqs[op] = n
			}
		}
	}
	return m, nil
}

// load is what the mix needs at one rate.
type load struct {
	Rate float64
	// Requests a second by "Service.Operation".
	Requests map[string]float64
	// Units a second by "read|write <table>[/<index>]".
	Units map[string]float64
	// CPU cores the serve replicas use together.
	Cores float64
}

// at is the load at rate commands a second; busy takes SQS requests from
// the backlog case (a queue that always has ten messages waiting).
func (m capacityModel) at(rate float64, busy bool) load {
	l := load{Rate: rate, Requests: map[string]float64{}, Units: map[string]float64{}, Cores: rate * m.cpu.Seconds()}
	for op, n := range m.cost.Requests {
		if busy && m.sqs != nil && strings.HasPrefix(op, "SQS.") {
			continue
		}
		l.Requests[op] = n * rate
	}
	if busy {
		for op, n := range m.sqs {
			l.Requests[op] = n * rate
		}
	}
	for u, n := range m.cost.Units {
		l.Units[u] = n * rate
	}
	return l
}

// tableLoad is one table's or index's share of a load.
type tableLoad struct {
	Name         string
	Read, Write  float64
	Partitions   int
	HotKeyWrites float64
	// ThrottlesAt is the rate at which the first limit is reached, and
	// Limit which it is.
	ThrottlesAt float64
	Limit       string
}

// tables splits l by table and index, each with the partitions its units
// need and the rate at which it would throttle first.
func (l load) tables() []tableLoad {
	byName := map[string]*tableLoad{}
	var names []string
	for u, n := range l.Units {
		kind, name, _ := strings.Cut(u, " ")
		t := byName[name]
		if t == nil {
			t = &tableLoad{Name: name}
			byName[name] = t
			names = append(names, name)
		}
		if kind == "read" {
			t.Read += n
		} else {
			t.Write += n
		}
	}
	slices.Sort(names)
	out := make([]tableLoad, 0, len(names))
	for _, name := range names {
		t := byName[name]
		t.Partitions = max(1, int(math.Ceil(t.Read/partitionReadUnits+t.Write/partitionWriteUnits)))
		perCommand := t.Write / l.Rate
		t.ThrottlesAt, t.Limit = tableUnitsQuota/max(perCommand, t.Read/l.Rate), "table quota 40,000 units/s"
		if share, ok := hotKeyShare[name]; ok {
			t.HotKeyWrites = t.Write * share
			if at := partitionWriteUnits / (perCommand * share); at < t.ThrottlesAt {
				t.ThrottlesAt, t.Limit = at, "one key's partition, 1,000 write units/s"
			}
		}
		out = append(out, *t)
	}
	return out
}

// monthly is the bill of a month at l, in USD: DynamoDB on-demand or
// provisioned at the auto-scaling target, SQS and SNS the same either way.
func (l load) monthly() (onDemand, provisioned, messaging float64) {
	seconds := float64(hoursPerMonth * 3600)
	for _, t := range l.tables() {
		onDemand += (t.Write*dynamoPerMillionWriteUnits + t.Read*dynamoPerMillionReadUnits) * seconds / 1e6
		provisioned += (t.Write*provisionedWriteUnitHour + t.Read*provisionedReadUnitHour) / targetUtilisation * hoursPerMonth
	}
	perSecond := perCommand{Requests: l.Requests}
	messaging = perSecond.billPerMillion() * seconds / 1e6
	return onDemand, provisioned, messaging
}

// replicas is how many serve replicas l needs.
func (l load) replicas() int {
	return max(minReplicas, int(math.Ceil(l.Cores/(replicaCores*targetUtilisation))))
}

// checked is one quantity the model predicted for a run, and what the run
// measured.
type checked struct {
	What                string
	Predicted, Measured float64
}

// within reports whether the prediction is within 20 % of the measurement.
func (c checked) within() bool {
	if c.Measured == 0 {
		return c.Predicted == 0
	}
	return math.Abs(c.Predicted/c.Measured-1) <= 0.2
}

// check compares what the model predicts for run at its measured rate
// with what run measured.
func (m capacityModel) check(r Report, run PipelineResult) []checked {
	measured := costPerCommand(run.Cost, run.Commands, r.TransactUnitsScale)
	predicted := m.at(run.PerSecond, false)
	measuredCores := run.Cost.CPU.Seconds() / run.Elapsed.Seconds()
	sum := func(ms map[string]float64, prefix string) float64 {
		total := 0.0
		for k, v := range ms {
			if strings.HasPrefix(k, prefix) {
				total += v
			}
		}
		return total
	}
	row := func(what string, p, mm float64) checked { return checked{what, p, mm} }
	rate := run.PerSecond
	return []checked{
		row("DynamoDB write units/s", sum(predicted.Units, "write "), measured.WriteUnits*rate),
		row("DynamoDB read units/s", sum(predicted.Units, "read "), measured.ReadUnits*rate),
		row("DynamoDB requests/s", sum(predicted.Requests, "DynamoDB."), sum(measured.Requests, "DynamoDB.")*rate),
		row("SQS requests/s", sum(predicted.Requests, "SQS."), sum(measured.Requests, "SQS.")*rate),
		row("SNS publishes/s", sum(predicted.Requests, "SNS."), sum(measured.Requests, "SNS.")*rate),
		row("CPU cores", predicted.Cores, measuredCores),
	}
}

// WriteCapacityModel writes the model built from r as Markdown.
func WriteCapacityModel(out io.Writer, r Report) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	p := func(format string, a ...any) { fmt.Fprintf(out, format, a...) }
	p("# Capacity model\n\n")
	p("Generated by `make capacity` (`transit-bench model`) from a `make bench` report; do not edit by hand.\n\n")
	p("**Mix:** the sandbox broker's allocate and mark-deletion, one of each per cycle, each answered by its event on the topic.\n")
	p("**Costs from:** %s, on %s. ", m.From, r.Emulators)
	p("Per command: %.2f DynamoDB write units and %.2f read units as AWS bills them, %.2f SNS publishes, %.0f µs of serve CPU", m.cost.WriteUnits, m.cost.ReadUnits, m.cost.Requests["SNS.Publish"], float64(m.cpu.Microseconds()))
	if m.sqs != nil {
		p(", and on a busy queue %.2f SQS requests (the bench's backlog case)", sumValues(m.sqs))
	}
	p(".\n\n")
	p("Below %d commands/s per replica a queue is not always busy, and the model takes the closed loop's SQS cost instead (%.2f requests per command).\n\n", busyPerReplica, m.cost.byService()["SQS"])
	var shares []string
	for _, name := range slices.Sorted(maps.Keys(hotKeyShare)) {
		shares = append(shares, fmt.Sprintf("%s's busiest key takes %s %% of its writes", name, strconv.FormatFloat(100*hotKeyShare[name], 'f', -1, 64)))
	}
	p("**Assumptions.** Prices are on-demand list prices in us-east-1, without the free tier. Provisioned capacity is billed at %.0f %% utilisation, the target transit's auto-scaling keeps. A partition serves %s write and %s read units a second, and one partition key value's writes stay on one partition (DynamoDB splits a hot key by sort key only when the writes spread over it, and these indexes' sort keys are times). %s (an allocation moves a sandbox into allocated, a mark-deletion out of it; the audit's global view is spread over %d keys); every other key has as many values as there are sandboxes, tracks, commands or entities. A replica has %d cores used up to %.0f %%, and there are never fewer than %d. CPU per command was measured on emulators without TLS; on AWS count more.\n\n",
		targetUtilisation*100, thousands(partitionWriteUnits), thousands(partitionReadUnits), strings.Join(shares, "; "), store.AuditGlobalKeys, replicaCores, targetUtilisation*100, minReplicas)

	p("## Other commands, for another mix\n\nEach command type the bench drives, per command as measured (AWS-billed units, requests besides DynamoDB's, serve CPU); a mix of your own costs their weighted sum.\n\n")
	p("| command | write units | read units | SQS requests | SNS publishes | USD per million | CPU µs |\n|---|---|---|---|---|---|---|\n")
	for _, k := range r.measuredKinds() {
		svc := k.cost.byService()
		p("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f |\n", k.name, k.cost.WriteUnits, k.cost.ReadUnits, svc["SQS"], svc["SNS"], k.cost.billPerMillion(), float64(k.cpu.Microseconds()))
	}
	p("\n")

	first, by := math.Inf(1), ""
	for _, t := range m.at(modelRates[0], true).tables() {
		if t.ThrottlesAt < first {
			first, by = t.ThrottlesAt, t.Name+" ("+t.Limit+")"
		}
	}
	for _, rate := range modelRates {
		// The backlog case's SQS cost holds where each replica's queue
		// always has messages waiting; below busyPerReplica, the closed
		// loop's (more requests per command) does.
		l := m.at(rate, true)
		if rate/float64(l.replicas()) < busyPerReplica {
			l = m.at(rate, false)
		}
		od, prov, msg := l.monthly()
		p("## %s commands/s\n\n", thousands(rate))
		if rate > first {
			p("**Past the first limit** (%s, at about %s commands/s): these are the units the mix would need, but that key's writes throttle at this rate until the design's key changes.\n\n", by, thousands(first))
		}
		p("| table or index | write units/s | read units/s | partitions | busiest key's write units/s | throttles first at | by |\n|---|---|---|---|---|---|---|\n")
		for _, t := range l.tables() {
			hot := "-"
			if t.HotKeyWrites > 0 {
				hot = fmt.Sprintf("%.0f", t.HotKeyWrites)
			}
			p("| %s | %.0f | %.0f | %d | %s | %s cmd/s | %s |\n", t.Name, t.Write, t.Read, t.Partitions, hot, thousands(t.ThrottlesAt), t.Limit)
		}
		p("\n| requests/s | |\n|---|---|\n")
		for _, op := range keys(l.Requests) {
			p("| %s | %.0f |\n", op, l.Requests[op])
		}
		p("\nMonthly: DynamoDB **$%s** on-demand or **$%s** provisioned; transit's own SQS and SNS requests $%s (producers' sends come on top: one request per command, or one per ten batched). Serve replicas: **%d** (%.1f cores).\n\n",
			thousands(od), thousands(prov), thousands(msg), l.replicas(), l.Cores)
	}

	p("## What throttles first\n\n%s, at about %s commands/s of this mix. Past it, that key's writes are refused (on-demand as well as provisioned), and DynamoDB refuses the base table's writes that would update the index: the command is retried, then redelivered.\n\n", by, thousands(first))

	p("## Checked against a second run\n\n")
	var run PipelineResult
	if r.Scale != nil && len(r.Scale.Runs) > 0 {
		run = r.Scale.Runs[0]
	}
	if run.Commands == 0 {
		p("This report has no scale-out case, so no second run of the mix to check the model against: run `make bench` with `--scale-replicas`.\n")
		return nil
	}
	p("The scale-out case's single replica ran the same mix at concurrency %d again, separately from the run the costs are from: %d commands at %.1f commands/s, a closed loop of %d clients as in that run. The model's prediction for that rate (with the closed loop's SQS cost), against what the second run measured. It checks that the costs per command the model multiplies hold from one run to the next, and the arithmetic from them to rates; it cannot check the limits, bills and replicas at rates the emulators do not reach.\n\n", run.Concurrency, run.Commands, run.PerSecond, run.Concurrency*run.Replicas)
	p("| quantity | predicted | measured | ratio | within 20 %% |\n|---|---|---|---|---|\n")
	for _, c := range m.check(r, run) {
		ok := "**no**"
		if c.within() {
			ok = "yes"
		}
		p("| %s | %.2f | %.2f | %s | %s |\n", c.What, c.Predicted, c.Measured, ratio(c.Predicted, c.Measured), ok)
	}
	return nil
}

func sumValues(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// thousands formats n rounded, with thin groups of three.
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// measuredKind is one command type's cost per command in a report.
type measuredKind struct {
	name string
	cost perCommand
	cpu  time.Duration
}

// measuredKinds lists every command type r has a cost for.
func (r Report) measuredKinds() []measuredKind {
	var kinds []measuredKind
	add := func(name string, cost metering.Report, n int) {
		if n > 0 && cost.Requests != nil {
			kinds = append(kinds, measuredKind{name, costPerCommand(cost, n, r.TransactUnitsScale), cost.CPU / time.Duration(n)})
		}
	}
	if cs := r.concurrencies(); len(cs) > 0 {
		t, _ := r.pair(cs[len(cs)-1])
		add("sandbox.allocate and sandbox.mark-deletion, on average", t.Cost, t.Commands)
	}
	if t := r.Timers; t != nil {
		add("a timer's firing (timer.due)", t.Cost, t.Timers)
	}
	if l := r.Layers; l != nil {
		add("layer.published", l.Cost, l.Packages*l.Versions)
	}
	if t := r.Tasks; t != nil {
		add("task.lease (races lost included)", t.Transit.Cost, t.Transit.Leases)
	}
	return kinds
}
