// Command transit-bench measures transit against a plain SDK loop on its
// own emulators (internal/bench); `make bench` builds and runs it. It is
// apart from the transit binary so that the benchmark, the emulator
// launchers and the metering stay out of production.
//
// `transit-bench bench` starts its workers from this same binary:
// bench-serve is transit's `serve` (service.New and Service.Serve, as
// cmd/transit runs them) with the metering attached, and bench-baseline
// is the comparison loop. Both take transit's settings as flags, and
// --stats-out.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"transit/config"
	"transit/console"
	"transit/internal/bench"
	"transit/internal/metering"
	"transit/service"
)

var subcommands = map[string]func(ctx context.Context, args []string) error{
	"bench": runBench,
	"model": runModel,
	// The workers `bench` starts: the processes under measurement.
	"bench-serve":    runBenchServe,
	"bench-baseline": runBenchBaseline,
}

func main() {
	if len(os.Args) < 2 || subcommands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: transit-bench model [--report FILE] [--out FILE]\n       transit-bench bench [--moto-only] [--commands N] [--concurrency L] [--rounds N] [--timers N] [--tasks N] [--agents N] [--layer-versions N] [--sqs-idle D] [--scale-replicas N] [--instrumentation-rounds N] [--console-rounds N] [--out DIR]   (-h for all flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := subcommands[os.Args[1]](ctx, os.Args[2:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "transit-bench "+os.Args[1]+":", err)
		}
		os.Exit(1)
	}
}

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("transit-bench bench", flag.ContinueOnError)
	o := bench.Options{}
	fs.BoolVar(&o.MotoOnly, "moto-only", false, "run DynamoDB on moto too, instead of DynamoDB Local")
	fs.IntVar(&o.Commands, "commands", 400, "commands per pipeline measurement (even)")
	levels := fs.String("concurrency", "1,4,16", "consumer concurrencies to measure at")
	fs.IntVar(&o.Rounds, "rounds", 5, "rounds of the allocation race")
	fs.StringVar(&o.OutDir, "out", "bench/out", "where report.json and throughput.svg go")
	fs.IntVar(&o.Timers, "timers", 2000, "timers in the timer case (0 skips it)")
	fs.DurationVar(&o.TimerSpread, "timer-spread", 3*time.Second, "the timer case's timers fall due within this")
	fs.IntVar(&o.Tasks, "tasks", 300, "tasks leased in the task case (0 skips it)")
	fs.IntVar(&o.Agents, "agents", 20, "agents leasing tasks in the task case, each a closed loop")
	fs.IntVar(&o.LayerVersions, "layer-versions", 10, "versions each package publishes in the layer case, one package per consumer slot (0 skips it)")
	fs.DurationVar(&o.SQSIdle, "sqs-idle", 40*time.Second, "the SQS case leaves each worker idle this long after it drained --commands queued before it started (0 skips the case); a multiple of the 20s long poll counts each poll a whole number of times")
	fs.IntVar(&o.ScaleReplicas, "scale-replicas", 3, "the scale-out case runs 1 up to this many transit serve replicas on one stack, --commands each, then times timer shards and stream leases moving when a second replica joins and when one is killed (0 skips it)")
	fs.DurationVar(&o.ScrapeInterval, "scrape-interval", 15*time.Second, "how often the instrumentation case reads /metrics (Prometheus's usual interval)")
	fs.BoolVar(&o.Profile, "profile", false, "write a CPU profile of each instrumentation run's worker beside the report")
	fs.IntVar(&o.InstrumentationRounds, "instrumentation-rounds", 5, "rounds of five runs (neither, metrics, tracing, both, both keeping one trace in ten) measuring what metrics and tracing cost (0 skips it)")
	fs.IntVar(&o.ConsoleRounds, "console-rounds", 3, "rounds of two runs (the console closed, and open with clients on its live views) measuring what watching costs (0 skips it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.ConsoleRounds < 0 {
		return fmt.Errorf("--console-rounds: %d, want 0 or more", o.ConsoleRounds)
	}
	if o.Commands < 2 || o.Commands%2 != 0 {
		return fmt.Errorf("--commands: %d, want an even number of at least 2", o.Commands)
	}
	if o.Timers < 0 || o.TimerSpread <= 0 {
		return fmt.Errorf("--timers %d / --timer-spread %s: want 0 or more timers within a positive spread", o.Timers, o.TimerSpread)
	}
	if o.LayerVersions < 0 {
		return fmt.Errorf("--layer-versions: %d, want 0 or more", o.LayerVersions)
	}
	if o.SQSIdle < 0 {
		return fmt.Errorf("--sqs-idle: %s, want 0 or more", o.SQSIdle)
	}
	if o.ScaleReplicas != 0 && (o.ScaleReplicas < 2 || o.ScaleReplicas > 8) {
		return fmt.Errorf("--scale-replicas: %d, want 0 (skip) or 2 to 8", o.ScaleReplicas)
	}
	if o.ScrapeInterval <= 0 {
		return fmt.Errorf("--scrape-interval: %s, want more than 0", o.ScrapeInterval)
	}
	if o.InstrumentationRounds < 0 {
		return fmt.Errorf("--instrumentation-rounds: %d, want 0 or more", o.InstrumentationRounds)
	}
	if o.Tasks < 0 || o.Agents < 1 || o.Agents > 1000 {
		return fmt.Errorf("--tasks %d / --agents %d: want 0 or more tasks and 1 to 1000 agents", o.Tasks, o.Agents)
	}
	if o.Rounds < 1 {
		return fmt.Errorf("--rounds: %d, want at least 1", o.Rounds)
	}
	for _, l := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || c < 1 || c > 1000 {
			return fmt.Errorf("--concurrency: %q, want a list such as 1,4,16", *levels)
		}
		o.Concurrencies = append(o.Concurrencies, c)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Executable = exe
	_, err = bench.Run(ctx, o, os.Stdout)
	return err
}

// runModel writes the capacity model built from a bench report.
func runModel(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("transit-bench model", flag.ContinueOnError)
	report := fs.String("report", "bench/out/report.json", "the report of a `transit-bench bench` run to build the model from")
	outPath := fs.String("out", "docs/capacity.md", "where the model goes (- for standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*report)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("--report %s: %w", *report, err)
	}
	var doc bytes.Buffer
	if err := bench.WriteCapacityModel(&doc, r); err != nil {
		return fmt.Errorf("--report %s: %w", *report, err)
	}
	if *outPath == "-" {
		_, err = os.Stdout.Write(doc.Bytes())
		return err
	}
	return os.WriteFile(*outPath, doc.Bytes(), 0o644)
}

// runBenchServe is `transit serve` under measurement: the same service
// and Serve, with every AWS client counted, the figures so far written to
// STATS.mark on SIGUSR1 and the totals to STATS when it has drained.
func runBenchServe(ctx context.Context, args []string) error {
	return metered(ctx, "bench-serve", args, func(ctx context.Context, svc *service.Service) error {
		c, err := console.New(svc, console.Options{Token: svc.Config.ConsoleToken, Logger: svc.Logger})
		if err != nil {
			return err
		}
		err = svc.Serve(ctx, service.ServeOptions{Console: c.Serving})
		// As serve does on exit; inside the figures, since exporting the
		// last spans is part of what tracing costs.
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return errors.Join(err, svc.FlushTraces(flush))
	})
}

// runBenchBaseline is the comparison loop under measurement, metered as
// bench-serve is.
func runBenchBaseline(ctx context.Context, args []string) error {
	return metered(ctx, "bench-baseline", args, func(ctx context.Context, svc *service.Service) error {
		return bench.Baseline(ctx, svc, svc.Config.Concurrency)
	})
}

// metered parses transit's settings (flags, then the environment, as
// transit does) and --stats-out, builds the service with the metering
// attached to its AWS configuration, and runs work with it.
func metered(ctx context.Context, name string, args []string, work func(context.Context, *service.Service) error) error {
	fs := flag.NewFlagSet("transit-bench "+name, flag.ContinueOnError)
	var cfg config.Config
	binder := config.Bind(fs, &cfg)
	statsOut := fs.String("stats-out", "", "write AWS requests, DynamoDB capacity, CPU and allocations as JSON to this file on exit (and to FILE.mark on SIGUSR1); required")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile %s: %w", *cpuProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	if *statsOut == "" {
		return errors.New("--stats-out is required")
	}
	if err := binder.Resolve(&cfg, os.LookupEnv); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	meter := metering.New(cfg.Prefix)
	svc, err := service.New(ctx, cfg, func(c *aws.Config) { meter.Attach(c) })
	if err != nil {
		return err
	}
	stop := metering.MarkOnSignal(meter, *statsOut+".mark")
	defer stop()
	return errors.Join(work(ctx, svc), meter.WriteFile(*statsOut))
}
