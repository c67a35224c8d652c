package router_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"transit/router"
	"transit/store"
	"transit/streams"
	"transit/tracing"
)

// contexts records the span context each published message carries.
type contexts struct {
	message.Publisher
	sent chan trace.SpanContext
}

func (p contexts) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		p.sent <- trace.SpanContextFromContext(m.Context())
	}
	return p.Publisher.Publish(topic, msgs...)
}

// A stream record the fan-in handles, traced, is a root span of its own
// (a record carries no trace context) marked as DynamoDB Streams', and
// the command it becomes is published as that span's child.
func TestFanIn_traced_record_spans_the_command_it_sends(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	logger := watermill.NopLogger{}
	blocking := gochannel.Config{BlockPublishUntilSubscriberAck: true}
	stream, commands := gochannel.NewGoChannel(blocking, logger), gochannel.NewGoChannel(blocking, logger)
	out, err := commands.Subscribe(ctx, "by-type")
	require.NoError(t, err)
	go func() {
		for m := range out {
			m.Ack()
		}
	}()
	r, err := router.New(router.Config{CommandTimeout: time.Second, CloseTimeout: time.Second, Tracing: tp}, logger)
	require.NoError(t, err)
	const table = "test-Layers"
	pub := contexts{Publisher: commands, sent: make(chan trace.SpanContext, 1)}
	router.RegisterFanIn(r, table, store.Layers.Name, stream, pub, []router.StreamRule{router.LayerRemovedRule}, slog.Default())
	go func() { _ = r.Run(ctx) }()
	<-r.Running()

	rec := layerRemoval("ev-1", "lyrVrsn#v1", true)
	payload, err := json.Marshal(rec)
	require.NoError(t, err)
	msg := message.NewMessage(rec.EventID, payload)
	msg.Metadata.Set(streams.TypeAttribute, rec.Type)
	require.NoError(t, stream.Publish(table, msg))
	var sent trace.SpanContext
	select {
	case sent = <-pub.sent:
	case <-time.After(5 * time.Second):
		t.Fatal("no command sent")
	}

	require.Eventually(t, func() bool { return len(exp.GetSpans()) == 1 }, 5*time.Second, 10*time.Millisecond)
	span := exp.GetSpans()[0]
	assert.Equal(t, "dynamodb.remove process", span.Name)
	assert.False(t, span.Parent.IsValid(), "a root span")
	assert.Contains(t, span.Attributes, tracing.DynamoDBStreams)
	assert.NotContains(t, span.Attributes, tracing.SQS)
	assert.Contains(t, span.Attributes, semconv.MessagingDestinationName(table))
	assert.Equal(t, span.SpanContext, sent, "the command publishes under the record's span")
}
