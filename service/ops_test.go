package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
	"transit/provider"
	"transit/service"
)

// /readyz answers 503, naming what failed, while the emulators cannot be
// reached, and 200 again once they can; /healthz answers 200 throughout.
func TestOps_readyz_follows_the_emulators_and_healthz_stays_up(t *testing.T) {
	addr := freeAddr(t)
	s := newStack(t, func(c *config.Config) { c.HTTPAddr = addr })
	n := newNetwork(t)
	s.serveWith(n.service(s))
	base := "http://" + addr

	waitStatus(t, base+"/readyz", http.StatusOK, 30*time.Second)
	code, _ := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	n.cut()
	body := waitStatus(t, base+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	assert.Contains(t, body, "not ready")
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "alive while AWS is unreachable")

	require.NoError(t, n.restore())
	waitStatus(t, base+"/readyz", http.StatusOK, 30*time.Second)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus polls url until it answers want, and returns that answer's body.
func waitStatus(t *testing.T, url string, want int, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := get(t, url)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d within %s, last %d %s", url, want, within, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// flakyLister is a sandbox provider whose first inventory pull fails, as
// a provider that is briefly down would: the pull is retried in process.
type flakyLister struct{ calls atomic.Int32 }

func (p *flakyLister) DeleteSandbox(context.Context, string) error { return nil }

func (p *flakyLister) ListSandboxes(context.Context) ([]provider.Sandbox, error) {
	if p.calls.Add(1) == 1 {
		return nil, errors.New("provider unavailable")
	}
	return []provider.Sandbox{{ExternalID: "ext-1", Name: "one", LabDurationHours: 4}}, nil
}

// /metrics after a known mix: a pull retried once, an allocation, one
// refused for an empty pool, and a poison message.
func TestOps_metrics_count_a_known_mix(t *testing.T) {
	addr := freeAddr(t)
	s := newStack(t, func(c *config.Config) { c.HTTPAddr = addr })
	s.serve(service.ServeOptions{Provider: &flakyLister{}})

	pull := uuid.NewString()
	s.send(pull, messages.SandboxSync, messages.SandboxSyncPayload{})
	s.eventFor(pull, messages.SandboxSynced)
	first, second := uuid.NewString(), uuid.NewString()
	s.send(first, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "t1"})
	s.send(second, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "t2"})
	s.sendRaw("not json", map[string]string{messages.TypeAttribute: string(messages.SandboxAllocate)})
	outcomes := map[messages.Type]int{}
	for _, id := range []string{first, second} {
		events := s.collect(60*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, id)) > 0 })
		outcomes[causedBy(events, id)[0].Envelope.Type]++
	}
	require.Equal(t, map[messages.Type]int{messages.SandboxAllocated: 1, messages.SandboxAllocationRejected: 1}, outcomes)
	s.deadLetters(1)

	sync, allocate := string(messages.SandboxSync), string(messages.SandboxAllocate)
	want := map[string]float64{
		`transit_messages_received_total{domain="sandbox",type="` + sync + `"}`:                                        1,
		`transit_messages_retried_total{domain="sandbox",type="` + sync + `"}`:                                         1,
		`transit_messages_handled_total{domain="sandbox",type="` + sync + `"}`:                                         1,
		`transit_messages_received_total{domain="sandbox",type="` + allocate + `"}`:                                    3,
		`transit_messages_handled_total{domain="sandbox",type="` + allocate + `"}`:                                     2,
		`transit_messages_dead_lettered_total{domain="sandbox",type="` + allocate + `"}`:                               1,
		`transit_commands_rejected_total{domain="sandbox",reason="pool_exhausted",type="sandbox.allocation-rejected"}`: 1,
		`transit_messages_failed_total{domain="sandbox",type="` + allocate + `"}`:                                      0,
		`transit_handler_duration_seconds_count{domain="sandbox",type="` + allocate + `"}`:                             3,
		`transit_queue_messages{domain="sandbox",queue="dlq",state="visible"}`:                                         1,
		`transit_queue_messages{domain="sandbox",queue="commands",state="visible"}`:                                    0,
		`transit_timer_shards_owned{}`: 4,
	}
	// The last outcome is counted as its delivery is acked, just after the
	// event is published and the DLQ written; queue depths are sampled at
	// most every 5 s.
	var got map[string]float64
	require.Eventually(t, func() bool {
		got = scrape(t, "http://"+addr+"/metrics")
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}, 20*time.Second, 200*time.Millisecond, "metrics")
	for k, v := range want {
		assert.Equal(t, v, got[k], k)
	}
}

// scrape reads a /metrics page into series → value, each series written
// as name{label="value",…} with labels sorted by name.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			series := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[series] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[series] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[strings.Replace(series, name, name+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
