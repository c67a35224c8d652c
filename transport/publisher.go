package transport

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/tracing"
)

// ByType is the publish topic that sends each message where its type
// belongs (see Stack.destination); handlers publish to it, so one command
// can emit events and send commands.
const ByType = "by-type"

// kindKey marks a message bound for a command queue: a command may share
// its name with the event that reports it (layer.published), so the type
// alone cannot say. Publisher removes it before sending.
const kindKey = "_transit_kind"

// NewMessage is the Watermill message of an envelope body: its ID, the
// type and correlation attributes every transit message carries and, for
// a command, the mark that sends it to its domain's queue when published
// with ByType.
func NewMessage(id string, body []byte, t messages.Type, correlationID string, command bool) *message.Message {
	msg := message.NewMessage(id, body)
	msg.Metadata.Set(messages.TypeAttribute, string(t))
	msg.Metadata.Set(messages.CorrelationAttribute, correlationID)
	if command {
		msg.Metadata.Set(kindKey, "command")
	}
	return msg
}

// NewCommand is the message of a new command, as a producer sends it: the
// command starts its own correlation, or joins its cause's (at most one).
func NewCommand(id string, t messages.Type, payload any, at time.Time, cause ...messages.Cause) (*message.Message, error) {
	body, err := messages.NewCommand(id, t, payload, at, cause...)
	if err != nil {
		return nil, err
	}
	return NewMessage(id, body, t, messages.CorrelationOf(id, cause...), true), nil
}

// Publisher sends to the stack's SNS topics and SQS queues. Publish takes
// ByType or the name of one of the stack's queues or topics (the DLQ path
// names its queue).
type Publisher struct {
	stack  Stack
	topics message.Publisher
	queues message.Publisher
	// isTopic holds every name Publish accepts besides ByType.
	isTopic map[string]bool
	// tracer, when set, spans every message published (Traced).
	tracer trace.Tracer
}

// MaxMetadata is how many metadata entries a message may carry to SQS or
// SNS: the ten attributes SQS takes on a message, less the Watermill UUID
// attribute the publishers add.
const MaxMetadata = maxAttributes - 1

// NewPublisher sends to topics through topics and to queues through queues.
func NewPublisher(stack Stack, topics, queues message.Publisher) *Publisher {
	isTopic := map[string]bool{}
	for _, t := range stack.Topics() {
		isTopic[t] = true
	}
	for _, q := range stack.Queues() {
		isTopic[q] = false
	}
	return &Publisher{stack: stack, topics: topics, queues: queues, isTopic: isTopic}
}

// Traced makes Publish send each message in a producer span of tp's,
// child of the span in the message's context, with the span's context in
// its traceparent attribute. Nothing changes when tp records nothing.
func (p *Publisher) Traced(tp trace.TracerProvider) *Publisher {
	if tracing.Enabled(tp) {
		p.tracer = tp.Tracer(tracing.ScopeName)
	}
	return p
}

// Publish is safe for concurrent use if the underlying publishers are.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		dest, isTopic, err := p.resolve(topic, msg)
		if err != nil {
			return err
		}
		pub, system := p.queues, tracing.SQS
		if isTopic {
			pub, system = p.topics, tracing.SNS
		}
		if err := p.send(pub, system, dest, msg); err != nil {
			return fmt.Errorf("publish %s to %s: %w", msg.Metadata.Get(messages.TypeAttribute), dest, err)
		}
	}
	return nil
}

func (p *Publisher) send(pub message.Publisher, system attribute.KeyValue, dest string, msg *message.Message) (err error) {
	if p.tracer != nil {
		span := tracing.StartPublish(msg.Context(), p.tracer, system, dest, msg, MaxMetadata)
		defer func() { tracing.End(span, err) }()
	}
	return pub.Publish(dest, msg)
}

func (p *Publisher) resolve(topic string, msg *message.Message) (dest string, isTopic bool, err error) {
	if topic != ByType {
		isTopic, ok := p.isTopic[topic]
		if !ok {
			return "", false, fmt.Errorf("publish: %q is not a queue or topic of stack %q", topic, p.stack.Prefix)
		}
		return topic, isTopic, nil
	}
	t := messages.Type(msg.Metadata.Get(messages.TypeAttribute))
	command := msg.Metadata.Get(kindKey) == "command"
	delete(msg.Metadata, kindKey)
	dest, isTopic, ok := p.stack.destination(t, command)
	if !ok {
		return "", false, fmt.Errorf("publish: no destination for type %q", t)
	}
	return dest, isTopic, nil
}

// Close does nothing: the router closes a handler's publisher when the
// handler stops, and this one is shared by every handler and the DLQ path.
func (p *Publisher) Close() error {
	return nil
}

// SendBatch sends messages to one queue, ten to a SendMessageBatch,
// marshalled as the SQS publisher marshals them, so Subscriber reads them
// alike. Producers of many commands at once (the timer scheduler) use it
// instead of Publish's one request per message. With a tracer provider
// (at most one is read) that records, each message is sent in a producer
// span, child of ctx's span (a root one for the scheduler's firings), as
// Publish does.
func SendBatch(ctx context.Context, client *sqs.Client, queueURL string, msgs []*message.Message, tp ...trace.TracerProvider) error {
	var tracer trace.Tracer
	if len(tp) > 0 && tracing.Enabled(tp[0]) {
		tracer = tp[0].Tracer(tracing.ScopeName)
	}
	queue := queueURL[strings.LastIndex(queueURL, "/")+1:]
	var marshaler wmsqs.DefaultMarshalerUnmarshaler
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(len(msgs), start+10)]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		// Each entry's outcome, for its span: the entries of a request may
		// fail one by one.
		spans := map[string]trace.Span{}
		for i, msg := range chunk {
			id := strconv.Itoa(i)
			delete(msg.Metadata, kindKey)
			if tracer != nil {
				spans[id] = tracing.StartPublish(ctx, tracer, tracing.SQS, queue, msg, MaxMetadata)
			}
			m, err := marshaler.Marshal(msg)
			if err != nil {
				endAll(spans, err, nil)
				return fmt.Errorf("marshal %s: %w", msg.UUID, err)
			}
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			endAll(spans, err, nil)
			return fmt.Errorf("send batch to %s: %w", queueURL, err)
		}
		endAll(spans, nil, out.Failed)
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("send batch to %s: %d of %d failed, first: %s %s", queueURL, len(out.Failed), len(chunk), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return nil
}

// endAll ends the spans of one batch request's entries, by entry ID, with
// the request's error or, when it was sent, each entry's.
func endAll(spans map[string]trace.Span, err error, failed []types.BatchResultErrorEntry) {
	for _, f := range failed {
		if span, ok := spans[aws.ToString(f.Id)]; ok {
			tracing.End(span, fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
			delete(spans, aws.ToString(f.Id))
		}
	}
	for _, span := range spans {
		tracing.End(span, err)
	}
}
