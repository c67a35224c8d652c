package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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

// serveOps answers /healthz (the process is alive), /readyz, /metrics,
// /status (the last minute's counts, for `transit status`) and, when
// console is set, the operator console on TRANSIT_HTTP_ADDR until stop is
// called; nothing when it is off.
func (s *Service) serveOps(p *probe, counts *metrics.Metrics, state metrics.State, console func(func() ServeStatus) http.Handler) (stop func(), err error) {
	if !s.Config.OpsServed() {
		return func() {}, nil
	}
	counts.Watch(state)
	ln, err := net.Listen("tcp", s.Config.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("TRANSIT_HTTP_ADDR (--http-addr): %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", counts.Handler())
	window := newCountWindow(counts.Outcomes())
	mux.Handle("GET /status", window)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if console != nil {
		mux.Handle("/", console(func() ServeStatus { return window.status(time.Now()) }))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	sampling, stopSampling := context.WithCancel(context.Background())
	go window.run(sampling)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error("ops server stopped", "addr", s.Config.HTTPAddr, "error", err)
		}
	}()
	s.Logger.Info("serving /healthz, /readyz, /metrics and /status", "addr", ln.Addr().String(), "console", console != nil)
	return func() {
		stopSampling()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	}, nil
}

// queueDepths reads every served domain's command queue and DLQ depth
// from SQS's approximate counts when scraped, at most every reachableFor:
// nothing is asked of SQS while nobody scrapes.
type queueDepths struct {
	svc    *Service
	served map[messages.Domain]bool

	mu      sync.Mutex
	sampled time.Time
	last    []metrics.QueueDepth
}

func newQueueDepths(s *Service, served map[messages.Domain]bool) *queueDepths {
	return &queueDepths{svc: s, served: served}
}

// depths is the last sample, taken again once it is reachableFor old.
func (q *queueDepths) depths() []metrics.QueueDepth {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.sampled) >= reachableFor {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		q.last, q.sampled = q.sample(ctx), time.Now()
		cancel()
	}
	return q.last
}

// sample reads every queue's counts; a queue SQS does not answer for is
// left out of the sample (readiness reports why).
func (q *queueDepths) sample(ctx context.Context) []metrics.QueueDepth {
	s := q.svc
	var out []metrics.QueueDepth
	for _, d := range messages.Domains() {
		if !q.served[d] {
			continue
		}
		for kind, name := range map[string]string{"commands": s.Stack.CommandQueue(d), "dlq": s.Stack.DeadLetterQueue(d)} {
			url, err := s.QueueURL(ctx, name)
			if err != nil {
				continue
			}
			visible, inFlight, err := s.queueCounts(ctx, url)
			if err != nil {
				continue
			}
			out = append(out, metrics.QueueDepth{Domain: d, Queue: kind, State: "visible", Messages: float64(visible)},
				metrics.QueueDepth{Domain: d, Queue: kind, State: "in_flight", Messages: float64(inFlight)})
		}
	}
	return out
}

// state is what this instance's gauges read when scraped: the stream
// shards it reads with their lag, the timer shards it serves and the
// served domains' queue depths.
func (s *Service) state(served map[messages.Domain]bool, scheduler *timers.Scheduler, fanin *streams.Subscriber) metrics.State {
	st := metrics.State{StreamShards: fanin.Lags, Queues: newQueueDepths(s, served).depths}
	if scheduler != nil {
		st.TimerShards = func() int { return len(scheduler.Owned()) }
	}
	return st
}
