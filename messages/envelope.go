package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
	// IDAttribute carries the command ID of a bare payload; resending with
	// the same ID applies the command once.
	IDAttribute = "id"
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
	// CausationID is the ID of the message that caused this command
	// (the envelope's causation_id); empty for a command a producer
	// started on its own.
	CausationID string
	OccurredAt  time.Time
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

// Rejection is the payload of an event reporting a refused command; its
// reason is one its domain declares (a bounded set, so a metric label).
type Rejection interface{ RejectionReason() string }

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

// Meta is what the transport says about a command besides its body.
type Meta struct {
	// ID is the command ID when the body names none: the `id` message
	// attribute, else the transport's own message ID.
	ID string
	// Type is the `type` message attribute. A bare payload needs it; an
	// envelope that names its type must agree with it.
	Type string
	// CorrelationID is the `correlation_id` message attribute, used when
	// the body names none.
	CorrelationID string
}

// Decode parses a command in either wire form: the envelope as the body,
// or the payload alone as the body with the type in meta (see isEnvelope).
// Every failure is an *InvalidError naming the field: the message can
// never succeed and belongs in the DLQ.
func Decode(body []byte, meta Meta) (Command, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Command{}, invalid("body", "not a JSON object (an envelope, or a payload with the type attribute): %v", err)
	}
	if !isEnvelope(body, env) {
		if meta.Type == "" {
			return Command{}, &InvalidError{Field: "type", Reason: "no command type: the body is not an envelope and the message has no type attribute", Unknown: true}
		}
		env = Envelope{Type: Type(meta.Type), Payload: body}
	}
	if env.Schema != 0 && env.Schema != Schema {
		return Command{}, invalid("schema", "version %d is unknown (this transit reads version %d)", env.Schema, Schema)
	}
	if env.Type == "" {
		env.Type = Type(meta.Type)
	}
	if meta.Type != "" && Type(meta.Type) != env.Type {
		return Command{}, invalid("type", "attribute %q disagrees with body %q", meta.Type, env.Type)
	}
	spec, ok := commands[env.Type]
	if !ok {
		return Command{}, &InvalidError{Field: "type", Reason: fmt.Sprintf("unknown command type %q", env.Type), Unknown: true}
	}
	if env.ID == "" {
		env.ID = meta.ID
	}
	if err := checkID("id", env.ID); err != nil {
		return Command{}, err
	}
	if env.CorrelationID == "" {
		env.CorrelationID = meta.CorrelationID
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.ID
	}
	if err := checkID("correlation_id", env.CorrelationID); err != nil {
		return Command{}, err
	}
	if checkText("causation_id", env.CausationID, MaxIDLength) != nil {
		// Only a trace reads it: a command is not refused for it, the
		// chain just loses the link.
		env.CausationID = ""
	}
	payload, err := decodePayload(env.Type, spec, env.Payload)
	if err != nil {
		return Command{}, err
	}
	return Command{ID: env.ID, Type: env.Type, CorrelationID: env.CorrelationID, CausationID: env.CausationID,
		OccurredAt: env.OccurredAt, Payload: payload}, nil
}

// envelopeMembers are the envelope's JSON members.
var envelopeMembers = map[string]bool{
	"id": true, "type": true, "correlation_id": true, "causation_id": true,
	"occurred_at": true, "schema": true, "payload": true,
}

// isEnvelope tells the two wire forms apart. A body with a "type" member
// is an envelope: no command payload has such a field (a test keeps it
// so). Without one, a body is an envelope only when it has a "payload"
// member and nothing but envelope members, so a payload that has a field
// named payload (timer.create) is still read as a payload.
func isEnvelope(body []byte, env Envelope) bool {
	if env.Type != "" {
		return true
	}
	if env.Payload == nil {
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false
	}
	for name := range members {
		if !envelopeMembers[name] {
			return false
		}
	}
	return true
}

// decodePayload decodes and validates a command's payload; a failure
// names the command type and the field.
func decodePayload(t Type, spec spec, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	payload := spec.new()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(payload)
	if err == nil {
		if v, ok := payload.(validator); ok {
			err = v.Validate()
		}
	}
	if err == nil {
		return payload, nil
	}
	ie := payloadError(err)
	ie.Command = t
	return nil, ie
}

// payloadError turns a JSON decoding error into one that names the field.
func payloadError(err error) *InvalidError {
	var ie *InvalidError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &ie):
		return ie
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalid(typeErr.Field, "want %s, got %s", jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &typeErr):
		return invalid("payload", "want an object, got %s", typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalid("payload", "not valid JSON: %v", err)
	}
	// encoding/json reports an unknown field only in its message.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid(strings.Trim(name, `"`), "unknown field %s", name)
	}
	return invalid("payload", "%v", err)
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
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

// Cause places a command in the chain of the one that caused it, when
// that chain passes through something other than a handler's output: a
// durable timer, say.
type Cause struct {
	// CorrelationID is the chain's; empty starts a chain of the
	// command's own.
	CorrelationID string
	// CausationID is the ID of the command that caused it.
	CausationID string
}

// CorrelationOf is the correlation ID of command id under its cause (at
// most one): the chain's, or the command's own ID when it names none.
func CorrelationOf(id string, cause ...Cause) string {
	if len(cause) == 0 || cause[0].CorrelationID == "" {
		return id
	}
	return cause[0].CorrelationID
}

// NewCommand builds the body of a command a producer sends. Without a
// cause (at most one is read) the command starts its own correlation.
func NewCommand(id string, t Type, payload any, now time.Time, cause ...Cause) ([]byte, error) {
	if !IsCommand(t) {
		return nil, fmt.Errorf("%q is not a command type", t)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	env := Envelope{ID: id, Type: t, CorrelationID: CorrelationOf(id, cause...), OccurredAt: now.UTC(), Schema: Schema, Payload: raw}
	if len(cause) > 0 {
		env.CausationID = cause[0].CausationID
	}
	return json.Marshal(env)
}

// InvalidError reports a message that can never be processed: malformed,
// of an unknown type, or failing validation.
type InvalidError struct {
	// Command is the command type whose payload is at fault, when known.
	Command Type
	Field   string
	Reason  string
	Unknown bool // the type is not in the catalogue
}

func (e *InvalidError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("%s: invalid %s: %s", e.Command, e.Field, e.Reason)
	}
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
// values that end up in keys and logs. It counts characters, as JSON
// Schema's maxLength does, so the published schemas agree with it.
func checkText(field, v string, max int) error {
	n, control := 0, false
	for _, r := range v {
		n++
		control = control || r < 0x20 || r == 0x7f
	}
	switch {
	case n > max:
		return invalid(field, "%d characters, at most %d", n, max)
	case control:
		return invalid(field, "contains a control character")
	}
	return nil
}

// checkProse bounds a field of prose (a prompt, a question, a log line):
// as checkText, but tabs and line breaks are text there.
func checkProse(field, v string, max int) error {
	n := 0
	for _, r := range v {
		n++
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return invalid(field, "contains a control character")
		}
	}
	if n > max {
		return invalid(field, "%d characters, at most %d", n, max)
	}
	return nil
}

func requiredProse(field, v string, max int) error {
	if v == "" {
		return invalid(field, "required")
	}
	return checkProse(field, v, max)
}

func required(field, v string, max int) error {
	if v == "" {
		return invalid(field, "required")
	}
	return checkText(field, v, max)
}
