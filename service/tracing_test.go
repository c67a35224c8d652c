package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"transit/config"
	"transit/messages"
	"transit/service"
	"transit/tracing"
)

// TestTracing_one_trace_from_send_to_the_timer_a_command_arms follows a
// sandbox.allocate sent as `transit send` sends it through a traced serve:
// one trace holds the send's publish, the sandbox handler's delivery under
// it with its DynamoDB calls, the publish of the timer.create the
// allocation causes, and the timers handler's delivery of that with its
// DynamoDB calls, each the child of the one before. The timer's firing,
// seconds later, is a trace of its own: the scheduler's publish of
// timer.due, its delivery, the callback, and the delivery of the
// sandbox.expire the callback sends.
func TestTracing_one_trace_from_send_to_the_timer_a_command_arms(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.SandboxExpiry = config.ExpiryTimer })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	svc, err := service.New(context.Background(), s.cfg, func(c *aws.Config) { tracing.InstrumentAWS(c, tp) })
	require.NoError(t, err)
	svc.Tracing = tp
	s.serveOn(svc, service.ServeOptions{})
	sync := uuid.NewString()
	s.send(sync, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
		{ExternalID: "ext-a", Name: "a", LabDurationHours: 2.0 / 3600},
	}})
	s.eventFor(sync, messages.SandboxSynced)

	id := uuid.NewString()
	require.NoError(t, svc.Send(context.Background(), id, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}))
	allocated := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(id, messages.SandboxAllocated))

	var send tracetest.SpanStub
	var inTrace tracetest.SpanStubs
	require.Eventually(t, func() bool {
		spans := exp.GetSpans()
		var ok bool
		if send, ok = find(spans, trace.SpanKindProducer, "sandbox.allocate publish", semconv.MessagingMessageID(id)); !ok {
			return false
		}
		inTrace = nil
		for _, sp := range spans {
			if sp.SpanContext.TraceID() == send.SpanContext.TraceID() {
				inTrace = append(inTrace, sp)
			}
		}
		timerCreate, ok := find(inTrace, trace.SpanKindConsumer, "timer.create process")
		return ok && len(children(inTrace, timerCreate, "DynamoDB.")) > 0
	}, 60*time.Second, 200*time.Millisecond, "the timer.create the allocation causes is handled in the send's trace")

	assert.False(t, send.Parent.IsValid(), "transit send starts the trace")
	allocate := only(t, inTrace, trace.SpanKindConsumer, "sandbox.allocate process", send.SpanContext.SpanID())
	assert.Contains(t, allocate.Attributes, tracing.SQS)
	assert.Contains(t, allocate.Attributes, tracing.CorrelationKey.String(id))
	assert.Contains(t, allocate.Attributes, tracing.DomainKey.String("sandbox"))
	assert.NotEmpty(t, children(inTrace, allocate, "DynamoDB."), "the store's calls nest under the handler's delivery")
	only(t, inTrace, trace.SpanKindProducer, "sandbox.allocated publish", allocate.SpanContext.SpanID())
	timerPublish := only(t, inTrace, trace.SpanKindProducer, "timer.create publish", allocate.SpanContext.SpanID())
	timerCreate := only(t, inTrace, trace.SpanKindConsumer, "timer.create process", timerPublish.SpanContext.SpanID())
	assert.Contains(t, timerCreate.Attributes, tracing.DomainKey.String("timer"))
	assert.NotEmpty(t, children(inTrace, timerCreate, "DynamoDB."), "the timer store's calls nest under its delivery")
	for _, sp := range children(inTrace, allocate, "DynamoDB.") {
		assert.Equal(t, trace.SpanKindClient, sp.SpanKind)
	}

	// The firing: a sandbox.expire sent by the timer's SQS callback.
	s.eventFor(messages.DerivedID(id, messages.SandboxExpire, allocated.SandboxID), messages.SandboxExpired)
	var expire tracetest.SpanStub
	require.Eventually(t, func() bool {
		var ok bool
		expire, ok = find(exp.GetSpans(), trace.SpanKindConsumer, "sandbox.expire process")
		return ok
	}, 10*time.Second, 100*time.Millisecond)
	spans := exp.GetSpans()
	callback := parentOf(t, spans, expire)
	assert.Equal(t, "timer callback", callback.Name, "the callback's message carries its span")
	assert.Equal(t, trace.SpanKindProducer, callback.SpanKind)
	assert.Contains(t, callback.Attributes, tracing.SQS)
	due := parentOf(t, spans, callback)
	assert.Equal(t, "timer.due process", due.Name)
	assert.NotEmpty(t, children(spans, due, "DynamoDB."), "the firing's store calls nest under its delivery")
	fired := parentOf(t, spans, due)
	assert.Equal(t, "timer.due publish", fired.Name, "the scheduler's SendBatch")
	assert.False(t, fired.Parent.IsValid(), "a firing starts a trace of its own")
	assert.NotEqual(t, send.SpanContext.TraceID(), fired.SpanContext.TraceID())
}

// parentOf is the span whose child sp is.
func parentOf(t *testing.T, spans tracetest.SpanStubs, sp tracetest.SpanStub) tracetest.SpanStub {
	t.Helper()
	for _, p := range spans {
		if p.SpanContext.SpanID() == sp.Parent.SpanID() && p.SpanContext.TraceID() == sp.SpanContext.TraceID() {
			return p
		}
	}
	require.Failf(t, "no parent", "the parent of %q is not among %d spans", sp.Name, len(spans))
	return tracetest.SpanStub{}
}

// find is a span of kind named name with every attribute of attrs.
func find(spans tracetest.SpanStubs, kind trace.SpanKind, name string, attrs ...attribute.KeyValue) (tracetest.SpanStub, bool) {
	for _, sp := range spans {
		if sp.SpanKind == kind && sp.Name == name && hasAll(sp, attrs) {
			return sp, true
		}
	}
	return tracetest.SpanStub{}, false
}

func hasAll(sp tracetest.SpanStub, attrs []attribute.KeyValue) bool {
	for _, want := range attrs {
		if !slices.Contains(sp.Attributes, want) {
			return false
		}
	}
	return true
}

// only is the one span of kind named name that is a child of parent.
func only(t *testing.T, spans tracetest.SpanStubs, kind trace.SpanKind, name string, parent trace.SpanID) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStubs
	for _, sp := range spans {
		if sp.SpanKind == kind && sp.Name == name && sp.Parent.SpanID() == parent {
			found = append(found, sp)
		}
	}
	require.Len(t, found, 1, "one %q child of %s among %d spans of the trace", name, parent, len(spans))
	return found[0]
}

// children are the spans under parent whose name starts with prefix.
func children(spans tracetest.SpanStubs, parent tracetest.SpanStub, prefix string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, sp := range spans {
		if sp.Parent.SpanID() == parent.SpanContext.SpanID() && strings.HasPrefix(sp.Name, prefix) {
			out = append(out, sp)
		}
	}
	return out
}
