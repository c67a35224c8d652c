// Package metrics is transit's Prometheus instrumentation, served on
// /metrics: what each command delivery came to, by domain and type; the
// process's AWS calls (Calls); and what an instance holds (State). Every
// series transit serves is defined here (docs/operations.md lists them).
package metrics

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"transit/messages"
)

// Metrics holds transit's collectors on a registry of its own, so a test
// or a second Service sees only its own counts.
type Metrics struct {
	registry *prometheus.Registry
	// outcomes holds only the delivery outcome counters, for the window
	// `transit status` reads: gathering it asks nothing of AWS.
	outcomes *prometheus.Registry

	received *prometheus.CounterVec
	handled  *prometheus.CounterVec
	failed   *prometheus.CounterVec
	retried  *prometheus.CounterVec
	poisoned *prometheus.CounterVec
	rejected *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	lateness prometheus.Histogram
}

// New registers every collector, with the Go runtime's and the process's.
func New() *Metrics {
	byType := []string{"domain", "type"}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		outcomes: prometheus.NewRegistry(),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_messages_received_total",
			Help: "Message deliveries taken by a handler, redeliveries included, counted as each ends."}, byType),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_messages_handled_total",
			Help: "Deliveries whose handler succeeded: applied, replayed or rejected. A delivery whose produced messages then fail to publish is nacked and counted again when redelivered."}, byType),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_messages_failed_total",
			Help: "Deliveries whose in-process retries ran out; nacked, SQS delivers them again."}, byType),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_messages_retried_total",
			Help: "In-process retries after a transient failure."}, byType),
		poisoned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_messages_dead_lettered_total",
			Help: "Messages that can never succeed (malformed, invalid), sent to the domain's DLQ with the reason."}, byType),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_commands_rejected_total",
			Help: "Commands refused by their state machine, by the rejection event's reason."}, []string{"domain", "type", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "transit_handler_duration_seconds",
			Help:    "Time from a delivery's first attempt to its outcome, retries included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, byType),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "transit_timer_firing_lateness_seconds",
			Help:    "Time from a timer's execute_at to the moment its callback is called, retries of a failed callback from their own due time.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
	}
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.received, m.handled, m.failed, m.retried, m.poisoned, m.rejected, m.latency, m.lateness)
	m.outcomes.MustRegister(m.handled, m.rejected, m.failed)
	return m
}

// Register adds the counts of the process's AWS calls, kept across
// Serves.
func (m *Metrics) Register(calls *Calls) { m.registry.MustRegister(calls) }

// FiringLate observes how late a timer's callback is called: late is the
// time since its execute_at, none when an instance's clock runs behind.
func (m *Metrics) FiringLate(late time.Duration) { m.lateness.Observe(max(late, 0).Seconds()) }

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Gatherer is the registry, for tests.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Outcomes gathers only the handled, rejected and failed counters: what
// serve's /status window samples, without the collectors that read SQS.
func (m *Metrics) Outcomes() prometheus.Gatherer { return m.outcomes }

// delivery is what one delivery came to, gathered across its attempts.
type delivery struct {
	mu       sync.Mutex
	attempts int
	poisoned bool
	reasons  map[messages.Type]string
	decoded  messages.Type
}

type deliveryKey struct{}

// Deliveries is a router middleware that must run outside the retry
// middleware: it sees each delivery once, and counts its outcome and
// latency. Attempts, inside every retry, tells it what each attempt did.
func (m *Metrics) Deliveries(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		d := &delivery{}
		msg.SetContext(context.WithValue(msg.Context(), deliveryKey{}, d))
		start := time.Now()
		out, err := h(msg)
		d.mu.Lock()
		defer d.mu.Unlock()
		// Counted as it ends, under the type the handler decoded (a
		// producer may send the envelope without the type attribute).
		domain, typ := labels(msg, d.decoded)
		m.received.WithLabelValues(domain, typ).Inc()
		m.latency.WithLabelValues(domain, typ).Observe(time.Since(start).Seconds())
		if d.attempts > 1 {
			m.retried.WithLabelValues(domain, typ).Add(float64(d.attempts - 1))
		}
		switch {
		case d.poisoned && err == nil: // in the DLQ, acked
			m.poisoned.WithLabelValues(domain, typ).Inc()
		case err != nil: // nacked: retries ran out, or the DLQ refused it
			m.failed.WithLabelValues(domain, typ).Inc()
		default:
			m.handled.WithLabelValues(domain, typ).Inc()
			for t, reason := range d.reasons {
				m.rejected.WithLabelValues(domain, string(t), reason).Inc()
			}
		}
		return out, err
	}
}

// Attempts is the innermost handler middleware: it counts an attempt and
// notes whether it failed for good (permanent says which errors are).
func Attempts(permanent func(error) bool) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) (out []*message.Message, err error) {
			if d, ok := msg.Context().Value(deliveryKey{}).(*delivery); ok {
				// Deferred: an attempt that panics counts too (Recoverer,
				// outside, turns it into an error that is retried).
				defer func() {
					d.mu.Lock()
					d.attempts++
					d.poisoned = err != nil && permanent(err)
					d.mu.Unlock()
				}()
			}
			return h(msg)
		}
	}
}

// Decoded notes, in a handler, the type of the command it decoded.
func Decoded(ctx context.Context, t messages.Type) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		d.mu.Lock()
		d.decoded = t
		d.mu.Unlock()
	}
}

// Rejected notes, in a handler, that the command was refused with reason;
// it is counted with the delivery's outcome once the handler succeeded.
func Rejected(ctx context.Context, t messages.Type, reason string) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		d.mu.Lock()
		if d.reasons == nil {
			d.reasons = map[messages.Type]string{}
		}
		d.reasons[t] = reason
		d.mu.Unlock()
	}
}

// Domain is the domain of the delivery handled in ctx, from its handler's
// name: a command queue's handler is <domain>-commands, a fan-in's
// fan-in-<table>.
func Domain(ctx context.Context) string {
	return strings.TrimSuffix(message.HandlerNameFromCtx(ctx), "-commands")
}

// labels are a delivery's domain (from its handler's name) and type (as
// decoded, else its type attribute); a type outside the catalogue is
// "unknown", so a producer cannot grow the label set.
func labels(msg *message.Message, decoded messages.Type) (domain, typ string) {
	domain = Domain(msg.Context())
	t := decoded
	if t == "" {
		t = messages.Type(msg.Metadata.Get(messages.TypeAttribute))
	}
	if !messages.IsCommand(t) && !messages.IsEvent(t) {
		return domain, "unknown"
	}
	return domain, string(t)
}
