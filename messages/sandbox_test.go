package messages_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

func TestDecode_rejects_bad_track_id(t *testing.T) {
	tests := []struct {
		Name    string
		TrackID string
	}{
		{Name: "missing", TrackID: ""},
		{Name: "spaces", TrackID: "track 1"},
		{Name: "expression_injection_quotes", TrackID: `t" OR "1"="1`},
		{Name: "expression_attribute_name", TrackID: "#status"},
		{Name: "expression_attribute_value", TrackID: ":v"},
		{Name: "leading_punctuation", TrackID: "-track"},
		{Name: "oversized", TrackID: strings.Repeat("t", 257)},
		{Name: "control_character", TrackID: "track\x01"},
		{Name: "trailing_newline", TrackID: "track-1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			body := envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": tc.TrackID})
			_, err := messages.Decode(body, messages.Meta{})
			requireInvalid(t, err, "track_id")
		})
	}
}

func TestDecode_accepts_identifier_track_ids(t *testing.T) {
	tests := []struct {
		Name    string
		TrackID string
	}{
		{Name: "every_allowed_punctuation", TrackID: "org/team:track-1.v2_x@host"},
		{Name: "single_character", TrackID: "7"},
		{Name: "at_max_length", TrackID: strings.Repeat("t", 256)},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			body := envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": tc.TrackID})
			cmd, err := messages.Decode(body, messages.Meta{})
			require.NoError(t, err)
			assert.Equal(t, tc.TrackID, cmd.Payload.(*messages.SandboxAllocatePayload).TrackID)
		})
	}
}

func TestDecode_rejects_bad_idempotency_key(t *testing.T) {
	tests := []struct {
		Name string
		Key  string
	}{
		{Name: "oversized", Key: strings.Repeat("k", 257)},
		{Name: "control_character", Key: "key\x1b[31m"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			body := envelope(t, "cmd-1", messages.SandboxAllocate, map[string]any{"track_id": "track-1", "idempotency_key": tc.Key})
			_, err := messages.Decode(body, messages.Meta{})
			requireInvalid(t, err, "idempotency_key")
		})
	}
}

// nonUUIDs are sandbox IDs uuid.Parse alone would accept or that are
// plainly wrong; only the canonical 36-character form may become a key.
var nonUUIDs = []struct {
	Name      string
	SandboxID string
}{
	{Name: "word", SandboxID: "not-a-uuid"},
	{Name: "no_dashes", SandboxID: strings.ReplaceAll(uuid.NewString(), "-", "")},
	{Name: "braces", SandboxID: "{" + uuid.NewString() + "}"},
	{Name: "urn", SandboxID: "urn:uuid:" + uuid.NewString()},
	{Name: "trailing_space", SandboxID: uuid.NewString() + " "},
	{Name: "truncated", SandboxID: uuid.NewString()[:35]},
}

func TestDecode_mark_deletion_requires_canonical_sandbox_id(t *testing.T) {
	cases := append([]struct {
		Name      string
		SandboxID string
	}{{Name: "missing", SandboxID: ""}}, nonUUIDs...)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			body := envelope(t, "cmd-1", messages.SandboxMarkDeletion, map[string]any{"sandbox_id": tc.SandboxID, "track_id": "track-1"})
			_, err := messages.Decode(body, messages.Meta{})
			requireInvalid(t, err, "sandbox_id")
		})
	}
}

func TestDecode_mark_deletion_accepts_uuid_and_checks_track(t *testing.T) {
	id := uuid.NewString()
	cmd, err := messages.Decode(envelope(t, "cmd-1", messages.SandboxMarkDeletion, map[string]any{"sandbox_id": id, "track_id": "track-1"}), messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, &messages.SandboxMarkDeletionPayload{SandboxID: id, TrackID: "track-1"}, cmd.Payload)

	// The track is validated too, not only the sandbox.
	_, err = messages.Decode(envelope(t, "cmd-1", messages.SandboxMarkDeletion, map[string]any{"sandbox_id": id, "track_id": "a b"}), messages.Meta{})
	requireInvalid(t, err, "track_id")
}

func TestDecode_sweeps_allow_empty_sandbox_id(t *testing.T) {
	for _, typ := range []messages.Type{messages.SandboxExpire, messages.SandboxCleanup} {
		t.Run(string(typ), func(t *testing.T) {
			// No sandbox_id means "sweep them all"; an absent payload means the same.
			for name, payload := range map[string]any{"empty_payload": map[string]any{}, "no_payload": nil, "empty_id": map[string]any{"sandbox_id": ""}} {
				cmd, err := messages.Decode(envelope(t, "sweep-1", typ, payload), messages.Meta{})
				require.NoError(t, err, name)
				assert.Equal(t, typ, cmd.Type, name)
			}

			id := uuid.NewString()
			cmd, err := messages.Decode(envelope(t, "cmd-1", typ, map[string]any{"sandbox_id": id}), messages.Meta{})
			require.NoError(t, err)
			switch p := cmd.Payload.(type) {
			case *messages.SandboxExpirePayload:
				assert.Equal(t, id, p.SandboxID)
			case *messages.SandboxCleanupPayload:
				assert.Equal(t, id, p.SandboxID)
			default:
				t.Fatalf("payload is %T", cmd.Payload)
			}
		})
	}
}

func TestDecode_sweeps_reject_non_uuid_sandbox_id(t *testing.T) {
	for _, typ := range []messages.Type{messages.SandboxExpire, messages.SandboxCleanup} {
		for _, tc := range nonUUIDs {
			t.Run(string(typ)+"/"+tc.Name, func(t *testing.T) {
				_, err := messages.Decode(envelope(t, "cmd-1", typ, map[string]any{"sandbox_id": tc.SandboxID}), messages.Meta{})
				requireInvalid(t, err, "sandbox_id")
			})
		}
	}
}

// inventory returns n distinct, valid inventory entries.
func inventory(n int) []map[string]any {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"external_id": fmt.Sprintf("ext-%d", i), "name": fmt.Sprintf("sandbox %d", i), "lab_duration_hours": 4.0}
	}
	return items
}

func TestDecode_sync_accepts_valid_inventory(t *testing.T) {
	tests := []struct {
		Name  string
		Items []map[string]any
	}{
		{Name: "empty", Items: []map[string]any{}},
		{Name: "one", Items: inventory(1)},
		{Name: "beyond_the_old_cap_of_1000", Items: inventory(3000)},
		{Name: "max_lab_hours", Items: []map[string]any{{"external_id": "ext-1", "name": "n", "lab_duration_hours": 24.0 * 30}}},
		{Name: "two_second_lab", Items: []map[string]any{{"external_id": "ext-1", "name": "n", "lab_duration_hours": 2.0 / 3600}}},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cmd, err := messages.Decode(envelope(t, "sync-1", messages.SandboxSync, map[string]any{"inventory": tc.Items}), messages.Meta{})
			require.NoError(t, err)
			p := cmd.Payload.(*messages.SandboxSyncPayload)
			require.Len(t, p.Inventory, len(tc.Items))
			for i, it := range p.Inventory {
				assert.Equal(t, tc.Items[i]["external_id"], it.ExternalID)
				assert.Equal(t, tc.Items[i]["lab_duration_hours"], it.LabDurationHours)
			}
		})
	}
}

// TestDecode_sync_without_inventory_pulls: absent or null asks transit to
// pull the provider's list; an empty list still says the provider has none.
func TestDecode_sync_without_inventory_pulls(t *testing.T) {
	tests := []struct {
		Name    string
		Payload map[string]any
		Pull    bool
	}{
		{Name: "absent", Payload: map[string]any{}, Pull: true},
		{Name: "null", Payload: map[string]any{"inventory": nil}, Pull: true},
		{Name: "empty", Payload: map[string]any{"inventory": []any{}}, Pull: false},
		{Name: "one", Payload: map[string]any{"inventory": inventory(1)}, Pull: false},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cmd, err := messages.Decode(envelope(t, "sync-1", messages.SandboxSync, tc.Payload), messages.Meta{})
			require.NoError(t, err)
			p := cmd.Payload.(*messages.SandboxSyncPayload)
			assert.Equal(t, tc.Pull, p.Pull())
			if !tc.Pull {
				assert.NotNil(t, p.Inventory, "an empty inventory stays a list")
			}
		})
	}
}

func TestDecode_sync_rejects_bad_inventory(t *testing.T) {
	with := func(i int, key string, v any) []map[string]any {
		items := inventory(3)
		items[i][key] = v
		return items
	}
	tests := []struct {
		Name      string
		Items     []map[string]any
		WantField string
	}{
		{Name: "duplicate_external_id", Items: with(2, "external_id", "ext-0"), WantField: "inventory[2].external_id"},
		{Name: "empty_external_id", Items: with(1, "external_id", ""), WantField: "inventory[1].external_id"},
		{Name: "oversized_external_id", Items: with(0, "external_id", strings.Repeat("e", 257)), WantField: "inventory[0].external_id"},
		{Name: "control_character_in_external_id", Items: with(0, "external_id", "ext\x00"), WantField: "inventory[0].external_id"},
		{Name: "empty_name", Items: with(1, "name", ""), WantField: "inventory[1].name"},
		{Name: "lab_duration_zero", Items: with(1, "lab_duration_hours", 0), WantField: "inventory[1].lab_duration_hours"},
		{Name: "lab_duration_under_a_second", Items: with(1, "lab_duration_hours", 0.5/3600), WantField: "inventory[1].lab_duration_hours"},
		{Name: "lab_duration_negative", Items: with(0, "lab_duration_hours", -1), WantField: "inventory[0].lab_duration_hours"},
		{Name: "lab_duration_over_30_days", Items: with(2, "lab_duration_hours", 24*30+1), WantField: "inventory[2].lab_duration_hours"},
		{Name: "unknown_item_field", Items: with(0, "region", "eu"), WantField: "region"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := messages.Decode(envelope(t, "sync-1", messages.SandboxSync, map[string]any{"inventory": tc.Items}), messages.Meta{})
			requireInvalid(t, err, tc.WantField)
		})
	}
}
