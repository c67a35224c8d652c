package tracing

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/streams"
)

// The messaging systems a span names (messaging.system).
var (
	SQS = semconv.MessagingSystemAWSSQS
	SNS = semconv.MessagingSystemAWSSNS
	// DynamoDBStreams is not a system the conventions list: the stream
	// records the fan-in turns into commands.
	DynamoDBStreams = semconv.MessagingSystemKey.String("aws.dynamodb_streams")
)

// Transit's own span attributes.
const (
	CorrelationKey = attribute.Key("transit.correlation_id")
	DomainKey      = attribute.Key("transit.domain")
	TypeKey        = attribute.Key("transit.type")
)

// The trace context attributes Propagator writes.
const (
	TraceparentAttribute = "traceparent"
	TracestateAttribute  = "tracestate"
)

// Consume is the router middleware that runs each delivery in a consumer
// span named "<type> process", child of the span whose context the
// message carries (its publish), so that what the handler does (its AWS
// calls) nests under it and what it produces is published as its child.
// The span fails when the delivery does: an error, or a message sent to
// the DLQ. Placed outside the retries, it spans every attempt. Its
// attributes are built only for a span the sampler keeps (the samplers
// the SDK ships decide without them).
func Consume(tp trace.TracerProvider) message.HandlerMiddleware {
	tracer := tp.Tracer(ScopeName)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			parent := Propagator().Extract(msg.Context(), propagation.MapCarrier(msg.Metadata))
			ctx, span := tracer.Start(parent, spanName(msg, "process"), trace.WithSpanKind(trace.SpanKindConsumer))
			defer span.End()
			if span.IsRecording() {
				span.SetAttributes(append(messageAttributes(msg, message.SubscribeTopicFromCtx(msg.Context())),
					SQS, semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"))...)
			}
			msg.SetContext(ctx)
			out, err := h(msg)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			} else if reason := msg.Metadata.Get(middleware.ReasonForPoisonedKey); reason != "" {
				span.SetStatus(codes.Error, "sent to the DLQ: "+reason)
			}
			for _, m := range out {
				m.SetContext(trace.ContextWithSpan(m.Context(), span))
			}
			return out, err
		}
	}
}

// StartPublish starts the producer span, "<type> publish", of msg sent to
// dest of system, child of ctx's span, and carries its context in msg's
// metadata, which may hold at most limit entries (see Inject). End ends
// it.
func StartPublish(ctx context.Context, tracer trace.Tracer, system attribute.KeyValue, dest string, msg *message.Message, limit int) trace.Span {
	ctx, span := tracer.Start(ctx, spanName(msg, "publish"), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(append(messageAttributes(msg, dest),
			system, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("publish"))...)
	}
	Inject(ctx, msg.Metadata, limit)
	return span
}

// Inject carries ctx's trace context in md, replacing one md carried from
// an earlier hop, within limit entries in all: traceparent when one more
// fits, tracestate (when not empty) when two do. What does not fit is
// left out, noted on the span, and the message goes without: a producer
// may fill SQS's ten attributes, and the message matters more than its
// trace.
func Inject(ctx context.Context, md message.Metadata, limit int) {
	delete(md, TraceparentAttribute)
	delete(md, TracestateAttribute)
	carried := propagation.MapCarrier{}
	Propagator().Inject(ctx, carried)
	room := limit - len(md)
	for _, k := range []string{TraceparentAttribute, TracestateAttribute} {
		v, ok := carried[k]
		switch {
		case !ok:
		case room > 0:
			md[k] = v
			room--
		default:
			trace.SpanFromContext(ctx).AddEvent("trace context not carried: the message has no attribute left",
				trace.WithAttributes(attribute.String("transit.attribute", k)))
		}
	}
}

// End ends a span with err's outcome.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func spanName(msg *message.Message, operation string) string {
	return knownType(msg) + " " + operation
}

// knownType is msg's type attribute if transit knows it (a catalogue type
// or a stream record's), else "unknown": a producer's attribute must not
// grow the span names and attribute values a backend indexes.
func knownType(msg *message.Message) string {
	t := msg.Metadata.Get(messages.TypeAttribute)
	switch {
	case messages.IsCommand(messages.Type(t)), messages.IsEvent(messages.Type(t)):
		return t
	case t == streams.TypeInsert, t == streams.TypeModify, t == streams.TypeRemove:
		return t
	}
	return "unknown"
}

// messageAttributes are the span attributes of msg at dest (a queue, a
// topic or a table): where it goes, its ID, and what transit knows of it.
func messageAttributes(msg *message.Message, dest string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.MessagingDestinationName(dest), semconv.MessagingMessageID(msg.UUID)}
	t := knownType(msg)
	attrs = append(attrs, TypeKey.String(t))
	if d, ok := messages.DomainOf(messages.Type(t)); ok {
		attrs = append(attrs, DomainKey.String(string(d)))
	}
	if c := msg.Metadata.Get(messages.CorrelationAttribute); c != "" {
		attrs = append(attrs, CorrelationKey.String(c))
	}
	return attrs
}
