package router_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/router"
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
	stack := router.Stack{Prefix: "p"}
	topics, queues := &recordingPublisher{}, &recordingPublisher{}
	pub := router.NewPublisher(stack, topics, queues)
	newMsg := func(typ messages.Type) *message.Message {
		m := message.NewMessage("id", []byte("{}"))
		m.Metadata.Set(messages.TypeAttribute, string(typ))
		return m
	}
	// layer.published is both a command and the event reporting it.
	require.NoError(t, pub.Publish(router.ByType, newMsg(messages.LayerPublishedEvent)))
	require.NoError(t, pub.Publish(router.ByType, router.AsCommand(newMsg(messages.LayerPublished))))
	require.NoError(t, pub.Publish(router.ByType, router.AsCommand(newMsg(messages.SandboxExpire))))

	require.Len(t, topics.sent, 1)
	assert.Equal(t, stack.EventTopic(messages.Layer), topics.sent[0].topic)
	require.Len(t, queues.sent, 2)
	assert.Equal(t, stack.CommandQueue(messages.Layer), queues.sent[0].topic)
	assert.Equal(t, stack.CommandQueue(messages.Sandbox), queues.sent[1].topic)
	for _, s := range append(topics.sent, queues.sent...) {
		assert.Len(t, s.metadata, 1, "only the type travels: the routing mark is removed")
	}
}

func TestPublisher_refuses_what_has_no_destination(t *testing.T) {
	pub := router.NewPublisher(router.Stack{Prefix: "p"}, &recordingPublisher{}, &recordingPublisher{})
	m := message.NewMessage("id", []byte("{}"))
	m.Metadata.Set(messages.TypeAttribute, string(messages.SandboxAllocated))
	assert.Error(t, pub.Publish(router.ByType, router.AsCommand(m)), "an event marked as a command")
	assert.Error(t, pub.Publish("p-unknown-queue", m))
}
