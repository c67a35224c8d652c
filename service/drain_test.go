package service_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/service"
	"transit/store"
)

// slowPublisher holds every allocation event for a while, so commands are
// in flight when the drain starts.
type slowPublisher struct {
	message.Publisher
	started atomic.Int32
}

func (p *slowPublisher) Publish(topic string, msgs ...*message.Message) error {
	if msgs[0].Metadata.Get(messages.TypeAttribute) == string(messages.SandboxAllocated) {
		p.started.Add(1)
		time.Sleep(time.Second)
	}
	return p.Publisher.Publish(topic, msgs...)
}

// TestServe_drains_in_flight_commands_on_shutdown: stopping serve (what
// SIGTERM does) lets in-flight commands finish, publishes their events and
// acks them: nothing is left in the queue to be redelivered.
func TestServe_drains_in_flight_commands_on_shutdown(t *testing.T) {
	s := newStack(t)
	setup := s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2", "ext-3", "ext-4")
	require.NoError(t, setup())

	slow := &slowPublisher{}
	stop := s.serve(service.ServeOptions{WrapPublisher: func(p message.Publisher) message.Publisher {
		slow.Publisher = p
		return slow
	}})
	var cmds []string
	for i := range 4 {
		cmds = append(cmds, uuid.NewString())
		s.send(cmds[i], messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-" + strconv.Itoa(i)})
	}
	require.Eventually(t, func() bool { return slow.started.Load() == 4 }, 20*time.Second, 20*time.Millisecond)

	began := time.Now()
	require.NoError(t, stop(), "serve drains within its drain timeout")
	assert.Less(t, time.Since(began), s.cfg.DrainTimeout)

	for _, c := range cmds {
		s.eventFor(c, messages.SandboxAllocated)
	}
	assert.Len(t, s.inStatus(store.StatusAllocated), 4)
	out, err := s.svc.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(s.queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	require.NoError(t, err)
	assert.Equal(t, "0", out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	assert.Equal(t, "0", out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], "every in-flight command was acked")
}
