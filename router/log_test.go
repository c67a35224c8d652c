package router_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/router"
)

// syncBuffer is a log sink the router's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		lines = append(lines, line)
	}
	return lines
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every line about a message names it (domain, message ID, type,
// correlation and causation), whichever way its delivery went, and no line
// carries a payload.
func TestRouter_log_lines_name_their_message(t *testing.T) {
	var sink syncBuffer
	const secret = "sk-do-not-log-3f9a"
	h := newHarness(t, &scriptedHandler{fail: func(n int32) error {
		switch {
		case n <= 2: // the first command: two transient failures, then applied
			return errors.New("throttled")
		case n == 3:
			return nil
		default: // the second command: fails until its retries run out
			return errors.New("provider down")
		}
	}}, func(c *router.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})

	// Lines name a decoded command by its ID, not the transport's.
	allocate := func() string {
		id := uuid.NewString()
		body, err := messages.NewCommand(id, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}, time.Now())
		require.NoError(t, err)
		h.send(t, string(body), nil)
		return id
	}
	retried := allocate()
	receive(t, h.out)
	failed := allocate()
	require.Eventually(t, func() bool { return h.handle.calls.Load() >= 3+4 }, 5*time.Second, 10*time.Millisecond)
	poisoned := uuid.NewString()
	body, err := messages.NewCommand(poisoned, messages.SecretStore,
		messages.SecretStorePayload{OrgID: "org-1", SecretID: "s-1", SecretType: "openai_key", Value: secret, Actor: "system"}, time.Now())
	require.NoError(t, err)
	h.send(t, string(body), map[string]string{messages.TypeAttribute: string(messages.SecretStore)})
	receive(t, h.dlq)

	const failedLine = "delivery failed; it will be delivered again"
	require.Eventually(t, func() bool { return bytes.Contains([]byte(sink.String()), []byte(failedLine)) },
		5*time.Second, 20*time.Millisecond)

	byMessage := map[string][]string{}
	for _, line := range sink.lines(t) {
		id, _ := line["message_id"].(string)
		if id == "" {
			assert.NotContains(t, line, "message_uuid", "a line about a message without its fields: %v", line)
			continue
		}
		for _, field := range []string{"domain", "type", "correlation_id", "causation_id"} {
			assert.Contains(t, line, field, "line %v", line)
		}
		assert.Equal(t, "sandbox", line["domain"])
		assert.NotEmpty(t, line["correlation_id"], "line %v", line)
		byMessage[id] = append(byMessage[id], line["msg"].(string))
	}

	assert.Len(t, byMessage[retried], 2, "two retries: %v", byMessage[retried])
	assert.Contains(t, byMessage[failed], failedLine)
	assert.Equal(t, []string{"poison message sent to the DLQ"}, byMessage[poisoned])
	assert.NotContains(t, sink.String(), secret)
	assert.NotContains(t, sink.String(), "Handler returned error", "Watermill's line, without the message's fields")
}
