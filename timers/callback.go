package timers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"transit/messages"
	"transit/store"
)

// IdempotencyHeader carries the timer's uuid on every HTTP callback: the
// same for each retry of one firing, new when the timer is re-created or
// rescheduled, so a receiver can drop a call it has already acted on.
const IdempotencyHeader = "Idempotency-Key"

// Answer is what a successful callback may ask for.
type Answer struct {
	// Reschedule, when set, keeps the timer and makes it due again then.
	Reschedule *time.Time
}

// answerBody is the optional JSON an HTTP callback answers with.
type answerBody struct {
	ExecuteAt *time.Time `json:"execute_at"`
}

// Caller runs timer callbacks: an HTTP POST, or a message to one of the
// account's SQS queues or SNS topics (sqs://name, sns://name).
type Caller struct {
	http   *http.Client
	queues message.Publisher
	topics message.Publisher
}

// NewCaller sends internal targets through queues and topics, which take
// a queue or topic name.
func NewCaller(queues, topics message.Publisher) *Caller {
	if queues == nil || topics == nil {
		panic("timers: NewCaller needs an SQS and an SNS publisher")
	}
	// Per-call timeouts come from each timer; redirects are not followed,
	// since a callback URL names exactly where the payload may go.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Caller{http: client, queues: queues, topics: topics}
}

// Call runs t's callback once, within t's callback timeout.
func (c *Caller) Call(ctx context.Context, t store.Timer) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t.CallbackTimeout*float64(time.Second)))
	defer cancel()
	scheme, name, _ := strings.Cut(t.CallbackURL, "://")
	switch scheme {
	case messages.CallbackSQS:
		return Answer{}, c.send(ctx, c.queues, name, t)
	case messages.CallbackSNS:
		return Answer{}, c.send(ctx, c.topics, name, t)
	}
	return c.post(ctx, t)
}

func (c *Caller) post(ctx context.Context, t store.Timer) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.CallbackURL, strings.NewReader(payloadOf(t)))
	if err != nil {
		return Answer{}, fmt.Errorf("callback request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyHeader, t.UUID)
	req.Header.Set("Transit-Timer-Id", t.ID)
	req.Header.Set("Transit-Attempt", strconv.Itoa(t.Attempts+1))
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("callback: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Answer{}, fmt.Errorf("callback answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Answer{}, fmt.Errorf("callback answered %s: %s", resp.Status, truncate(body, 256))
	}
	var a answerBody
	if len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &a) == nil && a.ExecuteAt != nil {
		return Answer{Reschedule: a.ExecuteAt}, nil
	}
	return Answer{}, nil
}

// send publishes the payload as a message body. Its message ID is the
// timer's uuid, so a transit command without an ID of its own is
// deduplicated across retries; a payload that names its type carries it
// as the type attribute, for SNS filter policies.
func (c *Caller) send(ctx context.Context, pub message.Publisher, name string, t store.Timer) error {
	payload := payloadOf(t)
	msg := message.NewMessage(t.UUID, []byte(payload))
	msg.SetContext(ctx)
	var typed struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(payload), &typed) == nil && typed.Type != "" {
		msg.Metadata.Set(messages.TypeAttribute, typed.Type)
	}
	if err := pub.Publish(name, msg); err != nil {
		return fmt.Errorf("callback to %s: %w", t.CallbackURL, err)
	}
	return nil
}

func payloadOf(t store.Timer) string {
	if t.Payload == "" {
		return "null"
	}
	return t.Payload
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
