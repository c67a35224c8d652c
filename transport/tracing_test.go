package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"transit/internal/emulator"
	"transit/messages"
	"transit/tracing"
	"transit/transport"
)

func traceparentOf(sc trace.SpanContext) string {
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier[tracing.TraceparentAttribute]
}

// spanOf finds the span of kind for the message with ID id.
func spanOf(t *testing.T, spans tracetest.SpanStubs, kind trace.SpanKind, id string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		for _, a := range s.Attributes {
			if s.SpanKind == kind && a == semconv.MessagingMessageID(id) {
				return s
			}
		}
	}
	require.Failf(t, "no span", "no %s span for message %s among %d", kind, id, len(spans))
	return tracetest.SpanStub{}
}

// Traced, the DLQ path still fits SQS's ten attributes (moto does not
// enforce the limit, so the count is asserted). A poison command that
// carries its trace context keeps it, as the context of its DLQ publish,
// ahead of the producer's other attributes; one that carries none and
// fills the limit with its own reaches the DLQ without: its publish span
// says the context was left out.
func TestRegister_traced_dead_letters_fit_the_attribute_limit(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	client, stack, queueURL, dlqURL, stop := deadLetterRouter(t, tp)

	_, producer := tp.Tracer("producer").Start(context.Background(), "publish")
	producer.End()
	send := func(attrs map[string]string) {
		in := map[string]types.MessageAttributeValue{}
		for k, v := range attrs {
			in[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("not json"), MessageAttributes: in})
		require.NoError(t, err)
	}
	traced, untraced := uuid.NewString(), uuid.NewString()
	send(map[string]string{
		messages.TypeAttribute: string(messages.SandboxAllocate), messages.IDAttribute: traced, messages.CorrelationAttribute: "corr",
		tracing.TraceparentAttribute: traceparentOf(producer.SpanContext()), "a1": "1", "a2": "2", "a3": "3", "a4": "4", "a5": "5",
	})
	send(map[string]string{
		messages.TypeAttribute: string(messages.SandboxAllocate), messages.IDAttribute: untraced, messages.CorrelationAttribute: "corr",
		"a1": "1", "a2": "2", "a3": "3", "a4": "4", "a5": "5", "a6": "6",
	})

	var dead []transport.DeadLetter
	require.Eventually(t, func() bool {
		var err error
		dead, err = transport.ListDeadLetters(context.Background(), client, dlqURL, 10)
		return err == nil && len(dead) == 2
	}, 15*time.Second, 100*time.Millisecond, "both poison commands reach the DLQ")
	stop()
	letters := map[string]transport.DeadLetter{}
	for _, d := range dead {
		assert.Len(t, d.Attributes, 10, "SQS takes ten")
		letters[d.Attributes[messages.IDAttribute]] = d
	}
	spans := exp.GetSpans()

	d := letters[traced]
	process := spanOf(t, spans, trace.SpanKindConsumer, traced)
	publish := spanOf(t, spans, trace.SpanKindProducer, traced)
	assert.Equal(t, producer.SpanContext().SpanID(), process.Parent.SpanID(), "the delivery continues the producer's trace")
	assert.Equal(t, codes.Error, process.Status.Code, "a dead-lettered delivery failed")
	assert.Equal(t, process.SpanContext.SpanID(), publish.Parent.SpanID(), "the DLQ publish is the delivery's")
	assert.Contains(t, publish.Attributes, semconv.MessagingDestinationName(stack.DeadLetterQueue(messages.Sandbox)))
	assert.Equal(t, traceparentOf(publish.SpanContext), d.Attributes[tracing.TraceparentAttribute], "the dead letter carries its DLQ publish")
	assert.Equal(t, producer.SpanContext().TraceID(), publish.SpanContext.TraceID())
	assert.Contains(t, d.Reason, "attributes not kept, SQS takes 10: a2, a3, a4, a5")

	d = letters[untraced]
	publish = spanOf(t, spans, trace.SpanKindProducer, untraced)
	assert.NotContains(t, d.Attributes, tracing.TraceparentAttribute, "no attribute left for it")
	assert.Equal(t, untraced, d.Attributes[messages.IDAttribute])
	require.NotEmpty(t, publish.Events)
	assert.Equal(t, "trace context not carried: the message has no attribute left", publish.Events[0].Name)
}

// A traced message with as many attributes as leave room for traceparent
// reaches its queue with it (and without tracestate, which does not fit):
// ten attributes, the most SQS takes.
func TestPublisher_traced_message_at_the_limit_reaches_its_queue(t *testing.T) {
	endpoint := motoEndpoint(t)
	client := sqsClient(endpoint, nil)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	stack := transport.Stack{Prefix: emulator.TestPrefix + uuid.NewString()[:8]}
	queueURL := createQueue(t, client, stack.CommandQueue(messages.Sandbox))
	queues, err := wmsqs.NewPublisher(wmsqs.PublisherConfig{AWSConfig: awsConfig(endpoint), DoNotCreateQueueIfNotExists: true}, watermill.NopLogger{})
	require.NoError(t, err)

	state, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	ctx, parent := tp.Tracer("caller").Start(trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})), "handle")
	defer parent.End()
	id := uuid.NewString()
	msg := transport.NewMessage(id, []byte(`{}`), messages.SandboxAllocate, "corr", true)
	msg.SetContext(ctx)
	for _, k := range []string{"b1", "b2", "b3", "b4", "b5", "b6"} {
		msg.Metadata.Set(k, k)
	}
	require.NoError(t, transport.NewPublisher(stack, nil, queues).Traced(tp).Publish(transport.ByType, msg))

	got, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 2,
	})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	attrs := got.Messages[0].MessageAttributes
	assert.Len(t, attrs, 10, "SQS takes ten")
	publish := spanOf(t, exp.GetSpans(), trace.SpanKindProducer, id)
	assert.Equal(t, "sandbox.allocate publish", publish.Name)
	assert.Equal(t, parent.SpanContext().SpanID(), publish.Parent.SpanID())
	assert.Equal(t, traceparentOf(publish.SpanContext), aws.ToString(attrs[tracing.TraceparentAttribute].StringValue))
	assert.NotContains(t, attrs, tracing.TracestateAttribute)
	assert.Contains(t, attrs, wmsqs.UUIDAttribute)
}
