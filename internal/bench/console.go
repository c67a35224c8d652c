package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"transit/internal/emulator"
)

// ConsoleResult is what an open console costs command handling: transit's
// pipeline with the console served and nobody watching (closed), and
// with viewers subscribed to its live views (open), in rounds of the two
// so the machine's drift falls on both.
type ConsoleResult struct {
	Concurrency int `json:"concurrency"`
	// Viewers is how many clients each live view had in the open runs;
	// Updates how many fragments they received in all: proof they were
	// live.
	Viewers int   `json:"viewers"`
	Updates int64 `json:"updates"`
	// Runs holds each variant's runs ("closed", "open"), in round order.
	Runs map[string][]PipelineResult `json:"runs"`
}

// consoleLiveViews are the live views an open console streams: what an
// operator has open while the system works. (A task's page reads one
// task a second, and stops once it ended; the pipeline runs no task.)
var consoleLiveViews = []string{"/live/overview", "/live/tasks"}

// consoleViewers is how many clients watch each view, and
// consoleLength how many times --commands each run handles: a run spans
// many refreshes of the views (every 5 s).
const (
	consoleViewers = 2
	consoleLength  = 4
)

// runConsole runs rounds of closed and open at concurrency c.
func runConsole(ctx context.Context, o Options, c, rounds int) (ConsoleResult, error) {
	res := ConsoleResult{Concurrency: c, Viewers: consoleViewers, Runs: map[string][]PipelineResult{}}
	o.Commands *= consoleLength
	var updates, refused atomic.Int64
	for round := range rounds {
		for k := range 2 {
			open := (round+k)%2 == 1
			port, err := emulator.FreePort()
			if err != nil {
				return res, err
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			stopViewing := func() {}
			if open {
				var viewCtx context.Context
				viewCtx, stopViewing = context.WithCancel(ctx)
				var wg sync.WaitGroup
				for _, view := range consoleLiveViews {
					for range consoleViewers {
						wg.Go(func() { watch(viewCtx, "http://"+addr+view, &updates, &refused) })
					}
				}
				stop := stopViewing
				stopViewing = func() { stop(); wg.Wait() }
			}
			// Fresh emulators for every run, as in the instrumentation case.
			stopEmulators, _, err := startEmulators(ctx, o)
			if err != nil {
				stopViewing()
				return res, err
			}
			r, err := runPipeline(ctx, o, RoleTransit, c, []string{"OTEL_TRACES_EXPORTER=none"}, "--http-addr", addr)
			stopViewing()
			stopEmulators()
			name := map[bool]string{false: "closed", true: "open"}[open]
			if err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			res.Runs[name] = append(res.Runs[name], r)
		}
	}
	res.Updates = updates.Load()
	if n := refused.Load(); n > 0 || res.Updates == 0 {
		return res, fmt.Errorf("the live views answered %d fragments and refused %d subscriptions: nothing was watched", res.Updates, n)
	}
	return res, nil
}

// watch subscribes to a live view as a browser would, counting the
// fragments it receives, until ctx ends; the worker may not be listening
// yet at first. An answer that is not a stream counts as refused.
func watch(ctx context.Context, url string, updates, refused *atomic.Int64) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err == nil && (resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream") {
			refused.Add(1)
			_ = resp.Body.Close()
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for sc.Scan() {
			if len(sc.Bytes()) > 6 && string(sc.Bytes()[:6]) == "event:" {
				updates.Add(1)
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

func (r ConsoleResult) write(out io.Writer, w *tabwriter.Writer) {
	fmt.Fprintf(out, "\nConsole: transit at concurrency %d, %d rounds of two runs of %d× --commands; closed = the console served, nobody watching; open = %d clients on each of its live views (%v, read every 5 s; %d fragments received in all). Ratios are to closed in the same round, median over the rounds, and the rounds' range\n",
		r.Concurrency, len(r.Runs["closed"]), consoleLength, r.Viewers, consoleLiveViews, r.Updates)
	fmt.Fprintln(w, "\tCPU µs per command (median)\tCPU ratio\trounds' range\tallocs ratio\tcmd/s ratio\t")
	closed := r.Runs["closed"]
	for _, name := range []string{"closed", "open"} {
		runs := r.Runs[name]
		cpu, lo, hi := pairedRatios(runs, closed, cpuOf)
		allocs, _, _ := pairedRatios(runs, closed, allocsOf)
		rate, _, _ := pairedRatios(runs, closed, rateOf)
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f–%.2f\t%.2f\t%.2f\t\n", name, float64(cpuPerCommand(runs).Microseconds()), cpu, lo, hi, allocs, rate)
	}
	w.Flush()
}
