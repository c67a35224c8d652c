package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"transit/internal/emulator"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// InstrumentationResult is what metrics and tracing cost: transit's
// pipeline with neither, with /metrics scraped every second, with every
// command traced and exported over OTLP, and with both, run in rounds of
// the four so the machine's drift falls on every side.
type InstrumentationResult struct {
	Concurrency int `json:"concurrency"`
	// Runs holds each variant's runs, by instrumentationVariants' names.
	Runs map[string][]PipelineResult `json:"runs"`
	// Spans the OTLP receiver took and scrapes of /metrics: proof that
	// they were on.
	Spans   int64 `json:"spans"`
	Scrapes int64 `json:"scrapes"`
}

// instrumentationVariants are the four runs of a round.
var instrumentationVariants = []struct {
	name             string
	metrics, tracing bool
}{{"off", false, false}, {"metrics", true, false}, {"tracing", false, true}, {"both", true, true}}

// cpuPerCommand is the median CPU per command of rs.
func cpuPerCommand(rs []PipelineResult) time.Duration {
	var per []time.Duration
	for _, r := range rs {
		per = append(per, r.Cost.CPU/time.Duration(r.Commands))
	}
	slices.Sort(per)
	if len(per) == 0 {
		return 0
	}
	return per[len(per)/2]
}

// runInstrumentation runs rounds of the four variants at concurrency c.
func runInstrumentation(ctx context.Context, o Options, c, rounds int) (InstrumentationResult, error) {
	res := InstrumentationResult{Concurrency: c, Runs: map[string][]PipelineResult{}}
	otlp, err := newOTLPReceiver()
	if err != nil {
		return res, err
	}
	defer otlp.srv.Close()
	var scrapes atomic.Int64
	for round := range rounds {
		// Each round starts one variant later, so a drift of the machine
		// during a round does not always fall on the same variant.
		for k := range instrumentationVariants {
			v := instrumentationVariants[(round+k)%len(instrumentationVariants)]
			env, flags := []string{"OTEL_TRACES_EXPORTER=none"}, []string{"--http-addr", "off"}
			if v.tracing {
				env = []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + otlp.url}
			}
			stopScraping := func() {}
			if v.metrics {
				port, err := emulator.FreePort()
				if err != nil {
					return res, err
				}
				addr := fmt.Sprintf("127.0.0.1:%d", port)
				flags = []string{"--http-addr", addr}
				var scrapeCtx context.Context
				scrapeCtx, stopScraping = context.WithCancel(ctx)
				go scrape(scrapeCtx, "http://"+addr+"/metrics", &scrapes)
			}
			// Fresh emulators for every run: both slow down as the runs'
			// stacks pile up, which would fall on the later runs and
			// swamp the cost measured.
			stopEmulators, _, err := startEmulators(ctx, o)
			if err != nil {
				stopScraping()
				return res, err
			}
			r, err := runPipeline(ctx, o, RoleTransit, c, env, flags...)
			stopScraping()
			stopEmulators()
			if err != nil {
				return res, fmt.Errorf("%s: %w", v.name, err)
			}
			res.Runs[v.name] = append(res.Runs[v.name], r)
		}
	}
	res.Spans, res.Scrapes = otlp.spans.Load(), scrapes.Load()
	return res, nil
}

// scrape reads url every second, as a demanding Prometheus would, until
// ctx ends; the worker may not be listening yet at first.
func scrape(ctx context.Context, url string, scrapes *atomic.Int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			scrapes.Add(1)
		}
	}
}

// otlpReceiver takes OTLP/HTTP trace exports and counts their spans, as a
// collector on the same host would take them.
type otlpReceiver struct {
	srv   *http.Server
	url   string
	spans atomic.Int64
}

func newOTLPReceiver() (*otlpReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String() + "/v1/traces"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans.Add(int64(len(ss.Spans)))
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (i InstrumentationResult) write(out io.Writer, w *tabwriter.Writer) {
	fmt.Fprintf(out, "\nMetrics and tracing: transit at concurrency %d, %d rounds of four runs; metrics = /metrics served and scraped every second (%d scrapes); tracing = every command traced and exported over OTLP/HTTP to a local receiver (%d spans); off = neither (no ops server, no metrics kept)\n",
		i.Concurrency, len(i.Runs["off"]), i.Scrapes, i.Spans)
	fmt.Fprintln(w, "\tCPU µs per command (median)\tratio to off\tcmd/s (median)\tratio to off\t")
	off, offRate := cpuPerCommand(i.Runs["off"]), medianRate(i.Runs["off"])
	for _, v := range instrumentationVariants {
		cpu, rate := cpuPerCommand(i.Runs[v.name]), medianRate(i.Runs[v.name])
		fmt.Fprintf(w, "%s\t%.0f\t%s\t%.1f\t%s\t\n", v.name, float64(cpu.Microseconds()), ratio(float64(cpu), float64(off)), rate, ratio(rate, offRate))
	}
	w.Flush()
}

func medianRate(rs []PipelineResult) float64 {
	var v []float64
	for _, r := range rs {
		v = append(v, r.PerSecond)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}
