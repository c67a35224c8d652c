package timers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/store"
	"transit/tracing"
	"transit/transport"
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

// Call runs t's callback once, within t's callback timeout, in a span
// under ctx's (see start).
func (c *Caller) Call(ctx context.Context, t store.Timer) (_ Answer, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t.CallbackTimeout*float64(time.Second)))
	defer cancel()
	scheme, name, _ := strings.Cut(t.CallbackURL, "://")
	ctx, span := start(ctx, t, scheme, name)
	defer func() { tracing.End(span, err) }()
	switch scheme {
	case messages.CallbackSQS:
		return Answer{}, c.send(ctx, c.queues, name, t)
	case messages.CallbackSNS:
		return Answer{}, c.send(ctx, c.topics, name, t)
	}
	return c.post(ctx, t)
}

// start starts the span of t's callback, "timer callback", with the
// provider of ctx's span (the timer.due delivery's; none records when
// tracing is off): a producer span for a message, whose traceparent
// attribute carries it, a client span for an HTTP POST, whose traceparent
// header does.
func start(ctx context.Context, t store.Timer, scheme, name string) (context.Context, trace.Span) {
	kind := trace.SpanKindProducer
	attrs := []attribute.KeyValue{attribute.String("transit.timer.id", t.ID), attribute.Int("transit.timer.attempt", t.Attempts+1)}
	switch scheme {
	case messages.CallbackSQS:
		attrs = append(attrs, tracing.SQS, semconv.MessagingDestinationName(name), semconv.MessagingMessageID(t.UUID))
	case messages.CallbackSNS:
		attrs = append(attrs, tracing.SNS, semconv.MessagingDestinationName(name), semconv.MessagingMessageID(t.UUID))
	default:
		kind = trace.SpanKindClient
		attrs = append(attrs, semconv.HTTPRequestMethodPost)
		if u, err := url.Parse(t.CallbackURL); err == nil {
			// The host only: a callback URL's path or query may hold a secret.
			attrs = append(attrs, semconv.ServerAddress(u.Hostname()))
		}
	}
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracing.ScopeName)
	return tracer.Start(ctx, "timer callback", trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

func (c *Caller) post(ctx context.Context, t store.Timer) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.CallbackURL, strings.NewReader(payloadOf(t)))
	if err != nil {
		return Answer{}, fmt.Errorf("callback request: %w", hostOnly(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyHeader, t.UUID)
	req.Header.Set("Transit-Timer-Id", t.ID)
	req.Header.Set("Transit-Attempt", strconv.Itoa(t.Attempts+1))
	tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("callback: %w", hostOnly(err))
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
	tracing.Inject(ctx, msg.Metadata, transport.MaxMetadata)
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

// hostOnly cuts the URL an HTTP error quotes down to its scheme and host:
// the error reaches the timer's record, its events and its trace, and a
// callback URL's path or query may hold a secret.
func hostOnly(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	redacted := *ue
	if u, perr := url.Parse(ue.URL); perr == nil {
		redacted.URL = u.Scheme + "://" + u.Host
	} else {
		redacted.URL = "(callback URL)"
	}
	return &redacted
}
