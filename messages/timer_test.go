package messages_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

func validTimer() map[string]any {
	return map[string]any{
		"timer_id":   "order-42:reminder",
		"execute_at": "2030-01-02T03:04:05.250Z",
		"callback":   "https://hooks.example.com/due",
		"payload":    map[string]any{"order": 42},
	}
}

func TestDecode_timer_create_fills_defaults(t *testing.T) {
	cmd, err := messages.Decode(envelope(t, "c-1", messages.TimerCreate, validTimer()), messages.Meta{})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.TimerCreatePayload)
	assert.Equal(t, "order-42:reminder", p.TimerID)
	assert.True(t, p.ExecuteAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 250e6, time.UTC)))
	assert.JSONEq(t, `{"order":42}`, string(p.Payload))
	assert.Equal(t, 10*time.Second, time.Duration(p.CallbackTimeout))
	assert.Equal(t, messages.DefaultRetryPolicy, *p.RetryPolicy)
}

func TestDecode_timer_create_accepts_internal_targets_and_a_policy(t *testing.T) {
	for _, cb := range []string{"sqs://transit-sandbox-commands", "sns://billing_events", "http://127.0.0.1:8080/x"} {
		body := validTimer()
		body["callback"] = cb
		body["callback_timeout"] = "1.5s"
		body["retry_policy"] = map[string]any{"max_attempts": 3, "initial_interval": "200ms", "multiplier": 3, "max_interval": "1s"}
		cmd, err := messages.Decode(envelope(t, "c-1", messages.TimerCreate, body), messages.Meta{})
		require.NoError(t, err, cb)
		p := cmd.Payload.(*messages.TimerCreatePayload)
		assert.Equal(t, 1500*time.Millisecond, time.Duration(p.CallbackTimeout))
		assert.Equal(t, messages.RetryPolicy{MaxAttempts: 3, InitialInterval: messages.Duration(200 * time.Millisecond),
			Multiplier: 3, MaxInterval: messages.Duration(time.Second), MaxTotalDuration: messages.DefaultRetryPolicy.MaxTotalDuration}, *p.RetryPolicy)
	}
}

func TestDecode_timer_create_rejects_bad_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_timer_id", map[string]any{"timer_id": ""}, "timer_id"},
		{"expression_shaped_id", map[string]any{"timer_id": "a = :b OR #c"}, "timer_id"},
		{"no_execute_at", map[string]any{"execute_at": nil}, "execute_at"},
		{"far_future", map[string]any{"execute_at": "2999-01-01T00:00:00Z"}, "execute_at"},
		{"ftp_callback", map[string]any{"callback": "ftp://x/y"}, "callback"},
		{"http_without_host", map[string]any{"callback": "http:///path"}, "callback"},
		{"sqs_bad_name", map[string]any{"callback": "sqs://a/b"}, "callback"},
		{"sns_no_name", map[string]any{"callback": "sns://"}, "callback"},
		{"timeout_too_long", map[string]any{"callback_timeout": "2m"}, "callback_timeout"},
		{"timeout_not_a_duration", map[string]any{"callback_timeout": 5}, "payload"},
		{"payload_too_large", map[string]any{"payload": strings.Repeat("x", 70<<10)}, "payload"},
		{"zero_attempts_is_default_but_negative_is_not", map[string]any{"retry_policy": map[string]any{"max_attempts": -1}}, "retry_policy.max_attempts"},
		{"multiplier_below_one", map[string]any{"retry_policy": map[string]any{"multiplier": 0.5}}, "retry_policy.multiplier"},
		{"max_below_initial", map[string]any{"retry_policy": map[string]any{"initial_interval": "10s", "max_interval": "1s"}}, "retry_policy.max_interval"},
		{"unknown_field", map[string]any{"cron": "* * *"}, "cron"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			body := validTimer()
			for k, v := range tc.Set {
				body[k] = v
			}
			_, err := messages.Decode(envelope(t, "c-1", messages.TimerCreate, body), messages.Meta{})
			var ie *messages.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.WantField, ie.Field, err.Error())
		})
	}
}

func TestDecode_timer_due_needs_its_firing(t *testing.T) {
	ok := map[string]any{"shard": 3, "timer_id": "t-1", "timer_uuid": "9b2c", "execute_at": "2030-01-01T00:00:00Z"}
	_, err := messages.Decode(envelope(t, "d-1", messages.TimerDue, ok), messages.Meta{})
	require.NoError(t, err)
	for field, bad := range map[string]any{"shard": -1, "timer_uuid": "", "execute_at": nil, "timer_id": "x y"} {
		body := map[string]any{}
		for k, v := range ok {
			body[k] = v
		}
		body[field] = bad
		_, err := messages.Decode(envelope(t, "d-1", messages.TimerDue, body), messages.Meta{})
		assert.True(t, messages.IsInvalid(err), field)
	}
}

func TestRetryPolicy_backs_off_until_spent(t *testing.T) {
	p := messages.RetryPolicy{MaxAttempts: 5, InitialInterval: messages.Duration(time.Second), Multiplier: 2,
		MaxInterval: messages.Duration(3 * time.Second), MaxTotalDuration: messages.Duration(time.Hour)}
	first := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	now := first
	for attempts := 1; ; attempts++ {
		next, ok := p.Next(attempts, first, now)
		if !ok {
			assert.Equal(t, 5, attempts, "spent after max attempts")
			break
		}
		waits = append(waits, next.Sub(now))
		now = next
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}, waits)

	p.MaxTotalDuration = messages.Duration(2500 * time.Millisecond)
	_, ok := p.Next(2, first, first.Add(time.Second))
	assert.False(t, ok, "a retry starting after the total duration is not made")
}
