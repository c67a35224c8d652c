package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
	"transit/service"
	"transit/store"
	"transit/transport"
)

// TestSandbox_same_command_three_times: one transition, three identical events.
func TestSandbox_same_command_three_times(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2", "ext-3")

	cmd := uuid.NewString()
	for range 3 {
		s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	}
	events := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, cmd)) >= 3 })
	caused := causedBy(events, cmd)
	require.Len(t, caused, 3)
	for _, ev := range caused {
		assert.Equal(t, messages.DerivedID(cmd, messages.SandboxAllocated, ""), ev.MessageID)
		assert.Equal(t, messages.SandboxAllocated, ev.Envelope.Type)
		assert.JSONEq(t, string(caused[0].Envelope.Payload), string(ev.Envelope.Payload), "the same event each time")
		assert.Equal(t, caused[0].Envelope.OccurredAt, ev.Envelope.OccurredAt)
	}
	assert.Len(t, s.inStatus(store.StatusAllocated), 1, "one sandbox allocated")
	assert.Len(t, s.inStatus(store.StatusAvailable), 2)
	assert.Equal(t, 2, s.auditCount(), "the sync and the allocation, each recorded once")
}

// crashingPublisher plays a process that dies after its DynamoDB write and
// before its publish: the first publish of the chosen type fails and the
// consumer is stopped at once.
type crashingPublisher struct {
	message.Publisher
	typ     messages.Type
	crashed atomic.Bool
	crash   func()
}

func (p *crashingPublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if m.Metadata.Get(messages.TypeAttribute) == string(p.typ) && p.crashed.CompareAndSwap(false, true) {
			p.crash()
			return errors.New("injected crash before publish")
		}
	}
	return p.Publisher.Publish(topic, msgs...)
}

func TestSandbox_crash_between_write_and_publish(t *testing.T) {
	s := newStack(t)
	first := s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2")
	require.NoError(t, first())

	crashed := make(chan struct{})
	var crashing *crashingPublisher
	stop := s.serve(service.ServeOptions{WrapPublisher: func(p message.Publisher) message.Publisher {
		crashing = &crashingPublisher{Publisher: p, typ: messages.SandboxAllocated, crash: func() { close(crashed) }}
		return crashing
	}})
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	select {
	case <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("the fault was never reached")
	}
	_ = stop()
	// The write happened, the event did not.
	require.Len(t, s.inStatus(store.StatusAllocated), 1)
	require.Equal(t, store.Applied, s.audit(cmd)["status"])
	allocatedAt := s.inStatus(store.StatusAllocated)[0].AllocatedAt

	// A new process receives the redelivery and publishes the event.
	s.clock.Shift(time.Hour) // a repeated transition would show a later allocated_at
	s.serve(service.ServeOptions{})
	ev := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated))
	allocated := s.inStatus(store.StatusAllocated)
	require.Len(t, allocated, 1, "the transition is not repeated")
	assert.Equal(t, allocated[0].SandboxID, ev.SandboxID)
	assert.Equal(t, allocatedAt, allocated[0].AllocatedAt)
	assert.Equal(t, allocatedAt, ev.AllocatedAt, "the event reports the recorded transition")
	// Exactly one sandbox.allocated ever reached the topic.
	time.Sleep(time.Second)
	events := s.collect(time.Second, func([]service.TapEvent) bool { return true })
	assert.Len(t, causedBy(events, cmd), 1)
}

// TestSandbox_concurrent_allocation: 50 allocations race for 10 sandboxes
// through two consumers (two transit processes). Their history is
// linearizable (linearizability_test.go), and a specification with one
// guard flipped rejects it: the check reads what the race did.
func TestSandbox_concurrent_allocation(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Concurrency = 8 })
	pool := s.racePool()
	cmds := make([]allocInput, 50)
	for i := range cmds {
		cmds[i] = allocInput{Type: messages.SandboxAllocate, TrackID: fmt.Sprintf("track-%02d", i), CommandID: uuid.NewString()}
	}
	ops, events := s.race(cmds)
	assertLinearizable(t, pool, ops)
	assertBrokenSpecRejects(t, pool, ops)

	winners := map[string]string{}
	rejected := 0
	for _, c := range cmds {
		caused := causedBy(events, c.CommandID)
		// At-least-once out: a redelivery may re-emit, always as the same event.
		for _, ev := range caused {
			require.Equal(t, caused[0].MessageID, ev.MessageID, "one outcome per command")
		}
		switch caused[0].Envelope.Type {
		case messages.SandboxAllocated:
			p := payloadOf[messages.SandboxAllocatedPayload](t, caused[0])
			require.NotContains(t, winners, p.SandboxID, "sandbox %s allocated twice", p.SandboxID)
			winners[p.SandboxID] = p.TrackID
		case messages.SandboxAllocationRejected:
			assert.Equal(t, messages.ReasonPoolExhausted, payloadOf[messages.SandboxAllocationRejectedPayload](t, caused[0]).Reason)
			rejected++
		default:
			t.Fatalf("unexpected %s", caused[0].Envelope.Type)
		}
	}
	assert.Len(t, winners, 10)
	assert.Equal(t, 40, rejected)
	allocated := s.inStatus(store.StatusAllocated)
	require.Len(t, allocated, 10)
	for _, sb := range allocated {
		assert.Equal(t, winners[sb.SandboxID], sb.AllocatedToTrack, "the table agrees with the events")
	}
	assert.Empty(t, s.inStatus(store.StatusAvailable))
}

// TestSandbox_concurrent_allocation_same_key: the race again, where five
// of the tracks each send two commands (two IDs, one idempotency key), as
// a producer retrying with a new ID would. A pair is answered with one
// sandbox, or both are rejected; the history shows which.
func TestSandbox_concurrent_allocation_same_key(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Concurrency = 8 })
	pool := s.racePool()
	var cmds []allocInput
	for i := range 5 {
		for range 2 {
			cmds = append(cmds, allocInput{Type: messages.SandboxAllocate, TrackID: fmt.Sprintf("pair-%d", i),
				Key: fmt.Sprintf("retry-%d", i), CommandID: uuid.NewString()})
		}
	}
	for i := range 40 {
		cmds = append(cmds, allocInput{Type: messages.SandboxAllocate, TrackID: fmt.Sprintf("track-%02d", i), CommandID: uuid.NewString()})
	}
	ops, events := s.race(cmds)
	assertLinearizable(t, pool, ops)

	announced := map[string]string{} // sandbox ID → track
	for _, c := range cmds {
		if ev := causedBy(events, c.CommandID)[0]; ev.Envelope.Type == messages.SandboxAllocated {
			announced[payloadOf[messages.SandboxAllocatedPayload](t, ev).SandboxID] = c.TrackID
		}
	}
	allocated := s.inStatus(store.StatusAllocated)
	assert.Len(t, allocated, len(pool), "the whole pool allocated")
	assert.Len(t, announced, len(allocated), "every allocation announced")
	for _, sb := range allocated {
		assert.Equal(t, announced[sb.SandboxID], sb.AllocatedToTrack, "the table agrees with the events")
	}
}

// racePool starts the two consumers of the race and syncs its ten
// sandboxes.
func (s *stack) racePool() []string {
	s.serve(service.ServeOptions{})
	s.serve(service.ServeOptions{})
	var external []string
	for i := range 10 {
		external = append(external, fmt.Sprintf("ext-%d", i))
	}
	return s.sync(external...)
}

// TestPoison_goes_to_the_DLQ_and_the_queue_keeps_flowing sends malformed
// and invalid commands, each of which must land in the DLQ with its
// reason, with valid commands queued behind them still handled.
func TestPoison_goes_to_the_DLQ_and_the_queue_keeps_flowing(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Concurrency = 1 })
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2")

	envelope := func(t messages.Type, payload string) string {
		return fmt.Sprintf(`{"id":%q,"type":%q,"payload":%s}`, uuid.NewString(), t, payload)
	}
	// The most attributes SQS takes: transit keeps only what it routes on,
	// so its DLQ attributes still fit.
	full := map[string]string{messages.TypeAttribute: string(messages.SandboxAllocate)}
	for i := len(full); i < 10; i++ {
		full[fmt.Sprintf("producer_attr_%d", i)] = strings.Repeat("v", 200)
	}
	cases := []struct {
		Name   string
		Body   string
		Attrs  map[string]string
		Reason string
	}{
		{Name: "bad_json", Body: `{"type": "sandbox.allocate", `, Reason: "invalid body: not a JSON object"},
		{Name: "unknown_type", Body: envelope("sandbox.teleport", `{}`), Reason: `unknown command type "sandbox.teleport"`},
		{Name: "missing_field", Body: envelope(messages.SandboxAllocate, `{}`), Reason: "invalid track_id: required"},
		{Name: "unknown_field", Body: envelope(messages.SandboxAllocate, `{"track_id":"t","status":"available"}`), Reason: `unknown field "status"`},
		{Name: "injection_shaped_sandbox_id", Body: envelope(messages.SandboxMarkDeletion, `{"sandbox_id":"x) OR attribute_exists(PK","track_id":"t"}`), Reason: "invalid sandbox_id"},
		{Name: "injection_shaped_track_id", Body: envelope(messages.SandboxAllocate, `{"track_id":"t, #status = :available"}`), Reason: "invalid track_id"},
		{Name: "oversized_field", Body: envelope(messages.SandboxAllocate, fmt.Sprintf(`{"track_id":%q}`, strings.Repeat("a", 64*1024))), Reason: "65536 characters, at most 256"},
		{Name: "type_attribute_disagrees", Body: envelope(messages.SandboxAllocate, `{"track_id":"t"}`), Attrs: map[string]string{messages.TypeAttribute: "sandbox.sync"}, Reason: "disagrees"},
		{Name: "largest_envelope", Body: envelope(messages.SandboxAllocate, `{"track_id":""}`), Attrs: full, Reason: "invalid track_id"},
	}
	for _, c := range cases {
		s.sendRaw(c.Body, c.Attrs)
	}
	// Behind the poison: a valid command, and one whose idempotency key
	// looks like expression syntax, which is data, not an injection.
	valid := uuid.NewString()
	s.send(valid, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-ok"})
	tricky := uuid.NewString()
	s.send(tricky, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-tricky", IdempotencyKey: `k" OR #status = :available) --`})

	s.eventFor(valid, messages.SandboxAllocated)
	ev := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(tricky, messages.SandboxAllocated))
	sb, _ := s.sandbox(ev.SandboxID)
	assert.Equal(t, `k" OR #status = :available) --`, sb.IdempotencyKey, "stored literally")

	letters := s.deadLetters(len(cases))
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var found bool
			for _, l := range letters {
				if l.Body == c.Body {
					found = true
					assert.Contains(t, l.Reason, c.Reason)
					assert.Equal(t, "sandbox-commands", l.Attributes["handler_poisoned"])
					assert.LessOrEqual(t, len(l.Attributes), 10)
				}
			}
			assert.True(t, found, "%s is in the DLQ", c.Name)
		})
	}
	assert.Equal(t, 3, s.auditCount(), "the sync and the two valid allocations; no poison recorded")
}

// TestProvision_twice: the second run succeeds and the stack still works
// end to end, for producers on SQS and on the command topic alike.
func TestProvision_twice(t *testing.T) {
	s := newStack(t) // provisions once
	require.NoError(t, s.svc.Provision(context.Background()))
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2")
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	s.eventFor(cmd, messages.SandboxAllocated)

	viaSNS := uuid.NewString()
	body, err := messages.NewCommand(viaSNS, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-2"}, time.Now())
	require.NoError(t, err)
	topic, err := s.svc.TopicARN(context.Background(), s.svc.Stack.CommandTopic(messages.Sandbox))
	require.NoError(t, err)
	_, err = s.svc.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(string(body))})
	require.NoError(t, err)
	s.eventFor(viaSNS, messages.SandboxAllocated)

	redrive, err := s.svc.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(s.queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy},
	})
	require.NoError(t, err)
	assert.Contains(t, redrive.Attributes["RedrivePolicy"], s.svc.Stack.DeadLetterQueue(messages.Sandbox))
}

// TestDLQ_redrive: a command dead-lettered after its retries ran out (as
// SQS's redrive policy does) is handled once it is moved back, and the DLQ
// is left empty.
func TestDLQ_redrive(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.sync("ext-1")
	cmd := uuid.NewString()
	body, err := messages.NewCommand(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}, time.Now())
	require.NoError(t, err)
	_, err = s.svc.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(s.dlqURL), MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(messages.SandboxAllocate))},
			"reason_poisoned":      {DataType: aws.String("String"), StringValue: aws.String("table missing")},
		},
	})
	require.NoError(t, err)
	letters := s.deadLetters(1)
	assert.Equal(t, "table missing", letters[0].Reason)

	moved, err := transport.Redrive(context.Background(), s.svc.SQS, s.dlqURL, s.queueURL, 10, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, moved)
	s.eventFor(cmd, messages.SandboxAllocated)
	s.deadLetters(0)
}
