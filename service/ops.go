package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"transit/config"
	"transit/messages"
	"transit/metrics"
	"transit/store"
	"transit/streams"
	"transit/timers"
)

// reachableFor is how long a reachability check is reused: probes from
// several sources (an orchestrator, a load balancer, an operator) cost
// the stack's Describe calls once per interval, not once per probe.
const reachableFor = 5 * time.Second

// probe answers /readyz: the router runs, the timer shards are balanced,
// and every table, queue and topic of the served domains answers.
type probe struct {
	// serving ends when Serve is asked to stop: a draining instance is
	// not ready.
	serving   context.Context
	svc       *Service
	served    map[messages.Domain]bool
	router    *message.Router
	scheduler *timers.Scheduler // nil when timers are not served

	mu      sync.Mutex
	checked time.Time
	last    error
}

func (p *probe) ready(ctx context.Context) error {
	if p.serving.Err() != nil {
		return errors.New("draining")
	}
	if !p.router.IsRunning() || p.router.IsClosed() {
		return errors.New("router not running")
	}
	if p.scheduler != nil && !p.scheduler.Balanced() {
		return errors.New("timer shards not balanced within a lease")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) >= reachableFor {
		// Not the probe's own context: a prober that gave up must not
		// leave "context canceled" cached as the answer.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		p.last, p.checked = p.reachable(ctx), time.Now()
	}
	return p.last
}

// reachable describes every table, queue and topic of the served domains
// at once.
func (p *probe) reachable(ctx context.Context) error {
	s := p.svc
	var checks []func() error
	for _, t := range store.TableNames(s.Config.Prefix) {
		checks = append(checks, func() error {
			_, err := s.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t)})
			return err
		})
	}
	resolver, err := s.topicResolver(ctx)
	if err != nil {
		return err
	}
	for _, d := range messages.Domains() {
		if !p.served[d] {
			continue
		}
		for _, q := range []string{s.Stack.CommandQueue(d), s.Stack.DeadLetterQueue(d)} {
			checks = append(checks, func() error {
				_, err := s.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
				return err
			})
		}
		checks = append(checks, func() error {
			arn, err := resolver.ResolveTopic(ctx, s.Stack.EventTopic(d))
			if err != nil {
				return err
			}
			_, err = s.SNS.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(string(arn))})
			return err
		})
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, check := range checks {
		wg.Go(func() { errs[i] = check() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serveOps answers /healthz (the process is alive), /readyz and /metrics
// on TRANSIT_HTTP_ADDR until stop is called; nothing when it is off.
func (s *Service) serveOps(p *probe, counts *metrics.Metrics) (stop func(), err error) {
	if s.Config.HTTPAddr == "" || s.Config.HTTPAddr == config.HTTPOff {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", s.Config.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("TRANSIT_HTTP_ADDR (--http-addr): %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", counts.Handler())
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error("ops server stopped", "addr", s.Config.HTTPAddr, "error", err)
		}
	}()
	s.Logger.Info("serving /healthz, /readyz and /metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	}, nil
}

// queueDepths is a collector of every served domain's command queue and
// DLQ depth, read from SQS's approximate counts when scraped, at most
// every reachableFor: nothing is asked of SQS while nobody scrapes.
type queueDepths struct {
	svc    *Service
	served map[messages.Domain]bool
	desc   *prometheus.Desc

	mu      sync.Mutex
	sampled time.Time
	last    []prometheus.Metric
	// urls caches each queue's URL: it follows from the name, so one
	// GetQueueUrl per queue for the process's life, not per sample.
	urls map[string]*string
}

func newQueueDepths(s *Service, served map[messages.Domain]bool) *queueDepths {
	return &queueDepths{svc: s, served: served, urls: map[string]*string{}, desc: prometheus.NewDesc("transit_queue_messages",
		"Messages in a domain's command queue or DLQ, from SQS's approximate counts: visible, or in flight (received, not yet deleted).",
		[]string{"domain", "queue", "state"}, nil)}
}

func (q *queueDepths) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueDepths) Collect(ch chan<- prometheus.Metric) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.sampled) >= reachableFor {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		q.last, q.sampled = q.sample(ctx), time.Now()
		cancel()
	}
	for _, m := range q.last {
		ch <- m
	}
}

// sample reads every queue's counts; a queue SQS does not answer for is
// left out of the sample (readiness reports why).
func (q *queueDepths) sample(ctx context.Context) []prometheus.Metric {
	s := q.svc
	var out []prometheus.Metric
	for _, d := range messages.Domains() {
		if !q.served[d] {
			continue
		}
		for kind, name := range map[string]string{"commands": s.Stack.CommandQueue(d), "dlq": s.Stack.DeadLetterQueue(d)} {
			url, ok := q.urls[name]
			if !ok {
				got, err := s.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
				if err != nil {
					continue
				}
				url = got.QueueUrl
				q.urls[name] = url
			}
			attrs, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url,
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				continue
			}
			for state, attr := range map[string]sqstypes.QueueAttributeName{
				"visible":   sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				"in_flight": sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			} {
				n, _ := strconv.ParseFloat(attrs.Attributes[string(attr)], 64)
				out = append(out, prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, n, string(d), kind, state))
			}
		}
	}
	return out
}

// ownership gauges: the timer shards and stream shard leases this
// instance holds, read when scraped.
func ownership(scheduler *timers.Scheduler, fanin *streams.Subscriber) []prometheus.Collector {
	cs := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "transit_stream_leases_owned",
		Help: "Stream shard leases this instance reads (the fan-in)."}, func() float64 { return float64(fanin.Held()) })}
	if scheduler != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "transit_timer_shards_owned",
			Help: "Timer shards this instance serves."}, func() float64 { return float64(len(scheduler.Owned())) }))
	}
	return cs
}
