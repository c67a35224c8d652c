package router_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/router"
	"transit/transport"
)

// scriptedHandler fails as told, then emits one allocation event.
type scriptedHandler struct {
	calls atomic.Int32
	fail  func(call int32) error
}

func (h *scriptedHandler) Handle(_ context.Context, cmd messages.Command) ([]messages.Out, error) {
	n := h.calls.Add(1)
	if h.fail != nil {
		if err := h.fail(n); err != nil {
			return nil, err
		}
	}
	return []messages.Out{{Type: messages.SandboxAllocated, At: time.Unix(100, 0),
		Payload: messages.SandboxAllocatedPayload{TrackID: cmd.Payload.(*messages.SandboxAllocatePayload).TrackID}}}, nil
}

type harness struct {
	in     *gochannel.GoChannel
	out    <-chan *message.Message
	dlq    <-chan *message.Message
	cfg    router.Config
	handle *scriptedHandler
}

// newHarness runs the real middleware chain and codec on the in-memory
// pub/sub: what router.New and router.Register build, minus AWS.
func newHarness(t *testing.T, h *scriptedHandler, configure ...func(*router.Config)) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var logger watermill.LoggerAdapter = watermill.NopLogger{}
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 16}, logger)
	cfg := router.Config{
		Stack:          transport.Stack{Prefix: "test"},
		CommandTimeout: time.Second,
		CloseTimeout:   time.Second,
		Retry:          middleware.Retry{MaxRetries: 3, InitialInterval: time.Millisecond, Multiplier: 2},
	}
	for _, c := range configure {
		c(&cfg)
	}
	if cfg.Log != nil {
		logger = watermill.NewSlogLogger(cfg.Log)
	}
	out, err := ps.Subscribe(ctx, transport.ByType)
	require.NoError(t, err)
	dlq, err := ps.Subscribe(ctx, cfg.Stack.DeadLetterQueue(messages.Sandbox))
	require.NoError(t, err)
	r, err := router.New(cfg, logger)
	require.NoError(t, err)
	require.NoError(t, router.Register(r, cfg, messages.Sandbox, ps, ps, h))
	go func() { _ = r.Run(ctx) }()
	<-r.Running()
	return &harness{in: ps, out: out, dlq: dlq, cfg: cfg, handle: h}
}

func (h *harness) send(t *testing.T, body string, attrs map[string]string) string {
	id := uuid.NewString()
	msg := message.NewMessage(id, []byte(body))
	for k, v := range attrs {
		msg.Metadata.Set(k, v)
	}
	require.NoError(t, h.in.Publish(h.cfg.Stack.CommandQueue(messages.Sandbox), msg))
	return id
}

func (h *harness) sendAllocate(t *testing.T) string {
	body, err := messages.NewCommand(uuid.NewString(), messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}, time.Now())
	require.NoError(t, err)
	return h.send(t, string(body), nil)
}

func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m := <-ch:
		m.Ack()
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
		return nil
	}
}

func nothing(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected message %s", m.Payload)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestRouter_transient_errors_are_retried(t *testing.T) {
	h := newHarness(t, &scriptedHandler{fail: func(n int32) error {
		if n <= 2 {
			return errors.New("throttled")
		}
		return nil
	}})
	h.sendAllocate(t)
	ev := receive(t, h.out)
	assert.Equal(t, string(messages.SandboxAllocated), ev.Metadata.Get(messages.TypeAttribute))
	assert.EqualValues(t, 3, h.handle.calls.Load(), "two failures, then success")
	nothing(t, h.dlq)
}

func TestRouter_panics_are_recovered_and_retried(t *testing.T) {
	h := newHarness(t, &scriptedHandler{fail: func(n int32) error {
		if n == 1 {
			panic("boom")
		}
		return nil
	}})
	h.sendAllocate(t)
	receive(t, h.out)
	assert.EqualValues(t, 2, h.handle.calls.Load())
}

func TestRouter_permanent_failures_go_to_the_DLQ_once(t *testing.T) {
	cases := []struct {
		Name       string
		Body       string
		Attrs      map[string]string
		Fail       error
		Reason     string
		WantCalled bool
	}{
		{Name: "malformed_json", Body: `{"type":`, Reason: "invalid body: not a JSON object"},
		{Name: "unknown_type", Body: `{"type":"timer.explode","payload":{}}`, Reason: "unknown command type"},
		{Name: "command_of_another_domain", Body: `{"type":"timer.delete","payload":{"timer_id":"t-1"}}`, Reason: "is not a sandbox command"},
		{Name: "handler_says_invalid", Body: `{"type":"sandbox.allocate","payload":{"track_id":"t"}}`,
			Fail: &messages.InvalidError{Field: "track_id", Reason: "not on this pool"}, Reason: "not on this pool", WantCalled: true},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t, &scriptedHandler{fail: func(int32) error { return c.Fail }})
			id := h.send(t, c.Body, c.Attrs)
			dead := receive(t, h.dlq)
			assert.Equal(t, id, dead.UUID, "the original message, unchanged")
			assert.Equal(t, c.Body, string(dead.Payload))
			assert.Contains(t, dead.Metadata.Get(middleware.ReasonForPoisonedKey), c.Reason)
			nothing(t, h.out)
			want := int32(0)
			if c.WantCalled {
				want = 1
			}
			assert.Equal(t, want, h.handle.calls.Load(), "never retried")
		})
	}
}

func TestRouter_events_carry_envelope_and_routing_attributes(t *testing.T) {
	h := newHarness(t, &scriptedHandler{})
	body, err := messages.NewCommand("cmd-1", messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}, time.Now())
	require.NoError(t, err)
	h.send(t, string(body), nil)
	ev := receive(t, h.out)
	assert.Equal(t, messages.DerivedID("cmd-1", messages.SandboxAllocated, ""), ev.UUID)
	assert.Equal(t, "cmd-1", ev.Metadata.Get(messages.CorrelationAttribute))
	assert.Len(t, ev.Metadata, 2, "only what routing and filtering need travels as attributes")
	assert.JSONEq(t, `{"id":"`+ev.UUID+`","type":"sandbox.allocated","correlation_id":"cmd-1","causation_id":"cmd-1",
		"occurred_at":"1970-01-01T00:01:40Z","schema":1,
		"payload":{"sandbox_id":"","external_id":"","name":"","track_id":"track-1","idempotency_key":"","allocated_at":0,"expires_at":0}}`,
		string(ev.Payload))
}
