package transport_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/transport"
)

// recordingPublisher records where each message was sent and with what metadata.
type recordingPublisher struct{ sent []sent }

type sent struct {
	topic    string
	metadata message.Metadata
}

func (p *recordingPublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		md := message.Metadata{}
		for k, v := range m.Metadata {
			md[k] = v
		}
		p.sent = append(p.sent, sent{topic: topic, metadata: md})
	}
	return nil
}

func (p *recordingPublisher) Close() error { return nil }

func TestPublisher_routes_commands_and_events_that_share_a_name(t *testing.T) {
	stack := transport.Stack{Prefix: "p"}
	topics, queues := &recordingPublisher{}, &recordingPublisher{}
	pub := transport.NewPublisher(stack, topics, queues)
	newMsg := func(typ messages.Type, command bool) *message.Message {
		return transport.NewMessage("id", []byte("{}"), typ, "c", command)
	}
	// layer.published is both a command and the event reporting it.
	require.NoError(t, pub.Publish(transport.ByType, newMsg(messages.LayerPublishedEvent, false)))
	require.NoError(t, pub.Publish(transport.ByType, newMsg(messages.LayerPublished, true)))
	require.NoError(t, pub.Publish(transport.ByType, newMsg(messages.SandboxExpire, true)))

	require.Len(t, topics.sent, 1)
	assert.Equal(t, stack.EventTopic(messages.Layer), topics.sent[0].topic)
	require.Len(t, queues.sent, 2)
	assert.Equal(t, stack.CommandQueue(messages.Layer), queues.sent[0].topic)
	assert.Equal(t, stack.CommandQueue(messages.Sandbox), queues.sent[1].topic)
	for _, s := range append(topics.sent, queues.sent...) {
		assert.Len(t, s.metadata, 2, "only the type and correlation travel: the routing mark is removed")
	}
}

func TestPublisher_refuses_what_has_no_destination(t *testing.T) {
	pub := transport.NewPublisher(transport.Stack{Prefix: "p"}, &recordingPublisher{}, &recordingPublisher{})
	assert.Error(t, pub.Publish(transport.ByType, transport.NewMessage("id", []byte("{}"), messages.SandboxAllocated, "c", true)), "an event marked as a command")
	assert.Error(t, pub.Publish("p-unknown-queue", transport.NewMessage("id", []byte("{}"), messages.SandboxAllocated, "c", false)))
}
