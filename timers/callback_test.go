package timers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/store"
	"transit/timers"
)

func timer(callback string) store.Timer {
	t := store.NewTimer(3, "order-7", "5f0c7e52-0000-4000-8000-000000000001", time.Now(), time.Now())
	t.CallbackURL, t.Payload, t.CallbackTimeout, t.Attempts = callback, `{"order":7}`, 1, 1
	return t
}

func newCaller(t *testing.T) (*timers.Caller, *gochannel.GoChannel) {
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 4, Persistent: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = ps.Close() })
	return timers.NewCaller(ps, ps), ps
}

func TestCall_posts_payload_with_idempotency_key(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, body = r, string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	c, _ := newCaller(t)
	answer, err := c.Call(context.Background(), timer(srv.URL+"/hook"))
	require.NoError(t, err)
	assert.Nil(t, answer.Reschedule)
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "/hook", got.URL.Path)
	assert.JSONEq(t, `{"order":7}`, body)
	assert.Equal(t, "5f0c7e52-0000-4000-8000-000000000001", got.Header.Get(timers.IdempotencyHeader))
	assert.Equal(t, "order-7", got.Header.Get("Transit-Timer-Id"))
	assert.Equal(t, "2", got.Header.Get("Transit-Attempt"), "the second call after one failure")
	assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
}

func TestCall_an_answer_may_reschedule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"execute_at":"2030-05-06T07:08:09Z"}`)
	}))
	defer srv.Close()
	c, _ := newCaller(t)
	answer, err := c.Call(context.Background(), timer(srv.URL))
	require.NoError(t, err)
	require.NotNil(t, answer.Reschedule)
	assert.True(t, answer.Reschedule.Equal(time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)))
}

func TestCall_failures(t *testing.T) {
	tests := []struct {
		Name    string
		Handler http.HandlerFunc
		Want    string
	}{
		{"server_error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down for maintenance", 503) }, "503"},
		{"redirect_not_followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://example.com/", http.StatusFound)
		}, "302"},
		{"slower_than_the_timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, "deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			srv := httptest.NewServer(tc.Handler)
			defer srv.Close()
			c, _ := newCaller(t)
			_, err := c.Call(context.Background(), timer(srv.URL))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.Want)
		})
	}
}

// A failed call's error names the callback's host, never its path or
// query, which may hold a secret: it is recorded on the timer and traced.
func TestCall_failure_hides_the_callback_path(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL
	srv.Close() // refused from now on
	c, _ := newCaller(t)
	_, err := c.Call(context.Background(), timer(url+"/hooks/s3cr3t-token?key=k3y"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), strings.TrimPrefix(url, "http://"))
	assert.NotContains(t, err.Error(), "s3cr3t-token")
	assert.NotContains(t, err.Error(), "k3y")
}

func TestCall_internal_targets_send_the_payload_as_a_message(t *testing.T) {
	c, ps := newCaller(t)
	for _, target := range []string{"sqs://billing-commands", "sns://billing-events"} {
		name := target[len("sqs://"):]
		msgs, err := ps.Subscribe(context.Background(), name)
		require.NoError(t, err)
		tm := timer(target)
		tm.Payload = `{"type":"sandbox.sync","payload":{"inventory":[]}}`
		_, err = c.Call(context.Background(), tm)
		require.NoError(t, err)
		var msg *message.Message
		select {
		case msg = <-msgs:
		case <-time.After(time.Second):
			t.Fatalf("nothing sent to %s", name)
		}
		msg.Ack()
		assert.Equal(t, tm.UUID, msg.UUID, "the timer's uuid is the message ID")
		assert.JSONEq(t, tm.Payload, string(msg.Payload))
		assert.Equal(t, "sandbox.sync", msg.Metadata.Get(messages.TypeAttribute))
	}
}
