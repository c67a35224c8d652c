package tracing

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	smithymiddleware "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"transit/messages"
)

// unsetenv removes key for the test, restoring it after.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "")
	os.Unsetenv(key)
}

// Without OTEL_TRACES_EXPORTER (which the SDK would read as otlp), with
// none, or with the SDK disabled, tracing is off: the no-op provider, no
// exporter, nothing to flush, and nothing instrumented (Enabled).
func TestFromEnv_off_by_default(t *testing.T) {
	for _, c := range []struct {
		name     string
		exporter string
		disabled string
	}{
		{name: "no_variable"},
		{name: "none", exporter: "none"},
		{name: "sdk_disabled", exporter: "console", disabled: "TRUE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			unsetenv(t, ExporterVariable)
			unsetenv(t, DisabledVariable)
			if c.exporter != "" {
				t.Setenv(ExporterVariable, c.exporter)
			}
			if c.disabled != "" {
				t.Setenv(DisabledVariable, c.disabled)
			}
			tp, flush, err := FromEnv(context.Background())
			require.NoError(t, err)
			assert.IsType(t, noop.TracerProvider{}, tp)
			assert.False(t, Enabled(tp))
			_, span := tp.Tracer(ScopeName).Start(context.Background(), "x")
			assert.False(t, span.IsRecording())
			assert.NoError(t, flush(context.Background()))
		})
	}
}

func TestFromEnv_exporter_named(t *testing.T) {
	unsetenv(t, DisabledVariable)
	t.Setenv(ExporterVariable, "console")
	tp, flush, err := FromEnv(context.Background())
	require.NoError(t, err)
	assert.IsType(t, &sdktrace.TracerProvider{}, tp)
	assert.True(t, Enabled(tp))
	assert.NoError(t, flush(context.Background()))
}

func TestFromEnv_unknown_exporter_names_the_variable(t *testing.T) {
	unsetenv(t, DisabledVariable)
	t.Setenv(ExporterVariable, "zipkinn")
	_, _, err := FromEnv(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_TRACES_EXPORTER=zipkinn")
}

func TestServiceResource_transit_unless_the_environment_names_another(t *testing.T) {
	name := func() string {
		t.Helper()
		res, err := serviceResource(context.Background())
		require.NoError(t, err)
		v, _ := res.Set().Value(semconv.ServiceNameKey)
		return v.AsString()
	}
	unsetenv(t, "OTEL_SERVICE_NAME")
	unsetenv(t, "OTEL_RESOURCE_ATTRIBUTES")
	assert.Equal(t, "transit", name())
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=transit-eu,deployment.environment.name=prod")
	assert.Equal(t, "transit-eu", name())
	t.Setenv("OTEL_SERVICE_NAME", "transit-blue")
	assert.Equal(t, "transit-blue", name())
}

func recorder() (*tracetest.InMemoryExporter, trace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	return exp, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
}

// remoteParent is the context a message's traceparent attribute carries.
func remoteParent(t *testing.T, tp trace.TracerProvider) (trace.SpanContext, string) {
	_, span := tp.Tracer("producer").Start(context.Background(), "publish")
	span.End()
	carrier := propagation.MapCarrier{}
	Propagator().Inject(trace.ContextWithSpan(context.Background(), span), carrier)
	require.NotEmpty(t, carrier[TraceparentAttribute])
	return span.SpanContext(), carrier[TraceparentAttribute]
}

func TestConsume_spans_a_delivery_under_its_publish(t *testing.T) {
	exp, tp := recorder()
	parent, traceparent := remoteParent(t, tp)
	exp.Reset()
	msg := message.NewMessage("cmd-1", nil)
	msg.Metadata = message.Metadata{messages.TypeAttribute: string(messages.SandboxAllocate), messages.CorrelationAttribute: "corr", TraceparentAttribute: traceparent}

	var inHandler trace.SpanContext
	produced := message.NewMessage("ev-1", nil)
	_, err := Consume(tp)(func(msg *message.Message) ([]*message.Message, error) {
		inHandler = trace.SpanContextFromContext(msg.Context())
		return []*message.Message{produced}, nil
	})(msg)
	require.NoError(t, err)

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "sandbox.allocate process", s.Name)
	assert.Equal(t, trace.SpanKindConsumer, s.SpanKind)
	assert.Equal(t, parent.TraceID(), s.SpanContext.TraceID(), "the trace the message carried")
	assert.Equal(t, parent.SpanID(), s.Parent.SpanID(), "child of the publish")
	assert.Equal(t, s.SpanContext, inHandler, "the handler runs in the span")
	assert.Equal(t, s.SpanContext, trace.SpanContextFromContext(produced.Context()), "what it produces publishes as the span's child")
	assert.Contains(t, s.Attributes, SQS)
	assert.Contains(t, s.Attributes, semconv.MessagingMessageID("cmd-1"))
	assert.Contains(t, s.Attributes, CorrelationKey.String("corr"))
	assert.Contains(t, s.Attributes, DomainKey.String("sandbox"))
	assert.Equal(t, codes.Unset, s.Status.Code)
}

func TestConsume_a_failed_delivery_fails_its_span(t *testing.T) {
	exp, tp := recorder()
	run := func(h message.HandlerFunc) tracetest.SpanStub {
		t.Helper()
		exp.Reset()
		msg := message.NewMessage("cmd", nil)
		msg.Metadata.Set(messages.TypeAttribute, string(messages.SandboxAllocate))
		_, _ = Consume(tp)(h)(msg)
		spans := exp.GetSpans()
		require.Len(t, spans, 1)
		assert.False(t, spans[0].Parent.IsValid(), "no trace context carried: a root span")
		return spans[0]
	}
	s := run(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("throttled") })
	assert.Equal(t, codes.Error, s.Status.Code)
	assert.Equal(t, "throttled", s.Status.Description)

	// The DLQ path acks the message: no error comes out, the reason does.
	s = run(func(msg *message.Message) ([]*message.Message, error) {
		msg.Metadata.Set(middleware.ReasonForPoisonedKey, "invalid track_id")
		return nil, nil
	})
	assert.Equal(t, codes.Error, s.Status.Code)
	assert.Equal(t, "sent to the DLQ: invalid track_id", s.Status.Description)
}

func TestStartPublish_carries_the_span_within_the_attribute_limit(t *testing.T) {
	exp, tp := recorder()
	state, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	}))
	publish := func(md message.Metadata, limit int) (message.Metadata, tracetest.SpanStub) {
		t.Helper()
		exp.Reset()
		msg := message.NewMessage("m", nil)
		msg.Metadata = md
		End(StartPublish(parent, tp.Tracer(ScopeName), SQS, "q", msg, limit), nil)
		spans := exp.GetSpans()
		require.Len(t, spans, 1)
		return msg.Metadata, spans[0]
	}
	traceparentOf := func(s tracetest.SpanStub) string {
		carrier := propagation.MapCarrier{}
		Propagator().Inject(trace.ContextWithSpanContext(context.Background(), s.SpanContext), carrier)
		return carrier[TraceparentAttribute]
	}

	md, s := publish(message.Metadata{messages.TypeAttribute: "sandbox.allocate", TraceparentAttribute: "00-stale", TracestateAttribute: "stale=1"}, 9)
	assert.Equal(t, trace.SpanKindProducer, s.SpanKind)
	assert.Equal(t, trace.SpanID{2}, s.Parent.SpanID())
	assert.Equal(t, traceparentOf(s), md[TraceparentAttribute], "the publish span's context replaces the stale one")
	assert.Equal(t, "vendor=abc", md[TracestateAttribute])
	assert.Empty(t, s.Events)

	md, s = publish(message.Metadata{"a": "1", "b": "2"}, 3)
	assert.Equal(t, traceparentOf(s), md[TraceparentAttribute])
	assert.NotContains(t, md, TracestateAttribute, "one entry left: traceparent only")
	require.Len(t, s.Events, 1)

	md, s = publish(message.Metadata{"a": "1", "b": "2", TraceparentAttribute: "00-stale"}, 2)
	assert.Equal(t, message.Metadata{"a": "1", "b": "2"}, md, "no room: no trace context, not a stale one")
	require.Len(t, s.Events, 2)
	assert.Equal(t, "trace context not carried: the message has no attribute left", s.Events[0].Name)
}

// An AWS call gets a span only under a span that records: not outside
// any span (the idle long polls), and not under one the sampler dropped.
func TestInstrumentAWS_spans_calls_only_under_a_kept_span(t *testing.T) {
	exp, tp := recorder()
	var cfg aws.Config
	InstrumentAWS(&cfg, tp)
	// call makes a call in ctx and returns the span context the call
	// itself ran in.
	call := func(ctx context.Context) (in trace.SpanContext) {
		stack := smithymiddleware.NewStack("GetItem", smithyhttp.NewStackRequest)
		for _, add := range cfg.APIOptions {
			require.NoError(t, add(stack))
		}
		ctx = awsmiddleware.SetOperationName(awsmiddleware.SetServiceID(ctx, "DynamoDB"), "GetItem")
		done := smithymiddleware.HandlerFunc(func(ctx context.Context, _ any) (any, smithymiddleware.Metadata, error) {
			in = trace.SpanContextFromContext(ctx)
			return nil, smithymiddleware.Metadata{}, nil
		})
		_, _, err := smithymiddleware.DecorateHandler(done, stack).Handle(ctx, struct{}{})
		require.NoError(t, err)
		return in
	}

	call(context.Background())
	assert.Empty(t, exp.GetSpans(), "outside any span")

	dropped := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true})
	ctx, span := tp.Tracer("t").Start(trace.ContextWithRemoteSpanContext(context.Background(), dropped), "dropped")
	require.False(t, span.IsRecording(), "a child of an unsampled parent is dropped")
	assert.Equal(t, span.SpanContext(), call(ctx), "under a dropped span, no span is started at all")
	span.End()
	assert.Empty(t, exp.GetSpans(), "under a dropped span")

	ctx, span = tp.Tracer("t").Start(context.Background(), "kept")
	call(ctx)
	span.End()
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	assert.Equal(t, "DynamoDB.GetItem", spans[0].Name)
	assert.Equal(t, span.SpanContext().SpanID(), spans[0].Parent.SpanID())
}
