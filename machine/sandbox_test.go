package machine_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
)

const (
	now   = int64(1_800_000_000)
	track = "track-A"
)

// sandboxIn is a state's item with every guard of every transition
// satisfied for track at now: allocated an hour ago to track, with a
// four-hour lab.
func sandboxIn(t *testing.T, state string) machine.Item {
	t.Helper()
	if state == machine.Absent {
		return nil
	}
	item, err := attributevalue.MarshalMap(map[string]any{
		"PK": "SBX#s-1", "SK": "META", "sandbox_id": "s-1", "external_id": "ext-1", "name": "one",
		"status": state, "lab_duration_hours": 4, "deletion_retry_count": 2,
		"allocated_at": now - 3600, "allocated_to_track": track, "idempotency_key": track,
		"created_at": now - 7200, "updated_at": now - 3600,
	})
	require.NoError(t, err)
	return item
}

func input() machine.SandboxInput {
	return machine.SandboxInput{
		Now: now, TrackID: track, IdempotencyKey: track, SandboxID: "s-2", Error: "provider said no",
		Listed: messages.InventoryItem{ExternalID: "ext-2", Name: "two", LabDurationHours: 2},
	}
}

// TestSandbox_every_state_and_transition: the whole table, with guards
// satisfied: the next state where the transition is legal, else the
// reason. The expectations are written out, not derived.
func TestSandbox_every_state_and_transition(t *testing.T) {
	const ok = ""
	nf, ws := messages.ReasonNotFound, messages.ReasonWrongState
	type cell struct{ to, reason string }
	table := map[string]map[string]cell{
		machine.SandboxAllocate: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {to: machine.SandboxAllocated},
			machine.SandboxAllocated: {reason: ws}, machine.SandboxPendingDeletion: {reason: ws}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxMarkDeletion: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {reason: ws},
			machine.SandboxAllocated: {to: machine.SandboxPendingDeletion}, machine.SandboxPendingDeletion: {reason: ws}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxExpire: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {reason: ws},
			machine.SandboxAllocated: {reason: machine.ReasonNotDue}, machine.SandboxPendingDeletion: {reason: ws}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxDelete: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {reason: ws}, machine.SandboxAllocated: {reason: ws},
			machine.SandboxPendingDeletion: {to: machine.Absent}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxDeletionFailed: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {reason: ws}, machine.SandboxAllocated: {reason: ws},
			machine.SandboxPendingDeletion: {to: machine.SandboxPendingDeletion}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxAdd: {
			machine.Absent: {to: machine.SandboxAvailable}, machine.SandboxAvailable: {reason: ws}, machine.SandboxAllocated: {reason: ws},
			machine.SandboxPendingDeletion: {reason: ws}, machine.SandboxStale: {reason: ws},
		},
		machine.SandboxMarkStale: {
			machine.Absent: {reason: nf}, machine.SandboxAvailable: {to: machine.SandboxStale}, machine.SandboxAllocated: {to: machine.SandboxStale},
			machine.SandboxPendingDeletion: {reason: ws}, machine.SandboxStale: {reason: ws},
		},
	}
	require.Len(t, table, len(machine.Sandbox.Transitions), "every transition has its row")
	states := append([]string{machine.Absent}, machine.Sandbox.States...)
	for _, tr := range machine.Sandbox.Transitions {
		for _, state := range states {
			want, listed := table[tr.Name][state]
			require.True(t, listed, "cell %s × %q is in the table", tr.Name, state)
			t.Run(tr.Name+"/from_"+state, func(t *testing.T) {
				item := sandboxIn(t, state)
				out := machine.Sandbox.Decide(machine.Sandbox.Transition(tr.Name), item, item, input())
				assert.False(t, out.Stale)
				if want.reason != ok {
					assert.Equal(t, want.reason, out.Reason)
					assert.Nil(t, out.Next)
					assert.Equal(t, tr.Rejected, out.Event)
					return
				}
				require.True(t, out.Applies(), "rejected: %s", out.Reason)
				assert.Equal(t, tr.Event, out.Event)
				if want.to == machine.Absent {
					assert.Nil(t, out.Next)
					return
				}
				assert.Equal(t, want.to, str(t, out.Next, "status"))
			})
		}
	}
}

// TestSandbox_guards_give_their_reasons: from a legal state, each guard
// failing alone gives its reason; several failing give the first
// declared, the order a user is told.
func TestSandbox_guards_give_their_reasons(t *testing.T) {
	allocated := func(t *testing.T, allocatedAt int64, owner string) machine.Item {
		item := sandboxIn(t, machine.SandboxAllocated)
		item["allocated_at"] = num(allocatedAt)
		item["allocated_to_track"] = &types.AttributeValueMemberS{Value: owner}
		return item
	}
	fourHours := int64(4 * 3600)
	cases := []struct {
		Name       string
		Transition string
		Item       func(t *testing.T) machine.Item
		Want       string
	}{
		{"release_by_another_track", machine.SandboxMarkDeletion, func(t *testing.T) machine.Item { return allocated(t, now-60, "track-B") }, messages.ReasonNotOwner},
		{"release_after_the_window", machine.SandboxMarkDeletion, func(t *testing.T) machine.Item { return allocated(t, now-fourHours, track) }, messages.ReasonExpired},
		{"release_one_second_before_the_window_closes", machine.SandboxMarkDeletion, func(t *testing.T) machine.Item { return allocated(t, now-fourHours+1, track) }, ""},
		{"release_by_another_track_after_the_window", machine.SandboxMarkDeletion, func(t *testing.T) machine.Item { return allocated(t, now-fourHours, "track-B") }, messages.ReasonNotOwner},
		{"expire_while_the_window_is_open", machine.SandboxExpire, func(t *testing.T) machine.Item { return allocated(t, now-fourHours+1, track) }, machine.ReasonNotDue},
		{"expire_when_the_window_closes", machine.SandboxExpire, func(t *testing.T) machine.Item { return allocated(t, now-fourHours, track) }, ""},
		{"expire_whoever_holds_it", machine.SandboxExpire, func(t *testing.T) machine.Item { return allocated(t, now-fourHours-1, "track-B") }, ""},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			item := c.Item(t)
			out := machine.Sandbox.Decide(machine.Sandbox.Transition(c.Transition), item, item, input())
			assert.Equal(t, c.Want, out.Reason)
			assert.Equal(t, c.Want == "", out.Applies())
		})
	}
}

// TestSandbox_a_changed_pin_is_stale_not_a_rejection: a decision made on a
// read that no longer matches the item (another transition in between)
// is made again, never answered with a reason.
func TestSandbox_a_changed_pin_is_stale_not_a_rejection(t *testing.T) {
	cases := []struct {
		Name       string
		Transition string
		State      string
		Attr       string
		Now        types.AttributeValue
	}{
		{"lab_duration_changed_under_a_release", machine.SandboxMarkDeletion, machine.SandboxAllocated, "lab_duration_hours", num(8)},
		{"reallocated_under_an_expiry", machine.SandboxExpire, machine.SandboxAllocated, "allocated_at", num(now - 5*3600)},
		{"another_failure_counted_meanwhile", machine.SandboxDeletionFailed, machine.SandboxPendingDeletion, "deletion_retry_count", num(3)},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			read := sandboxIn(t, c.State)
			if c.Transition == machine.SandboxExpire {
				read["allocated_at"] = num(now - 6*3600) // due when read
			}
			item := sandboxIn(t, c.State)
			for k, v := range read {
				item[k] = v
			}
			item[c.Attr] = c.Now
			out := machine.Sandbox.Decide(machine.Sandbox.Transition(c.Transition), item, read, input())
			assert.True(t, out.Stale)
			assert.Empty(t, out.Reason)
			assert.False(t, out.Applies())
		})
	}
}

// TestSandbox_transitions_set_what_they_declare: the next item of each
// applying transition, attribute by attribute.
func TestSandbox_transitions_set_what_they_declare(t *testing.T) {
	decide := func(name, state string) machine.Item {
		item := sandboxIn(t, state)
		out := machine.Sandbox.Decide(machine.Sandbox.Transition(name), item, item, input())
		require.True(t, out.Applies(), "%s from %s: %s", name, state, out.Reason)
		return out.Next
	}
	next := decide(machine.SandboxAllocate, machine.SandboxAvailable)
	assert.Equal(t, track, str(t, next, "allocated_to_track"))
	assert.Equal(t, track, str(t, next, "idempotency_key"))
	assert.Equal(t, now, integer(t, next, "allocated_at"))
	assert.Equal(t, now, integer(t, next, "updated_at"))

	next = decide(machine.SandboxMarkDeletion, machine.SandboxAllocated)
	assert.Equal(t, now, integer(t, next, "deletion_requested_at"))
	assert.Equal(t, track, str(t, next, "allocated_to_track"), "the owner is kept")

	next = decide(machine.SandboxDeletionFailed, machine.SandboxPendingDeletion)
	assert.Equal(t, int64(3), integer(t, next, "deletion_retry_count"))
	assert.Equal(t, "provider said no", str(t, next, "last_deletion_error"))

	next = decide(machine.SandboxAdd, machine.Absent)
	assert.Equal(t, "SBX#s-2", str(t, next, "PK"))
	assert.Equal(t, "s-2", str(t, next, "sandbox_id"))
	assert.Equal(t, "ext-2", str(t, next, "external_id"))
	assert.Equal(t, int64(0), integer(t, next, "allocated_at"))
	assert.Equal(t, now, integer(t, next, "last_synced"))
}

func num(v int64) types.AttributeValue {
	av, _ := attributevalue.Marshal(v)
	return av
}

func str(t *testing.T, item machine.Item, attr string) string {
	t.Helper()
	var s string
	require.NoError(t, attributevalue.Unmarshal(item[attr], &s), attr)
	return s
}

func integer(t *testing.T, item machine.Item, attr string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, attributevalue.Unmarshal(item[attr], &n), attr)
	return n
}
