package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"transit/internal/emulator"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// InstrumentationResult is what metrics and tracing cost: transit's
// pipeline with neither, with /metrics scraped, with every command traced
// and exported over OTLP, with both, and with both keeping one trace in
// ten, run in rounds of the five so the machine's drift falls on every
// side.
type InstrumentationResult struct {
	Concurrency    int           `json:"concurrency"`
	ScrapeInterval time.Duration `json:"scrape_interval"`
	// Runs holds each variant's runs, by instrumentationVariants' names,
	// in the order of the rounds.
	Runs map[string][]PipelineResult `json:"runs"`
	// Spans the OTLP receiver took and scrapes of /metrics: proof that
	// they were on.
	Spans   int64 `json:"spans"`
	Scrapes int64 `json:"scrapes"`
}

// instrumentationVariants are the runs of a round. Tracing keeps every
// command's trace but in both-sampled, which keeps one in ten, as a
// production deployment would (a ratio sampler, parent-based).
var instrumentationVariants = []struct {
	name             string
	metrics, tracing bool
	sampled          string
}{{"off", false, false, ""}, {"metrics", true, false, ""}, {"tracing", false, true, ""}, {"both", true, true, ""}, {"both-sampled", true, true, "0.1"}}

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

// pairedRatios are, over the rounds, the median, lowest and highest of
// a variant's figure per command to off's in the same round: runs
// minutes apart on a shared machine differ more than the variants do,
// runs of one round less.
func pairedRatios(variant, off []PipelineResult, per func(PipelineResult) float64) (median, lowest, highest float64) {
	var rs []float64
	for i := range min(len(variant), len(off)) {
		rs = append(rs, per(variant[i])/per(off[i]))
	}
	if len(rs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2], rs[0], rs[len(rs)-1]
}

// The figures per command the instrumentation case compares.
func cpuOf(r PipelineResult) float64    { return float64(r.Cost.CPU) / float64(r.Commands) }
func allocsOf(r PipelineResult) float64 { return float64(r.Cost.Mallocs) / float64(r.Commands) }
func bytesOf(r PipelineResult) float64  { return float64(r.Cost.AllocBytes) / float64(r.Commands) }
func rateOf(r PipelineResult) float64   { return r.PerSecond }

// runInstrumentation runs rounds of the variants at concurrency c.
func runInstrumentation(ctx context.Context, o Options, c, rounds int) (InstrumentationResult, error) {
	res := InstrumentationResult{Concurrency: c, ScrapeInterval: o.ScrapeInterval, Runs: map[string][]PipelineResult{}}
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
				if v.sampled != "" {
					env = append(env, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG="+v.sampled)
				}
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
				go scrape(scrapeCtx, "http://"+addr+"/metrics", o.ScrapeInterval, &scrapes)
			}
			if o.Profile {
				flags = append(flags, "--cpu-profile", filepath.Join(o.OutDir, fmt.Sprintf("instrumentation-%s-%d.pprof", v.name, round+1)))
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

// scrape reads url every interval, as Prometheus would, until ctx ends;
// the worker may not be listening yet at first.
func scrape(ctx context.Context, url string, interval time.Duration, scrapes *atomic.Int64) {
	t := time.NewTicker(interval)
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
	fmt.Fprintf(out, "\nMetrics and tracing: transit at concurrency %d, %d rounds of five runs; metrics = /metrics served and scraped every %s (%d scrapes); tracing = every command traced and exported over OTLP/HTTP to a local receiver (%d spans); both-sampled = both, keeping one trace in ten (parentbased_traceidratio 0.1); off = neither (no ops server, no metrics kept). Ratios are to off in the same round, median over the rounds (CPU: and the rounds' range; allocations vary far less than CPU time on a shared machine)\n",
		i.Concurrency, len(i.Runs["off"]), i.ScrapeInterval, i.Scrapes, i.Spans)
	fmt.Fprintln(w, "\tCPU µs per command (median)\tCPU ratio\trounds' range\tallocs ratio\tKiB ratio\tcmd/s ratio\t")
	off := i.Runs["off"]
	for _, v := range instrumentationVariants {
		runs := i.Runs[v.name]
		cpu, lo, hi := pairedRatios(runs, off, cpuOf)
		allocs, _, _ := pairedRatios(runs, off, allocsOf)
		bytes, _, _ := pairedRatios(runs, off, bytesOf)
		rate, _, _ := pairedRatios(runs, off, rateOf)
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f–%.2f\t%.2f\t%.2f\t%.2f\t\n", v.name, float64(cpuPerCommand(runs).Microseconds()), cpu, lo, hi, allocs, bytes, rate)
	}
	w.Flush()
}
