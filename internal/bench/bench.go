// Package bench measures transit against a plain SDK loop on the same
// emulators, in the same run: throughput and latency, CPU and allocations
// per command, AWS requests and capacity per command with an estimated
// bill, and the allocation race. `transit-bench bench` (cmd/transit-bench)
// and `make bench` run it.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"transit/internal/emulator"
)

// Options set what a run measures.
type Options struct {
	// MotoOnly runs DynamoDB on moto too, instead of DynamoDB Local.
	MotoOnly bool
	// Commands per pipeline measurement (allocate + mark-deletion pairs).
	Commands int
	// Concurrencies to measure at.
	Concurrencies []int
	// Rounds of the allocation race.
	Rounds int
	// Timers due within TimerSpread in the timer case; 0 skips it.
	Timers      int
	TimerSpread time.Duration
	// Tasks leased by Agents agents in the task case; 0 skips it.
	Tasks, Agents int
	// LayerVersions is how many versions each package publishes in the
	// layer case; 0 skips it.
	LayerVersions int
	// SQSIdle is how long the SQS case leaves the worker idle, after it
	// drained Commands queued before it started; 0 skips the case.
	SQSIdle time.Duration
	// ScaleReplicas is the most transit serve replicas the scale-out case
	// runs on one stack (1 up to it), before its rebalance of timer
	// shards and stream leases; 0 skips the case.
	ScaleReplicas int
	// InstrumentationRounds of five runs (neither, metrics, tracing,
	// both, both with one trace in ten kept) measure what metrics and tracing cost; 0 skips it.
	InstrumentationRounds int
	// ConsoleRounds of two runs (the console closed, and open with its
	// live views subscribed) measure what watching costs; 0 skips it.
	ConsoleRounds int
	// ScrapeInterval is how often the metrics variants' /metrics is read.
	ScrapeInterval time.Duration
	// Profile writes a CPU profile of each instrumentation run's worker
	// to OutDir, to see where a variant's extra cost goes.
	Profile bool
	// OutDir receives report.json, throughput.svg and the workers' stats.
	OutDir string
	// Executable is the transit-bench binary, whose bench-serve and
	// bench-baseline subcommands the workers run.
	Executable string
}

// Report is everything a run measured.
type Report struct {
	At        time.Time `json:"at"`
	Emulators string    `json:"emulators"`
	// TransactUnitsScale turns the write units the emulator reports for
	// TransactWriteItems into what AWS bills: 0.5 on DynamoDB Local,
	// which counts 4 units per KB a transaction writes where AWS counts
	// 2 (moto reports no capacity).
	TransactUnitsScale float64          `json:"transact_units_scale"`
	Pipeline           []PipelineResult `json:"pipeline"`
	Floor              perCommand       `json:"floor"`
	Contention         ContentionResult `json:"contention"`
	Timers             *TimerResult     `json:"timers,omitempty"`
	Tasks              *TaskCase        `json:"tasks,omitempty"`
	Layers             *LayerCase       `json:"layers,omitempty"`
	SQS                *SQSCase         `json:"sqs,omitempty"`
	Scale              *ScaleCase       `json:"scale,omitempty"`
	// Console is what an open console costs.
	Console *ConsoleResult `json:"console,omitempty"`
	// Instrumentation is what metrics and tracing cost.
	Instrumentation *InstrumentationResult `json:"instrumentation,omitempty"`
}

// Run starts its own emulators, measures, prints the report to out and
// writes it under o.OutDir.
func Run(ctx context.Context, o Options, out io.Writer) (Report, error) {
	rep := Report{At: time.Now().UTC()}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return rep, err
	}
	stop, desc, err := startEmulators(ctx, o)
	if err != nil {
		return rep, err
	}
	defer func() { stop() }()
	rep.Emulators, rep.TransactUnitsScale = desc, 1
	if !o.MotoOnly {
		rep.TransactUnitsScale = 0.5
	}
	fmt.Fprintf(out, "emulators: %s\n", desc)
	for _, c := range o.Concurrencies {
		for _, role := range []string{RoleBaseline, RoleTransit} {
			fmt.Fprintf(out, "pipeline: %s at concurrency %d, %d commands...\n", role, c, o.Commands)
			r, err := runPipeline(ctx, o, role, c, nil)
			if err != nil {
				return rep, fmt.Errorf("pipeline %s c=%d: %w", role, c, err)
			}
			rep.Pipeline = append(rep.Pipeline, r)
		}
	}
	if rep.Floor, err = measureFloor(ctx, "bf-"+time.Now().Format("150405")); err != nil {
		return rep, fmt.Errorf("floor: %w", err)
	}
	fmt.Fprintf(out, "contention: %d rounds of 50 allocators for 10 sandboxes...\n", o.Rounds)
	if rep.Contention, err = runContention(ctx, o, o.Rounds, 50, 10); err != nil {
		return rep, fmt.Errorf("contention: %w", err)
	}
	if o.Timers > 0 {
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "timers: %d due within %s, concurrency %d, then the emulators' ceiling for the same calls...\n", o.Timers, o.TimerSpread, c)
		t, err := runTimers(ctx, o, o.Timers, o.TimerSpread, c)
		if err != nil {
			return rep, fmt.Errorf("timers: %w", err)
		}
		rep.Timers = &t
	}
	if o.Tasks > 0 {
		fmt.Fprintf(out, "tasks: %d leased by %d agents, baseline then transit...\n", o.Tasks, o.Agents)
		t, err := runTaskCase(ctx, o)
		if err != nil {
			return rep, fmt.Errorf("tasks: %w", err)
		}
		rep.Tasks = &t
	}
	if o.LayerVersions > 0 {
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "layers: %d packages publishing %d versions each, concurrency %d...\n", c, o.LayerVersions, c)
		lc, err := runLayers(ctx, o, c, o.LayerVersions)
		if err != nil {
			return rep, fmt.Errorf("layers: %w", err)
		}
		rep.Layers = &lc
	}
	if o.SQSIdle > 0 {
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "sqs: %d commands queued before the worker starts, then %s idle, concurrency %d, baseline then transit...\n", o.Commands, o.SQSIdle, c)
		q, err := runSQSCase(ctx, o, c)
		if err != nil {
			return rep, fmt.Errorf("sqs: %w", err)
		}
		rep.SQS = &q
	}
	if o.ScaleReplicas > 0 {
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "scale: 1 to %d transit replicas on one stack, concurrency %d each, %d commands each, then timer shards and stream leases moving...\n", o.ScaleReplicas, c, o.Commands)
		sc, err := runScale(ctx, o, o.ScaleReplicas, c, out)
		if err != nil {
			return rep, fmt.Errorf("scale: %w", err)
		}
		rep.Scale = &sc
	}
	if o.InstrumentationRounds > 0 {
		// Its runs start emulators of their own (runInstrumentation).
		stop()
		stop = func() {}
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "instrumentation: %d rounds of transit at concurrency %d with neither, metrics, tracing, both and both sampled...\n", o.InstrumentationRounds, c)
		i, err := runInstrumentation(ctx, o, c, o.InstrumentationRounds)
		if err != nil {
			return rep, fmt.Errorf("instrumentation: %w", err)
		}
		rep.Instrumentation = &i
	}
	if o.ConsoleRounds > 0 {
		// Its runs start emulators of their own, as the instrumentation
		// case's do.
		stop()
		stop = func() {}
		c := o.Concurrencies[len(o.Concurrencies)-1]
		fmt.Fprintf(out, "console: %d rounds of transit at concurrency %d with the console closed and open...\n", o.ConsoleRounds, c)
		cr, err := runConsole(ctx, o, c, o.ConsoleRounds)
		if err != nil {
			return rep, fmt.Errorf("console: %w", err)
		}
		rep.Console = &cr
	}
	rep.Write(out)
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(o.OutDir, "report.json"), b, 0o644); err != nil {
		return rep, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "throughput.svg"), rep.SVG(), 0o644); err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "\nwritten: %s, %s\n", filepath.Join(o.OutDir, "report.json"), filepath.Join(o.OutDir, "throughput.svg"))
	return rep, nil
}

// startEmulators starts moto for SQS, SNS and STS and, unless MotoOnly,
// DynamoDB Local for DynamoDB and its streams, and points this process and
// its workers at them through the SDK's standard variables.
func startEmulators(ctx context.Context, o Options) (stop func(), desc string, err error) {
	moto, err := emulator.StartMoto(ctx, filepath.Join(o.OutDir, "moto.log"))
	if err != nil {
		return nil, "", err
	}
	stops := []func(){moto.Stop}
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	env := map[string]string{
		"AWS_ENDPOINT_URL": moto.URL, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL_DYNAMODB": "", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": "",
	}
	desc = "moto for SQS, SNS and DynamoDB"
	if !o.MotoOnly {
		dir, err := emulator.InstallDynamoDBLocal(ctx, emulator.DefaultCacheDir())
		if err != nil {
			stop()
			return nil, "", err
		}
		ddb, err := emulator.StartDynamoDBLocal(ctx, dir, filepath.Join(o.OutDir, "dynamodb-local.log"))
		if err != nil {
			stop()
			return nil, "", err
		}
		stops = append(stops, ddb.Stop)
		env["AWS_ENDPOINT_URL_DYNAMODB"] = ddb.URL
		env["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] = ddb.URL
		desc = "DynamoDB Local for DynamoDB, moto for SQS and SNS"
	}
	for k, v := range env {
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
	}
	return stop, desc, nil
}
