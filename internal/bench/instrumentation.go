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

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// InstrumentationResult is what metrics and tracing cost: transit's
// pipeline with /metrics scraped every second and every command traced
// and exported over OTLP, against the same with the ops server and
// tracing off, in pairs run alternately so the machine's drift falls on
// both sides.
type InstrumentationResult struct {
	Concurrency int              `json:"concurrency"`
	Off         []PipelineResult `json:"off"`
	On          []PipelineResult `json:"on"`
	// Spans the OTLP receiver took and scrapes of /metrics during the
	// "on" runs: proof that they were on.
	Spans   int64 `json:"spans"`
	Scrapes int64 `json:"scrapes"`
}

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

// runInstrumentation runs pairs of transit pipelines at concurrency c, one
// with metrics and tracing off, one with both on.
func runInstrumentation(ctx context.Context, o Options, c, pairs int) (InstrumentationResult, error) {
	res := InstrumentationResult{Concurrency: c}
	otlp, err := newOTLPReceiver()
	if err != nil {
		return res, err
	}
	defer otlp.srv.Close()
	var scrapes atomic.Int64
	for range pairs {
		off, err := runPipeline(ctx, o, RoleTransit, c, []string{"OTEL_TRACES_EXPORTER=none"}, "--http-addr", "off")
		if err != nil {
			return res, fmt.Errorf("off: %w", err)
		}
		res.Off = append(res.Off, off)
		port, err := freePort()
		if err != nil {
			return res, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		scrapeCtx, stopScraping := context.WithCancel(ctx)
		go scrape(scrapeCtx, "http://"+addr+"/metrics", &scrapes)
		on, err := runPipeline(ctx, o, RoleTransit, c, []string{
			"OTEL_TRACES_EXPORTER=otlp",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + otlp.url,
		}, "--http-addr", addr)
		stopScraping()
		if err != nil {
			return res, fmt.Errorf("on: %w", err)
		}
		res.On = append(res.On, on)
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
		resp, err := http.Get(url)
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

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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
	off, on := cpuPerCommand(i.Off), cpuPerCommand(i.On)
	fmt.Fprintf(out, "\nMetrics and tracing: transit at concurrency %d, %d pairs run alternately; on = /metrics scraped every second and every command traced, exported over OTLP/HTTP (%d spans, %d scrapes); off = no ops server, no tracing\n",
		i.Concurrency, len(i.On), i.Spans, i.Scrapes)
	fmt.Fprintln(w, "\tCPU µs per command (median)\tcmd/s (median)\t")
	fmt.Fprintf(w, "off\t%.0f\t%.1f\t\n", float64(off.Microseconds()), medianRate(i.Off))
	fmt.Fprintf(w, "on\t%.0f\t%.1f\t\n", float64(on.Microseconds()), medianRate(i.On))
	fmt.Fprintf(w, "on/off\t%s\t%s\t\n", ratio(float64(on), float64(off)), ratio(medianRate(i.On), medianRate(i.Off)))
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
