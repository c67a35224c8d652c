// Package router wires transit's domains into a Watermill router: each
// domain's handler on its command queue, the stream fan-in rules, retry
// for transient failures, the DLQ for poison commands, and the drain on
// shutdown. How messages move on SQS and SNS is package transport's.
package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/metrics"
	"transit/store"
	"transit/tracing"
	"transit/transport"
)

// Handler is one domain's command handler.
type Handler interface {
	// Handle applies cmd and returns the messages it produces. A business
	// rejection is an event, not an error; an error is retried unless
	// Permanent says it cannot succeed.
	Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error)
}

// Config tunes the router.
type Config struct {
	Stack transport.Stack
	// CommandTimeout bounds one attempt at one command.
	CommandTimeout time.Duration
	// Retry is the in-process retry of transient failures; when it runs
	// out the message is nacked and SQS redelivers it, up to the queue's
	// MaxReceiveCount, then moves it to the DLQ.
	Retry middleware.Retry
	// CloseTimeout bounds the router's Close: its wait for the handlers
	// to return once the subscribers are closed. The drain before it is
	// Shutdown's.
	CloseTimeout time.Duration
	// Log gets the lines about messages: a warning for every message
	// sent to a DLQ (an operator sees poison without reading the DLQ),
	// retries and failed deliveries. Default slog.Default().
	Log *slog.Logger
	// Metrics, when set, counts what every delivery came to.
	Metrics *metrics.Metrics
	// Tracing, when it records, runs every delivery in a span
	// (tracing.Consume).
	Tracing trace.TracerProvider
}

func (c Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// New returns a router whose middleware retries transient failures and
// recovers panics; Register adds each domain's handler and its DLQ.
func New(cfg Config, logger watermill.LoggerAdapter) (*message.Router, error) {
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.CloseTimeout}, quietRouterLog{logger})
	if err != nil {
		return nil, err
	}
	retry := cfg.Retry
	retry.Logger = logger
	retry.ShouldRetry = func(p middleware.RetryParams) bool { return !Permanent(p.Err) }
	if tracing.Enabled(cfg.Tracing) {
		// Outermost: one span per delivery, over every attempt and the
		// DLQ path; its log lines and its AWS calls run in it.
		r.AddMiddleware(tracing.Consume(cfg.Tracing))
	}
	r.AddMiddleware(logged(cfg.log()))
	if cfg.Metrics != nil {
		// Outside the retries: one count per delivery.
		r.AddMiddleware(cfg.Metrics.Deliveries)
	}
	r.AddMiddleware(
		// Transient failures (throttling, timeouts, 5xx) get a few quick
		// attempts before the message goes back to SQS.
		retrying(retry),
		// A panic becomes an error with its stack, retried like any other.
		middleware.Recoverer,
	)
	return r, nil
}

// Register adds the consumer handler of domain d, reading its command
// queue through sub.
func Register(r *message.Router, cfg Config, d messages.Domain, sub message.Subscriber, pub message.Publisher, h Handler) error {
	// The handler name is an identifier: it is recorded on dead letters.
	handler := r.AddHandler(string(d)+"-commands", cfg.Stack.CommandQueue(d), sub, transport.ByType,
		loggedPublisher{pub, cfg.log()}, handle(d, h, cfg.CommandTimeout))
	// Innermost: a permanent failure goes to the DLQ at once with its
	// reason and the message is acked, so the queue keeps flowing.
	poison, err := middleware.PoisonQueueWithFilter(transport.DeadLetters(pub), cfg.Stack.DeadLetterQueue(d), Permanent)
	if err != nil {
		return fmt.Errorf("register %s: %w", d, err)
	}
	handler.AddMiddleware(poison, warnPoison(cfg.log()))
	if cfg.Metrics != nil {
		handler.AddMiddleware(metrics.Attempts(Permanent))
	}
	return nil
}

// Drainer is a subscriber that can stop receiving while the messages it
// handed out are handled: transport.Subscriber and streams.Subscriber are.
type Drainer interface {
	// Drain stops receiving and returns once every message handed out has
	// been acked or nacked and settled, or when ctx ends. The subscriber's
	// channels stay open until it is closed.
	Drain(ctx context.Context) error
}

// Shutdown stops r as SIGTERM should: the drainers stop receiving and
// what they handed out is handled, acked and settled (deleted from SQS,
// checkpointed in the stream's lease), for up to
// drainTimeout, while r still runs (handlers keep their contexts and
// their publisher); then r is closed, which closes the subscribers, ends
// the contexts of anything still unfinished and waits up to r's
// CloseTimeout for the handlers to return. The subscribers keep
// Watermill's contract (Close does not wait for messages in flight); the
// drain is here. See DECISIONS.md.
func Shutdown(r *message.Router, drainTimeout time.Duration, drainers ...Drainer) error {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	errs := make([]error, len(drainers)+1)
	var wg sync.WaitGroup
	for i, d := range drainers {
		wg.Go(func() { errs[i] = d.Drain(ctx) })
	}
	wg.Wait()
	errs[len(drainers)] = r.Close()
	return errors.Join(errs...)
}

// warnPoison logs, at WARN, why a message is about to be dead-lettered.
func warnPoison(log *slog.Logger) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil && Permanent(err) {
				deliveryLogger(msg.Context(), log).Warn("poison message sent to the DLQ", "reason", err.Error())
			}
			return out, err
		}
	}
}

// handle decodes a command, runs the domain handler and encodes what it produced.
func handle(d messages.Domain, h Handler, timeout time.Duration) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		cmd, err := messages.Decode(msg.Payload, messages.Meta{
			ID:            msg.UUID,
			Type:          msg.Metadata.Get(messages.TypeAttribute),
			CorrelationID: msg.Metadata.Get(messages.CorrelationAttribute),
		})
		if err != nil {
			return nil, err
		}
		metrics.Decoded(msg.Context(), cmd.Type)
		noteDecoded(msg.Context(), cmd)
		if got, _ := messages.DomainOf(cmd.Type); got != d {
			return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s is not a %s command", cmd.Type, d)}
		}
		ctx, cancel := context.WithTimeout(msg.Context(), timeout)
		defer cancel()
		outs, err := h.Handle(ctx, cmd)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cmd.Type, cmd.ID, err)
		}
		produced := make([]*message.Message, 0, len(outs))
		for _, out := range outs {
			if r, ok := out.Payload.(messages.Rejection); ok {
				metrics.Rejected(msg.Context(), out.Type, r.RejectionReason())
			}
			id, body, err := messages.Encode(cmd, out)
			if err != nil {
				return nil, err
			}
			m := transport.NewMessage(id, body, out.Type, cmd.CorrelationID, out.Command)
			if r, ok := out.Payload.(messages.Routed); ok {
				for k, v := range r.RoutingAttributes() {
					// SQS and SNS refuse an empty attribute value.
					if v != "" {
						m.Metadata.Set(k, v)
					}
				}
			}
			produced = append(produced, m)
		}
		return produced, nil
	}
}

// Permanent reports whether a handler error can never succeed: the
// message is malformed or invalid, or DynamoDB refused the request itself.
func Permanent(err error) bool {
	return messages.IsInvalid(err) || store.IsPermanent(err)
}
