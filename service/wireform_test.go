package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
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

// producer sends one command the way some outside program would, with
// nothing but an AWS SDK, and returns the ID transit will know it by.
type producer func(s *stack, id string, t messages.Type, payload any) string

// producerFor returns how the named wire form sends. Bare forms carry the
// command ID in the id attribute and a correlation ID of their own.
func producerFor(s *stack, form string) producer {
	bare := func(topicARN string) producer {
		return func(s *stack, id string, t messages.Type, payload any) string {
			s.publishBare(topicARN, id, t, payload)
			return id
		}
	}
	switch form {
	case "envelope_on_sqs":
		return func(s *stack, id string, t messages.Type, payload any) string {
			s.send(id, t, payload)
			return id
		}
	case "bare_payload_on_sqs":
		return func(s *stack, id string, t messages.Type, payload any) string {
			s.sendBare(id, t, payload)
			return id
		}
	case "bare_payload_on_the_command_topic":
		topic, err := s.svc.TopicARN(context.Background(), s.svc.Stack.CommandTopic(messages.Sandbox))
		require.NoError(s.t, err)
		return bare(topic)
	case "bare_payload_through_a_topic_without_raw_delivery":
		return bare(s.wrappingTopic())
	}
	s.t.Fatalf("no wire form %q", form)
	return nil
}

func bareAttrs(id string, t messages.Type) map[string]string {
	return map[string]string{
		messages.TypeAttribute:        string(t),
		messages.IDAttribute:          id,
		messages.CorrelationAttribute: "corr-" + id,
	}
}

func bareBody(t *testing.T, payload any) string {
	b, err := json.Marshal(payload)
	require.NoError(t, err)
	return string(b)
}

// sendBare sends the payload alone as the body, its type and ID as
// attributes, straight to the domain's command queue.
func (s *stack) sendBare(id string, t messages.Type, payload any) {
	d, _ := messages.DomainOf(t)
	s.sendTo(s.url(s.svc.Stack.CommandQueue(d)), bareBody(s.t, payload), bareAttrs(id, t))
}

func (s *stack) publishBare(topicARN, id string, t messages.Type, payload any) {
	in := &sns.PublishInput{TopicArn: aws.String(topicARN), Message: aws.String(bareBody(s.t, payload)), MessageAttributes: map[string]snstypes.MessageAttributeValue{}}
	for k, v := range bareAttrs(id, t) {
		in.MessageAttributes[k] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	_, err := s.svc.SNS.Publish(context.Background(), in)
	require.NoError(s.t, err)
}

// wrappingTopic is a producer's own topic subscribed to the sandbox
// command queue without raw delivery, so SNS wraps every body in its
// notification JSON.
func (s *stack) wrappingTopic() string {
	ctx := context.Background()
	created, err := s.svc.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(s.cfg.Prefix + "-producer")})
	require.NoError(s.t, err)
	topic := aws.ToString(created.TopicArn)
	s.t.Cleanup(func() { _, _ = s.svc.SNS.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(topic)}) })
	queueARN, err := transport.QueueARN(ctx, s.svc.SQS, s.queueURL)
	require.NoError(s.t, err)
	_, err = s.svc.SNS.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(topic), Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": "false"},
	})
	require.NoError(s.t, err)
	return topic
}

// TestWireForms_bare_payload_gives_the_same_outcome_as_the_envelope
// drives every sandbox command through each wire form and requires the
// same events, rejections and table state as the envelope gives.
func TestWireForms_bare_payload_gives_the_same_outcome_as_the_envelope(t *testing.T) {
	outcomes := map[string][]string{}
	for _, form := range []string{"envelope_on_sqs", "bare_payload_on_sqs", "bare_payload_on_the_command_topic", "bare_payload_through_a_topic_without_raw_delivery"} {
		t.Run(form, func(t *testing.T) {
			s := newStack(t)
			send := producerFor(s, form)
			s.serve(service.ServeOptions{})
			outcomes[form] = sandboxLifecycle(t, s, send, form != "envelope_on_sqs")
		})
	}
	want := outcomes["envelope_on_sqs"]
	require.NotEmpty(t, want)
	for name, got := range outcomes {
		assert.Equal(t, want, got, "%s gives what the envelope gives", name)
	}
}

// sandboxLifecycle sends each sandbox command once (and one rejection)
// and summarises the events and the table it leaves.
func sandboxLifecycle(t *testing.T, s *stack, send producer, bare bool) []string {
	var summary []string
	step := func(typ messages.Type, payload any, want messages.Type) service.TapEvent {
		t.Helper()
		id := send(s, uuid.NewString(), typ, payload)
		ev := s.eventFor(id, want)
		wantCorrelation := id
		if bare {
			wantCorrelation = "corr-" + id
		}
		assert.Equal(t, wantCorrelation, ev.Envelope.CorrelationID, "correlation of %s", typ)
		var p map[string]any
		require.NoError(t, json.Unmarshal(ev.Envelope.Payload, &p))
		line := string(want)
		for _, k := range []string{"track_id", "reason", "added", "staled"} {
			if v, ok := p[k]; ok {
				if list, isList := v.([]any); isList {
					v = len(list)
				}
				line += fmt.Sprintf(" %s=%v", k, v)
			}
		}
		summary = append(summary, line)
		return ev
	}
	step(messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
		{ExternalID: "ext-1", Name: "one", LabDurationHours: 4}, {ExternalID: "ext-2", Name: "two", LabDurationHours: 4},
	}}, messages.SandboxSynced)
	first := payloadOf[messages.SandboxAllocatedPayload](t, step(messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-A"}, messages.SandboxAllocated))
	step(messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: first.SandboxID, TrackID: "track-B"}, messages.SandboxDeletionRejected)
	step(messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: first.SandboxID, TrackID: "track-A"}, messages.SandboxDeletionMarked)
	step(messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: first.SandboxID}, messages.SandboxDeleted)
	_, found := s.sandbox(first.SandboxID)
	assert.False(t, found, "the cleaned-up sandbox is gone")

	second := payloadOf[messages.SandboxAllocatedPayload](t, step(messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-C"}, messages.SandboxAllocated))
	s.clock.Shift(5 * time.Hour)
	step(messages.SandboxExpire, messages.SandboxExpirePayload{SandboxID: second.SandboxID}, messages.SandboxExpired)

	var table []string
	for _, status := range store.SandboxStatuses {
		for _, sb := range s.inStatus(status) {
			table = append(table, sb.Status)
		}
	}
	sort.Strings(table)
	return append(summary, "table: "+strings.Join(table, ","))
}

// TestWireForms_resend_with_the_same_id_attribute_applies_once: a bare
// command resent with the same id attribute replays the first outcome;
// with another ID it is a new command; with none, SQS's message ID is its
// ID.
func TestWireForms_resend_with_the_same_id_attribute_applies_once(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.sync("ext-1")

	grow := messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
		{ExternalID: "ext-1", Name: "name-ext-1", LabDurationHours: 4}, {ExternalID: "ext-2", Name: "name-ext-2", LabDurationHours: 4},
	}}
	id := uuid.NewString()
	s.sendBare(id, messages.SandboxSync, grow)
	s.sendBare(id, messages.SandboxSync, grow)
	events := s.collect(60*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, id)) >= 2 })
	both := causedBy(events, id)
	for _, ev := range both {
		assert.Equal(t, messages.DerivedID(id, messages.SandboxSynced, ""), ev.MessageID)
		assert.JSONEq(t, string(both[0].Envelope.Payload), string(ev.Envelope.Payload), "the resend replays the first outcome")
	}
	assert.Len(t, payloadOf[messages.SandboxSyncedPayload](t, both[0]).Added, 1)
	assert.NotNil(t, s.audit(id), "one recorded outcome under the id attribute")

	again := uuid.NewString()
	s.sendBare(again, messages.SandboxSync, grow)
	assert.Empty(t, payloadOf[messages.SandboxSyncedPayload](t, s.eventFor(again, messages.SandboxSynced)).Added, "another ID is a new command: nothing left to add")

	sent, err := s.svc.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(s.queueURL), MessageBody: aws.String(`{"track_id":"track-noid"}`),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(messages.SandboxAllocate))},
		},
	})
	require.NoError(t, err)
	ev := s.eventFor(aws.ToString(sent.MessageId), messages.SandboxAllocated)
	assert.Equal(t, aws.ToString(sent.MessageId), ev.Envelope.CorrelationID, "no correlation attribute: the command ID stands in")
}

// lines are the buffered log lines at level.
func (b *syncBuffer) lines(level string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, "level="+level) {
			out = append(out, l)
		}
	}
	return out
}

// captureLogs sends the stack's log to a buffer; call it before serve.
func (s *stack) captureLogs() *syncBuffer {
	b := &syncBuffer{}
	s.svc.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return b
}

// TestPoison_in_either_form_is_dead_lettered_with_its_reason_and_logged:
// bare payloads that cannot be applied, and an envelope of an unknown
// schema version, each land in the DLQ at once with a reason naming the
// problem, and a WARN line names the message; valid commands behind them
// are handled.
func TestPoison_in_either_form_is_dead_lettered_with_its_reason_and_logged(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Concurrency = 1 })
	logs := s.captureLogs()
	s.serve(service.ServeOptions{})

	allocate := string(messages.SandboxAllocate)
	cases := []struct {
		Name   string
		Body   string
		Type   string
		Reason string
	}{
		{Name: "bare_bad_json", Body: `{"track_id": `, Type: allocate, Reason: "invalid body: not a JSON object"},
		{Name: "bare_unknown_type", Body: `{"track_id":"t1"}`, Type: "sandbox.teleport", Reason: `unknown command type "sandbox.teleport"`},
		{Name: "bare_without_type", Body: `{"track_id":"t2"}`, Reason: "no type attribute"},
		{Name: "bare_missing_field", Body: `{}`, Type: allocate, Reason: "sandbox.allocate: invalid track_id: required"},
		{Name: "bare_wrong_field_type", Body: `{"track_id":["t"]}`, Type: allocate, Reason: "sandbox.allocate: invalid track_id: want a string, got array"},
		{Name: "bare_oversized", Body: fmt.Sprintf(`{"track_id":%q}`, strings.Repeat("a", 64*1024)), Type: allocate, Reason: "sandbox.allocate: invalid track_id"},
		{Name: "envelope_unknown_schema", Body: `{"id":"e-99","type":"sandbox.allocate","schema":99,"payload":{"track_id":"t"}}`, Reason: "invalid schema: version 99 is unknown"},
		{Name: "envelope_missing_field", Body: `{"id":"e-1","type":"sandbox.allocate","schema":1,"payload":{}}`, Reason: "sandbox.allocate: invalid track_id: required"},
	}
	ids := map[string]string{}
	for _, c := range cases {
		attrs := map[string]string{}
		if c.Type != "" {
			attrs[messages.TypeAttribute] = c.Type
		}
		id := uuid.NewString()
		attrs[messages.IDAttribute] = id
		ids[c.Name] = id
		s.sendRaw(c.Body, attrs)
	}
	valid := uuid.NewString()
	s.sendBare(valid, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{{ExternalID: "ext-1", Name: "one", LabDurationHours: 1}}})
	s.eventFor(valid, messages.SandboxSynced)

	letters := s.deadLetters(len(cases))
	warnings := logs.lines("WARN")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var found bool
			for _, l := range letters {
				if l.Body == c.Body {
					found = true
					assert.Contains(t, l.Reason, c.Reason)
				}
			}
			assert.True(t, found, "%s is in the DLQ", c.Name)
			var logged bool
			for _, w := range warnings {
				// The id attribute is the message's ID in transit.
				logged = logged || strings.Contains(w, "poison") && strings.Contains(w, ids[c.Name])
			}
			assert.True(t, logged, "a WARN line names %s; warnings: %v", c.Name, warnings)
		})
	}
	assert.Equal(t, 1, s.auditCount(), "only the valid sync is recorded")
}

// TestServe_without_a_provider: transit serves every domain with no
// sandbox provider configured, says so once at start, and answers a
// cleanup with sandbox.deletion-failed (provider_not_configured) leaving
// the sandbox as it was.
func TestServe_without_a_provider(t *testing.T) {
	var called atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called.Add(1) }))
	t.Cleanup(hook.Close)
	s := newStack(t, func(c *config.Config) { c.ProviderURL = "" })
	logs := s.captureLogs()
	s.serve(service.ServeOptions{})

	added := s.sync("ext-1")
	require.Len(t, added, 1)
	alloc := uuid.NewString()
	s.send(alloc, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-A"})
	sbID := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(alloc, messages.SandboxAllocated)).SandboxID
	mark := uuid.NewString()
	s.send(mark, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: sbID, TrackID: "track-A"})
	s.eventFor(mark, messages.SandboxDeletionMarked)

	cleanup := uuid.NewString()
	s.send(cleanup, messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: sbID})
	failed := payloadOf[messages.SandboxDeletionFailedPayload](t, s.eventFor(cleanup, messages.SandboxDeletionFailed))
	assert.Equal(t, messages.ReasonProviderNotConfigured, failed.Reason)
	assert.Equal(t, 0, failed.DeletionRetryCount)
	sb, found := s.sandbox(sbID)
	require.True(t, found)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status, "the sandbox is left as it was")
	assert.Equal(t, 0, sb.DeletionRetryCount)
	assert.Empty(t, sb.LastDeletionError)

	timer := uuid.NewString()
	s.send(timer, messages.TimerCreate, messages.TimerCreatePayload{TimerID: "no-provider", ExecuteAt: time.Now().Add(time.Second), Callback: hook.URL})
	s.eventFor(timer, messages.TimerCreated)
	fired := s.collect(60*time.Second, func(evs []service.TapEvent) bool {
		for _, e := range evs {
			if e.Envelope.Type == messages.TimerFired {
				return true
			}
		}
		return false
	})
	require.NotEmpty(t, fired)
	assert.Equal(t, int32(1), called.Load(), "the timer's callback ran")

	ev := s.publish("us-east-1", "requests", 1, s.publishLambdaLayer("us-east-1", "requests"))
	assert.Equal(t, messages.LayerPublishedEvent, ev.Envelope.Type)

	var said []string
	for _, w := range logs.lines("WARN") {
		if strings.Contains(w, "no sandbox provider configured") {
			said = append(said, w)
		}
	}
	assert.Len(t, said, 1, "one WARN line at start says the provider is missing")
}
