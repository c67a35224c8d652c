package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"transit/internal/bench"
	"transit/internal/metering"
)

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("transit bench", flag.ContinueOnError)
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Commands < 2 || o.Commands%2 != 0 {
		return fmt.Errorf("--commands: %d, want an even number of at least 2", o.Commands)
	}
	if o.Timers < 0 || o.TimerSpread <= 0 {
		return fmt.Errorf("--timers %d / --timer-spread %s: want 0 or more timers within a positive spread", o.Timers, o.TimerSpread)
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

func runBenchBaseline(ctx context.Context, args []string) error {
	var statsOut string
	meter := metering.New()
	svc, _, err := setup(ctx, "bench-baseline", args, func(fs *flag.FlagSet) {
		fs.StringVar(&statsOut, "stats-out", "", "as serve's --stats-out")
	}, func(c *aws.Config) { meter.Attach(c) })
	if err != nil {
		return err
	}
	if statsOut == "" {
		return errors.New("--stats-out is required")
	}
	stop := metering.MarkOnSignal(meter, statsOut+".mark")
	defer stop()
	if err := bench.Baseline(ctx, svc, svc.Config.Concurrency); err != nil {
		return err
	}
	return meter.WriteFile(statsOut)
}
