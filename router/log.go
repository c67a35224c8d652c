package router

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/metrics"
)

// Every line the router writes about a message names it: domain, message
// ID, type, correlation ID and, once the body is decoded, causation ID, so
// one filter on the log follows one command. No line carries a payload.

type deliveryLogKey struct{}

// deliveryLog builds a delivery's logger when a line is written, not per
// message: most deliveries write none.
type deliveryLog struct {
	base *slog.Logger
	msg  *message.Message

	mu sync.Mutex
	// decoded is the command once its body is read; until then the
	// attributes say what the message is.
	decoded *messages.Command
}

func (d *deliveryLog) logger() *slog.Logger {
	d.mu.Lock()
	cmd := d.decoded
	d.mu.Unlock()
	id, typ, correlation, causation := d.msg.UUID, d.msg.Metadata.Get(messages.TypeAttribute), d.msg.Metadata.Get(messages.CorrelationAttribute), ""
	if cmd != nil {
		// The command's ID keys its outcome and its trace; the transport's
		// can differ (a bare payload's SQS message ID).
		id, typ, correlation, causation = cmd.ID, string(cmd.Type), cmd.CorrelationID, cmd.CausationID
	}
	l := d.base.With("domain", metrics.Domain(d.msg.Context()), "message_id", id,
		"type", typ, "correlation_id", correlation, "causation_id", causation)
	if sc := trace.SpanContextFromContext(d.msg.Context()); sc.IsValid() {
		l = l.With("trace_id", sc.TraceID().String())
	}
	return l
}

// deliveryLogger is the logger for lines about the message handled in ctx,
// or fallback outside a delivery.
func deliveryLogger(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if d, ok := ctx.Value(deliveryLogKey{}).(*deliveryLog); ok {
		return d.logger()
	}
	return fallback
}

// noteDecoded makes the decoded command say what the message is: a
// producer may leave the attributes out.
func noteDecoded(ctx context.Context, cmd messages.Command) {
	if d, ok := ctx.Value(deliveryLogKey{}).(*deliveryLog); ok {
		d.mu.Lock()
		d.decoded = &cmd
		d.mu.Unlock()
	}
}

// logged is the outermost middleware: it gives each delivery its logger
// and reports a delivery that failed, in place of Watermill's line
// (see quietRouterLog).
func logged(base *slog.Logger) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			d := &deliveryLog{base: base, msg: msg}
			msg.SetContext(context.WithValue(msg.Context(), deliveryLogKey{}, d))
			out, err := h(msg)
			if err != nil && !errors.Is(err, context.Canceled) {
				d.logger().Error("delivery failed; it will be delivered again", "error", err)
			}
			// A failure to publish them is a line about this delivery
			// (loggedPublisher).
			for _, m := range out {
				m.SetContext(context.WithValue(m.Context(), deliveryLogKey{}, d))
			}
			return out, err
		}
	}
}

// retrying is base's retry with the delivery's logger, so each "retrying"
// line names the message.
func retrying(base middleware.Retry) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			r := base
			r.Logger = lazyAdapter{ctx: msg.Context(), fallback: base.Logger}
			return r.Middleware(h)(msg)
		}
	}
}

// lazyAdapter is a Watermill logger over a delivery's logger, built only
// when a line is written.
type lazyAdapter struct {
	ctx      context.Context
	fallback watermill.LoggerAdapter
}

func (l lazyAdapter) adapter() watermill.LoggerAdapter {
	if d, ok := l.ctx.Value(deliveryLogKey{}).(*deliveryLog); ok {
		return watermill.NewSlogLogger(d.logger())
	}
	if l.fallback != nil {
		return l.fallback
	}
	return watermill.NopLogger{}
}

func (l lazyAdapter) Error(msg string, err error, fields watermill.LogFields) {
	l.adapter().Error(msg, err, fields)
}
func (l lazyAdapter) Info(msg string, fields watermill.LogFields)  { l.adapter().Info(msg, fields) }
func (l lazyAdapter) Debug(msg string, fields watermill.LogFields) { l.adapter().Debug(msg, fields) }
func (l lazyAdapter) Trace(msg string, fields watermill.LogFields) { l.adapter().Trace(msg, fields) }
func (l lazyAdapter) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return l.adapter().With(fields)
}

// loggedPublisher reports produced messages that could not be published,
// with the fields of the delivery that produced them.
type loggedPublisher struct {
	message.Publisher
	log *slog.Logger
}

func (p loggedPublisher) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err != nil && len(msgs) > 0 {
		deliveryLogger(msgs[0].Context(), p.log).Error("produced messages not published; the delivery will be repeated",
			"produced", len(msgs), "error", err)
	}
	return err
}

// quietRouterLog is the router's Watermill logger without its lines about
// a failed delivery: logged and loggedPublisher write them with the
// message's fields, and Watermill's publish failure line would print the
// produced messages whole, payloads included.
type quietRouterLog struct{ watermill.LoggerAdapter }

var loggedByRouter = map[string]bool{
	"Handler returned error":              true,
	"Cannot publish messages":             true,
	"Publishing produced messages failed": true,
}

func (l quietRouterLog) Error(msg string, err error, fields watermill.LogFields) {
	if !loggedByRouter[msg] {
		l.LoggerAdapter.Error(msg, err, fields)
	}
}

func (l quietRouterLog) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return quietRouterLog{l.LoggerAdapter.With(fields)}
}
