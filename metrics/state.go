package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"transit/messages"
	"transit/streams"
)

// State is what an instance holds and waits on, read by its gauges when
// /metrics is scraped: nothing is sampled while nobody scrapes.
type State struct {
	// StreamShards lists the stream shards the fan-in reads, each with
	// its lag (streams.Subscriber.Lags).
	StreamShards func() []streams.ShardLag
	// TimerShards counts the timer shards served; nil when timers are not.
	TimerShards func() int
	// Queues are the served domains' queue depths.
	Queues func() []QueueDepth
}

// QueueDepth is the approximate count of one queue's messages in one
// state.
type QueueDepth struct {
	Domain messages.Domain
	// Queue is "commands" or "dlq"; State is "visible" or "in_flight"
	// (received, not yet deleted).
	Queue, State string
	Messages     float64
}

// Watch registers the gauges of s. A shard's series go when the shard is
// no longer read here, so shards that come and go leave none behind.
func (m *Metrics) Watch(s State) {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "transit_stream_leases_owned",
			Help: "Stream shard leases this instance reads (the fan-in)."},
			func() float64 { return float64(len(s.StreamShards())) }),
		gauges{prometheus.NewDesc("transit_stream_lag_seconds",
			"Per stream shard read here: the age of the record being delivered (now minus its ApproximateCreationDateTime, which AWS rounds to the second), 0 once a read finds the shard caught up.",
			[]string{"table", "shard"}, nil), func(emit func(float64, ...string)) {
			for _, l := range s.StreamShards() {
				emit(l.Lag.Seconds(), l.Table, l.ShardID)
			}
		}},
		gauges{prometheus.NewDesc("transit_queue_messages",
			"Messages in a domain's command queue or DLQ, from SQS's approximate counts: visible, or in flight (received, not yet deleted).",
			[]string{"domain", "queue", "state"}, nil), func(emit func(float64, ...string)) {
			for _, q := range s.Queues() {
				emit(q.Messages, string(q.Domain), q.Queue, q.State)
			}
		}},
	}
	if s.TimerShards != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "transit_timer_shards_owned",
			Help: "Timer shards this instance serves."}, func() float64 { return float64(s.TimerShards()) }))
	}
	m.registry.MustRegister(cs...)
}

// gauges is a family of gauges read when scraped: read emits each
// series' value with its label values.
type gauges struct {
	desc *prometheus.Desc
	read func(emit func(value float64, labels ...string))
}

func (g gauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	g.read(func(v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, labels...)
	})
}
