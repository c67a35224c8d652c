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

	"transit/config"
	"transit/messages"
	"transit/metrics"
	"transit/store"
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
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := p.ready(ctx); err != nil {
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
		_ = srv.Shutdown(ctx)
	}, nil
}
