package router_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/metrics"
	"transit/router"
)

// The delivery metrics through the real middleware chain: an attempt
// that panics is a retry, a poison message is dead-lettered and not
// failed, and each delivery is received once whatever its attempts.
func TestRouter_metrics_count_deliveries(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, &scriptedHandler{fail: func(call int32) error {
		if call == 1 {
			panic("first attempt")
		}
		return nil
	}}, func(c *router.Config) { c.Metrics = m })

	h.sendAllocate(t)
	receive(t, h.out)
	h.send(t, "not json", map[string]string{messages.TypeAttribute: string(messages.SandboxAllocate)})
	receive(t, h.dlq)

	allocate := map[string]string{"domain": "sandbox", "type": string(messages.SandboxAllocate)}
	want := map[string]float64{
		"transit_messages_received_total":      2,
		"transit_messages_retried_total":       1,
		"transit_messages_handled_total":       1,
		"transit_messages_dead_lettered_total": 1,
		"transit_messages_failed_total":        0,
	}
	// The outcome is counted as the handler chain returns, just after the
	// produced message is published.
	require.Eventually(t, func() bool { return value(t, m, "transit_messages_dead_lettered_total", allocate) == 1 }, 5*time.Second, 10*time.Millisecond)
	for name, v := range want {
		assert.Equal(t, v, value(t, m, name, allocate), name)
	}
}

// value is the counter name with exactly labels, 0 when absent.
func value(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}
