package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Schema is the envelope version written on every message transit produces.
const Schema = 1

// Message attributes. SQS allows 10 per message and the DLQ path adds four
// of its own, so only what routing and filtering need travels here; the
// rest of the envelope rides in the body.
const (
	TypeAttribute        = "type"
	CorrelationAttribute = "correlation_id"
)

// Envelope is the JSON body of every command and event.
type Envelope struct {
	// ID identifies the message. For a command it is the key of its
	// recorded outcome; when a producer leaves it empty the transport's
	// message ID is used.
	ID            string          `json:"id,omitempty"`
	Type          Type            `json:"type"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	OccurredAt    time.Time       `json:"occurred_at"`
	Schema        int             `json:"schema,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

// Command is a decoded, validated inbound command.
type Command struct {
	ID            string
	Type          Type
	CorrelationID string
	OccurredAt    time.Time
	// Payload is a pointer to the type's payload struct, e.g. *SandboxAllocate.
	Payload any
}

// Out is a message a handler produces: an event for its domain's topic or a
// command for a domain's queue.
type Out struct {
	Type    Type
	Payload any
	// At is when the outcome it reports happened; a replay carries the
	// recorded time so a re-emitted event is the same message.
	At time.Time
	// Key, when set, makes the message ID unique per key for the same
	// causing command and type (a sweep's fan-out produces one per sandbox).
	Key string
	// Command sends it to its domain's command queue instead of the event
	// topic (a sweep's fan-out).
	Command bool
}

// idNamespace roots every derived message ID.
var idNamespace = uuid.MustParse("6f1c5e0a-4b5e-4c39-9d1e-7a0f3f5f8b21")

// DerivedID is the ID of a message of type t caused by command causeID:
// the same inputs always give the same UUIDv5, so a redelivered command
// re-emits events that downstream consumers can deduplicate.
func DerivedID(causeID string, t Type, key string) string {
	name := causeID + "\x00" + string(t)
	if key != "" {
		name += "\x00" + key
	}
	return uuid.NewSHA1(idNamespace, []byte(name)).String()
}

// MaxIDLength bounds message and correlation IDs; they become parts of
// DynamoDB keys.
const MaxIDLength = 128

// Decode parses a command body. fallbackID is used when the body has no ID
// (the transport's message ID); attrType, when non-empty, must agree with
// the body. Every failure is an *InvalidError: the message can never
// succeed and belongs in the DLQ.
func Decode(body []byte, fallbackID string, attrType string) (Command, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return Command{}, invalid("body", "not a JSON envelope: %v", err)
	}
	if env.Type == "" {
		env.Type = Type(attrType)
	}
	if attrType != "" && Type(attrType) != env.Type {
		return Command{}, invalid("type", "attribute %q disagrees with body %q", attrType, env.Type)
	}
	spec, ok := commands[env.Type]
	if !ok {
		return Command{}, &InvalidError{Field: "type", Reason: fmt.Sprintf("unknown command type %q", env.Type), Unknown: true}
	}
	if env.ID == "" {
		env.ID = fallbackID
	}
	if err := checkID("id", env.ID); err != nil {
		return Command{}, err
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.ID
	}
	if err := checkID("correlation_id", env.CorrelationID); err != nil {
		return Command{}, err
	}
	if len(env.Payload) == 0 {
		env.Payload = json.RawMessage("{}")
	}
	payload := spec.new()
	pdec := json.NewDecoder(bytes.NewReader(env.Payload))
	pdec.DisallowUnknownFields()
	if err := pdec.Decode(payload); err != nil {
		return Command{}, invalid("payload", "%v", err)
	}
	if v, ok := payload.(validator); ok {
		if err := v.Validate(); err != nil {
			return Command{}, err
		}
	}
	return Command{ID: env.ID, Type: env.Type, CorrelationID: env.CorrelationID, OccurredAt: env.OccurredAt, Payload: payload}, nil
}

// Encode builds the envelope of out, caused by cause.
func Encode(cause Command, out Out) (id string, body []byte, err error) {
	id = DerivedID(cause.ID, out.Type, out.Key)
	payload, err := json.Marshal(out.Payload)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s payload: %w", out.Type, err)
	}
	body, err = json.Marshal(Envelope{
		ID:            id,
		Type:          out.Type,
		CorrelationID: cause.CorrelationID,
		CausationID:   cause.ID,
		OccurredAt:    out.At.UTC().Truncate(time.Second),
		Schema:        Schema,
		Payload:       payload,
	})
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", out.Type, err)
	}
	return id, body, nil
}

// NewCommand builds the body of a command a producer sends.
func NewCommand(id string, t Type, payload any, now time.Time) ([]byte, error) {
	if !IsCommand(t) {
		return nil, fmt.Errorf("%q is not a command type", t)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	return json.Marshal(Envelope{ID: id, Type: t, CorrelationID: id, OccurredAt: now.UTC(), Schema: Schema, Payload: raw})
}

// InvalidError reports a message that can never be processed: malformed,
// of an unknown type, or failing validation.
type InvalidError struct {
	Field   string
	Reason  string
	Unknown bool // the type is not in the catalogue
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

// IsInvalid reports whether err marks a message that must not be retried.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

type validator interface{ Validate() error }

func checkID(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	return checkText(field, v, MaxIDLength)
}

// checkText bounds a free-text field and keeps control characters out of
// values that end up in keys and logs.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return invalid(field, "%d bytes, at most %d", len(v), max)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return invalid(field, "contains a control character")
		}
	}
	return nil
}

func required(field, v string, max int) error {
	if v == "" {
		return invalid(field, "required")
	}
	return checkText(field, v, max)
}
