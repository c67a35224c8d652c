package messages_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

// envelope builds a command body; an empty id or type is left out so tests
// can exercise the fallbacks.
func envelope(t *testing.T, id string, typ messages.Type, payload any) []byte {
	t.Helper()
	env := map[string]any{"occurred_at": "2025-01-02T03:04:05Z"}
	if id != "" {
		env["id"] = id
	}
	if typ != "" {
		env["type"] = typ
	}
	if payload != nil {
		env["payload"] = payload
	}
	body, err := json.Marshal(env)
	require.NoError(t, err)
	return body
}

// requireInvalid checks err is the DLQ-bound kind and names field, so a
// case cannot pass by failing for an unrelated reason.
func requireInvalid(t *testing.T, err error, field string) *messages.InvalidError {
	t.Helper()
	require.Error(t, err)
	require.True(t, messages.IsInvalid(err), "want *messages.InvalidError, got %T: %v", err, err)
	var ie *messages.InvalidError
	require.True(t, errors.As(err, &ie))
	if field != "" {
		assert.Equal(t, field, ie.Field, "error: %v", err)
	}
	return ie
}

func TestDecode_allocate_defaults_idempotency_key_to_track(t *testing.T) {
	body := envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": "track-1"})

	cmd, err := messages.Decode(body, messages.Meta{ID: "transport-id", Type: "sandbox.allocate"})
	require.NoError(t, err)

	assert.Equal(t, "cmd-1", cmd.ID, "the body's id wins over the transport's")
	assert.Equal(t, messages.SandboxAllocate, cmd.Type)
	assert.Equal(t, "cmd-1", cmd.CorrelationID, "a command without a correlation starts its own")
	assert.True(t, cmd.OccurredAt.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
	p, ok := cmd.Payload.(*messages.SandboxAllocatePayload)
	require.True(t, ok, "payload is %T", cmd.Payload)
	assert.Equal(t, messages.SandboxAllocatePayload{TrackID: "track-1", IdempotencyKey: "track-1"}, *p)
}

func TestDecode_keeps_explicit_idempotency_key_and_correlation(t *testing.T) {
	body, err := json.Marshal(map[string]any{
		"id":             "cmd-2",
		"type":           "sandbox.allocate",
		"correlation_id": "corr-9",
		"payload":        map[string]any{"track_id": "track-1", "idempotency_key": "attempt-7"},
	})
	require.NoError(t, err)

	cmd, err := messages.Decode(body, messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, "corr-9", cmd.CorrelationID)
	assert.Equal(t, "attempt-7", cmd.Payload.(*messages.SandboxAllocatePayload).IdempotencyKey)
}

func TestDecode_uses_fallback_id_when_body_has_none(t *testing.T) {
	body := envelope(t, "", messages.SandboxAllocate, map[string]any{"track_id": "track-1"})

	cmd, err := messages.Decode(body, messages.Meta{ID: "sqs-message-id"})
	require.NoError(t, err)
	assert.Equal(t, "sqs-message-id", cmd.ID)
	// The correlation follows the ID it was defaulted to.
	assert.Equal(t, "sqs-message-id", cmd.CorrelationID)
}

func TestDecode_takes_type_from_attribute_when_body_has_none(t *testing.T) {
	body := envelope(t, "cmd-3", "", map[string]any{"track_id": "track-1"})

	cmd, err := messages.Decode(body, messages.Meta{Type: string(messages.SandboxAllocate)})
	require.NoError(t, err)
	assert.Equal(t, messages.SandboxAllocate, cmd.Type)
}

func TestDecode_rejects_invalid_envelopes(t *testing.T) {
	allocate := map[string]any{"track_id": "track-1"}
	tests := []struct {
		Name        string
		Body        []byte
		FallbackID  string
		AttrType    string
		WantField   string
		WantUnknown bool
	}{
		{Name: "malformed_json", Body: []byte(`{"id":"cmd-1","type":`), WantField: "body"},
		{Name: "not_an_object", Body: []byte(`["sandbox.allocate"]`), WantField: "body"},
		{Name: "unknown_type", Body: envelope(t, "cmd-1", "sandbox.explode", allocate), WantField: "type", WantUnknown: true},
		{Name: "no_type_anywhere", Body: envelope(t, "cmd-1", "", allocate), WantField: "type", WantUnknown: true},
		{Name: "event_type_sent_as_command", Body: envelope(t, "cmd-1", messages.SandboxAllocated, allocate), WantField: "type", WantUnknown: true},
		{Name: "attribute_disagrees_with_body", Body: envelope(t, "cmd-1", messages.SandboxAllocate, allocate), AttrType: string(messages.SandboxExpire), WantField: "type"},
		{Name: "unknown_payload_field", Body: envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": "track-1", "priority": 1}), WantField: "priority"},
		{Name: "payload_field_of_wrong_type", Body: envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": 7}), WantField: "track_id"},
		{Name: "no_id_and_no_fallback", Body: envelope(t, "", messages.SandboxAllocate, allocate), WantField: "id"},
		{Name: "id_too_long", Body: envelope(t, strings.Repeat("i", messages.MaxIDLength+1), messages.SandboxAllocate, allocate), WantField: "id"},
		{Name: "fallback_id_too_long", Body: envelope(t, "", messages.SandboxAllocate, allocate), FallbackID: strings.Repeat("i", messages.MaxIDLength+1), WantField: "id"},
		{Name: "control_character_in_id", Body: envelope(t, "cmd\x07-1", messages.SandboxAllocate, allocate), WantField: "id"},
		{Name: "newline_in_id", Body: envelope(t, "cmd-1\n", messages.SandboxAllocate, allocate), WantField: "id"},
		{Name: "delete_character_in_id", Body: envelope(t, "cmd\x7f", messages.SandboxAllocate, allocate), WantField: "id"},
		{
			Name:      "control_character_in_correlation_id",
			Body:      []byte(`{"id":"cmd-1","type":"sandbox.allocate","correlation_id":"c\u0000","payload":{"track_id":"track-1"}}`),
			WantField: "correlation_id",
		},
		{
			Name:      "correlation_id_too_long",
			Body:      []byte(`{"id":"cmd-1","type":"sandbox.allocate","correlation_id":"` + strings.Repeat("c", messages.MaxIDLength+1) + `","payload":{"track_id":"track-1"}}`),
			WantField: "correlation_id",
		},
		{Name: "missing_payload_fails_validation", Body: envelope(t, "cmd-1", messages.SandboxAllocate, nil), WantField: "track_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := messages.Decode(tc.Body, messages.Meta{ID: tc.FallbackID, Type: tc.AttrType})
			ie := requireInvalid(t, err, tc.WantField)
			assert.Equal(t, tc.WantUnknown, ie.Unknown, "Unknown marks only types outside the command catalogue")
		})
	}
}

func TestDecode_accepts_id_at_max_length(t *testing.T) {
	// The bound is inclusive; an off-by-one would send valid commands to the DLQ.
	id := strings.Repeat("i", messages.MaxIDLength)
	cmd, err := messages.Decode(envelope(t, id, messages.SandboxAllocate, map[string]any{"track_id": "t"}), messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, id, cmd.ID)
}

func TestIsInvalid_sees_through_wrapping(t *testing.T) {
	_, err := messages.Decode([]byte("nope"), messages.Meta{})
	require.Error(t, err)
	// Callers wrap decode errors with context; the DLQ decision must survive that.
	assert.True(t, messages.IsInvalid(errors.Join(errors.New("handling"), err)))
	assert.False(t, messages.IsInvalid(errors.New("throttled")))
	assert.False(t, messages.IsInvalid(nil))
}

func TestDerivedID_is_a_deterministic_uuid_v5(t *testing.T) {
	id := messages.DerivedID("cmd-1", messages.SandboxAllocated, "")
	// A redelivered command must re-emit the same event ID.
	assert.Equal(t, id, messages.DerivedID("cmd-1", messages.SandboxAllocated, ""))

	u, err := uuid.Parse(id)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(5), u.Version())
	assert.Equal(t, uuid.RFC4122, u.Variant())
	assert.Equal(t, u.String(), id, "canonical lower-case form")
}

func TestDerivedID_differs_by_each_input(t *testing.T) {
	base := messages.DerivedID("cmd-1", messages.SandboxExpire, "")
	tests := []struct {
		Name  string
		Cause string
		Type  messages.Type
		Key   string
	}{
		{Name: "other_cause", Cause: "cmd-2", Type: messages.SandboxExpire},
		{Name: "other_type", Cause: "cmd-1", Type: messages.SandboxExpired},
		{Name: "with_key", Cause: "cmd-1", Type: messages.SandboxExpire, Key: "sb-1"},
	}
	seen := map[string]string{base: "base"}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			id := messages.DerivedID(tc.Cause, tc.Type, tc.Key)
			prev, dup := seen[id]
			assert.False(t, dup, "same ID as %s", prev)
			seen[id] = tc.Name
		})
	}
	// A sweep's fan-out relies on each key giving its own message.
	assert.NotEqual(t,
		messages.DerivedID("cmd-1", messages.SandboxExpire, "sb-1"),
		messages.DerivedID("cmd-1", messages.SandboxExpire, "sb-2"))
}

func TestEncode_derives_envelope_from_cause(t *testing.T) {
	cause := messages.Command{ID: "cmd-1", Type: messages.SandboxAllocate, CorrelationID: "corr-1"}
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	payload := messages.SandboxAllocatedPayload{SandboxID: uuid.NewString(), ExternalID: "ext-1", TrackID: "track-1", IdempotencyKey: "track-1", AllocatedAt: 10, ExpiresAt: 20}

	id, body, err := messages.Encode(cause, messages.Out{Type: messages.SandboxAllocated, Payload: payload, At: at})
	require.NoError(t, err)

	var env messages.Envelope
	require.NoError(t, json.Unmarshal(body, &env))
	assert.Equal(t, messages.DerivedID("cmd-1", messages.SandboxAllocated, ""), id)
	assert.Equal(t, id, env.ID)
	assert.Equal(t, messages.SandboxAllocated, env.Type)
	assert.Equal(t, "cmd-1", env.CausationID)
	assert.Equal(t, "corr-1", env.CorrelationID, "the whole chain shares the first command's correlation")
	assert.Equal(t, messages.Schema, env.Schema)
	assert.True(t, env.OccurredAt.Equal(at))
	assert.Equal(t, time.UTC, env.OccurredAt.Location(), "times travel in UTC")

	var got messages.SandboxAllocatedPayload
	require.NoError(t, json.Unmarshal(env.Payload, &got))
	assert.Equal(t, payload, got)
}

func TestEncode_key_gives_each_fan_out_message_its_own_id(t *testing.T) {
	cause := messages.Command{ID: "sweep-1", CorrelationID: "sweep-1"}
	id, body, err := messages.Encode(cause, messages.Out{Type: messages.SandboxExpire, Payload: messages.SandboxExpirePayload{}, Key: "sb-1"})
	require.NoError(t, err)
	assert.Equal(t, messages.DerivedID("sweep-1", messages.SandboxExpire, "sb-1"), id)
	assert.NotEqual(t, messages.DerivedID("sweep-1", messages.SandboxExpire, ""), id)
	assert.Contains(t, string(body), id)
}

func TestEncode_rejects_unencodable_payload(t *testing.T) {
	_, _, err := messages.Encode(messages.Command{ID: "cmd-1"}, messages.Out{Type: messages.SandboxSynced, Payload: make(chan int)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), string(messages.SandboxSynced))
}

func TestNewCommand_round_trips_through_decode(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("EST", -5*3600))
	sandboxID := uuid.NewString()
	body, err := messages.NewCommand("cmd-7", messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: sandboxID, TrackID: "track-1"}, now)
	require.NoError(t, err)

	cmd, err := messages.Decode(body, messages.Meta{ID: "ignored", Type: string(messages.SandboxMarkDeletion)})
	require.NoError(t, err)
	assert.Equal(t, "cmd-7", cmd.ID)
	assert.Equal(t, "cmd-7", cmd.CorrelationID)
	assert.Equal(t, messages.SandboxMarkDeletion, cmd.Type)
	assert.True(t, cmd.OccurredAt.Equal(now))
	assert.Equal(t, &messages.SandboxMarkDeletionPayload{SandboxID: sandboxID, TrackID: "track-1"}, cmd.Payload)
}

// TestNewCommand_joins_its_cause_chain: a command built with a cause (a
// timer's embedded command) carries the cause's correlation and names it
// as causation, and Decode hands both on; without one it starts its own.
func TestNewCommand_joins_its_cause_chain(t *testing.T) {
	body, err := messages.NewCommand("cmd-8", messages.SandboxExpire, messages.SandboxExpirePayload{SandboxID: uuid.NewString()}, time.Now(),
		messages.Cause{CorrelationID: "corr-1", CausationID: "cmd-1"})
	require.NoError(t, err)
	cmd, err := messages.Decode(body, messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, "cmd-8", cmd.ID)
	assert.Equal(t, "corr-1", cmd.CorrelationID)
	assert.Equal(t, "cmd-1", cmd.CausationID)

	body, err = messages.NewCommand("cmd-9", messages.SandboxExpire, messages.SandboxExpirePayload{}, time.Now(), messages.Cause{})
	require.NoError(t, err)
	cmd, err = messages.Decode(body, messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, "cmd-9", cmd.CorrelationID, "no correlation in the cause: its own")
	assert.Empty(t, cmd.CausationID)
}

// TestDecode_drops_an_unusable_causation: a causation_id too long or with
// control characters loses the link, not the command.
func TestDecode_drops_an_unusable_causation(t *testing.T) {
	for _, causation := range []string{strings.Repeat("c", messages.MaxIDLength+1), `c\u0000`} {
		cmd, err := messages.Decode([]byte(`{"id":"cmd-1","type":"sandbox.allocate","causation_id":"`+causation+`","payload":{"track_id":"track-1"}}`), messages.Meta{})
		require.NoError(t, err)
		assert.Empty(t, cmd.CausationID)
	}
}

func TestNewCommand_rejects_unknown_type(t *testing.T) {
	_, err := messages.NewCommand("cmd-1", "sandbox.explode", struct{}{}, time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sandbox.explode")
}

func TestCatalogue_every_type_has_its_domain(t *testing.T) {
	assert.Equal(t, []messages.Domain{messages.Layer, messages.Nucleus, messages.Org, messages.Sandbox, messages.Task, messages.Timer}, messages.Domains())
	for _, d := range messages.Domains() {
		for _, typ := range append(messages.Commands(d), messages.Events(d)...) {
			got, ok := messages.DomainOf(typ)
			require.True(t, ok, typ)
			assert.Equal(t, d, got, typ)
		}
	}
}

func TestCatalogue_sandbox_types_hold_commands_and_events(t *testing.T) {
	commands := []messages.Type{
		messages.SandboxAllocate, messages.SandboxCleanup, messages.SandboxExpire,
		messages.SandboxMarkDeletion, messages.SandboxReinstate, messages.SandboxRetire, messages.SandboxSync,
	}
	events := []messages.Type{
		messages.SandboxAllocated, messages.SandboxAllocationRejected, messages.SandboxCleanupStuck, messages.SandboxDeleted,
		messages.SandboxDeletionFailed, messages.SandboxDeletionMarked, messages.SandboxDeletionRejected,
		messages.SandboxExpired, messages.SandboxReinstateRejected, messages.SandboxReinstated,
		messages.SandboxRetireRejected, messages.SandboxRetired, messages.SandboxSynced,
	}
	assert.Equal(t, commands, messages.Commands(messages.Sandbox), "sorted commands")
	assert.Equal(t, events, messages.Events(messages.Sandbox), "sorted events")
	for _, c := range commands {
		assert.True(t, messages.IsCommand(c), c)
		assert.False(t, messages.IsEvent(c), c)
	}
	for _, e := range events {
		assert.True(t, messages.IsEvent(e), e)
		assert.False(t, messages.IsCommand(e), e)
	}
	assert.Empty(t, messages.Commands("billing"))
}

func TestCatalogue_a_command_may_share_its_event_name(t *testing.T) {
	// docs/layers.md: the layer.published command is reported by a layer.published event.
	assert.True(t, messages.IsCommand(messages.LayerPublished))
	assert.True(t, messages.IsEvent(messages.LayerPublishedEvent))
	assert.Equal(t, messages.LayerPublished, messages.LayerPublishedEvent)
}

func TestCatalogue_new_payload_matches_type(t *testing.T) {
	p, ok := messages.NewCommandPayload(messages.SandboxSync)
	require.True(t, ok)
	assert.IsType(t, &messages.SandboxSyncPayload{}, p)

	_, ok = messages.NewCommandPayload(messages.SandboxDeleted)
	assert.False(t, ok, "an event has no command payload")

	_, ok = messages.NewCommandPayload("sandbox.explode")
	assert.False(t, ok)
	_, ok = messages.DomainOf("sandbox.explode")
	assert.False(t, ok)
}

func TestCatalogue_resource_names(t *testing.T) {
	// These names are provisioned resources; changing one strands messages.
	assert.Equal(t, "sandbox-commands", messages.CommandQueue(messages.Sandbox))
	assert.Equal(t, "sandbox-commands-dlq", messages.DeadLetterQueue(messages.Sandbox))
	assert.Equal(t, "sandbox-commands", messages.CommandTopic(messages.Sandbox))
	assert.Equal(t, "sandbox-events", messages.EventTopic(messages.Sandbox))
}

func TestDecode_bare_payload_takes_type_id_and_correlation_from_attributes(t *testing.T) {
	cmd, err := messages.Decode([]byte(`{"track_id":"track-A"}`), messages.Meta{
		ID: "cmd-1", Type: string(messages.SandboxAllocate), CorrelationID: "corr-1",
	})
	require.NoError(t, err)
	assert.Equal(t, "cmd-1", cmd.ID)
	assert.Equal(t, messages.SandboxAllocate, cmd.Type)
	assert.Equal(t, "corr-1", cmd.CorrelationID)
	assert.Equal(t, &messages.SandboxAllocatePayload{TrackID: "track-A", IdempotencyKey: "track-A"}, cmd.Payload)
}

func TestDecode_envelope_takes_correlation_from_attribute_when_body_has_none(t *testing.T) {
	body := envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": "track-A"})
	cmd, err := messages.Decode(body, messages.Meta{CorrelationID: "corr-1"})
	require.NoError(t, err)
	assert.Equal(t, "corr-1", cmd.CorrelationID)
}

func TestDecode_bare_empty_payload_is_a_sweep(t *testing.T) {
	cmd, err := messages.Decode([]byte(`{}`), messages.Meta{ID: "m-1", Type: string(messages.SandboxExpire)})
	require.NoError(t, err)
	assert.Equal(t, &messages.SandboxExpirePayload{}, cmd.Payload)
}

func TestDecode_rejects_bad_bare_payloads_naming_the_problem(t *testing.T) {
	allocate := string(messages.SandboxAllocate)
	tests := []struct {
		Name       string
		Body       string
		Type       string
		WantField  string
		WantReason string
	}{
		{Name: "no_type_attribute", Body: `{"track_id":"track-A"}`, WantField: "type", WantReason: "no type attribute"},
		{Name: "unknown_type", Body: `{"track_id":"track-A"}`, Type: "sandbox.teleport", WantField: "type", WantReason: `unknown command type "sandbox.teleport"`},
		{Name: "bad_json", Body: `{"track_id":`, Type: allocate, WantField: "body", WantReason: "not a JSON object"},
		{Name: "not_an_object", Body: `"track-A"`, Type: allocate, WantField: "body", WantReason: "not a JSON object"},
		{Name: "missing_field", Body: `{}`, Type: allocate, WantField: "track_id", WantReason: "sandbox.allocate: invalid track_id: required"},
		{Name: "wrong_field_type", Body: `{"track_id":42}`, Type: allocate, WantField: "track_id", WantReason: "want a string, got number"},
		{Name: "unknown_field", Body: `{"track_id":"t","owner":"me"}`, Type: allocate, WantField: "owner", WantReason: `unknown field "owner"`},
		{Name: "oversized_field", Body: `{"track_id":"` + strings.Repeat("a", 300) + `"}`, Type: allocate, WantField: "track_id", WantReason: "at most 256"},
		{Name: "envelope_member_beside_payload_fields", Body: `{"id":"x","track_id":"t"}`, Type: allocate, WantField: "id", WantReason: `unknown field "id"`},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := messages.Decode([]byte(tc.Body), messages.Meta{ID: "m-1", Type: tc.Type})
			requireInvalid(t, err, tc.WantField)
			assert.Contains(t, err.Error(), tc.WantReason)
		})
	}
}

func TestDecode_bare_timer_create_keeps_its_own_payload_field(t *testing.T) {
	body := `{"timer_id":"t-1","execute_at":"2030-01-02T03:04:05Z","callback":"http://127.0.0.1:9/hook","payload":{"k":"v"}}`
	cmd, err := messages.Decode([]byte(body), messages.Meta{ID: "m-1", Type: string(messages.TimerCreate)})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.TimerCreatePayload)
	assert.Equal(t, "t-1", p.TimerID)
	assert.JSONEq(t, `{"k":"v"}`, string(p.Payload))
}

func TestDecode_schema_version(t *testing.T) {
	for _, tc := range []struct {
		Name    string
		Schema  string
		WantErr bool
	}{
		{Name: "absent_reads_as_current", Schema: ""},
		{Name: "current", Schema: `,"schema":1`},
		{Name: "unknown_future_version", Schema: `,"schema":99`, WantErr: true},
		{Name: "negative", Schema: `,"schema":-1`, WantErr: true},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			body := `{"id":"cmd-1","type":"sandbox.allocate","payload":{"track_id":"t"}` + tc.Schema + `}`
			_, err := messages.Decode([]byte(body), messages.Meta{})
			if !tc.WantErr {
				require.NoError(t, err)
				return
			}
			requireInvalid(t, err, "schema")
			assert.Contains(t, err.Error(), "unknown")
		})
	}
}

// A body with a "type" member is read as an envelope: a command payload
// with a field of that name would be misread.
func TestCatalogue_no_command_payload_has_a_type_field(t *testing.T) {
	for _, d := range messages.Domains() {
		for _, typ := range messages.Commands(d) {
			p, ok := messages.NewCommandPayload(typ)
			require.True(t, ok)
			st := reflect.TypeOf(p).Elem()
			for i := 0; i < st.NumField(); i++ {
				name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
				assert.NotEqual(t, "type", name, "%s has a field named type", typ)
			}
		}
	}
}
