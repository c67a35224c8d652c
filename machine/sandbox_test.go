package machine_test

import (
	"testing"
	"time"

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
// satisfied for track at now, but one of the two that split a failed
// deletion (two failures, of ten allowed): allocated an hour ago to
// track, with a four-hour lab, last listed by a sync before its last
// change.
func sandboxIn(t *testing.T, state string) machine.Item {
	t.Helper()
	if state == machine.Absent {
		return nil
	}
	item, err := attributevalue.MarshalMap(map[string]any{
		"PK": "SBX#s-1", "SK": "META", "sandbox_id": "s-1", "external_id": "ext-1", "name": "one",
		"status": state, "lab_duration_hours": 4, "deletion_retry_count": 2,
		"allocated_at": now - 3600, "allocated_to_track": track, "idempotency_key": track,
		"created_at": now - 7200, "updated_at": now - 3600, "last_synced": now - 7200,
	})
	require.NoError(t, err)
	return item
}

func input() machine.SandboxInput {
	return machine.SandboxInput{
		Now: now, TrackID: track, IdempotencyKey: track, SandboxID: "s-2", Error: "provider said no",
		Listed:  messages.InventoryItem{ExternalID: "ext-2", Name: "two", LabDurationHours: 2},
		Cleanup: machine.CleanupPolicy{MaxAttempts: 10, Backoff: time.Minute, BackoffMax: time.Hour},
	}
}

// TestSandbox_every_state_and_transition: the whole table, with guards
// satisfied: the next state where the transition is legal, else the
// reason. The expectations are written out, not derived.
func TestSandbox_every_state_and_transition(t *testing.T) {
	nf, ws := messages.ReasonNotFound, messages.ReasonWrongState
	const (
		absent    = machine.Absent
		available = machine.SandboxAvailable
		allocated = machine.SandboxAllocated
		pending   = machine.SandboxPendingDeletion
		stale     = machine.SandboxStale
		stuck     = machine.SandboxCleanupStuck
	)
	table := map[string]map[string]cell{
		machine.SandboxAllocate: {
			absent: {reason: nf}, available: {to: allocated},
			allocated: {reason: ws}, pending: {reason: ws}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxMarkDeletion: {
			absent: {reason: nf}, available: {reason: ws},
			allocated: {to: pending}, pending: {reason: ws}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxExpire: {
			absent: {reason: nf}, available: {reason: ws},
			allocated: {reason: machine.ReasonNotDue}, pending: {reason: ws}, stale: {reason: ws}, stuck: {reason: ws},
		},
		// Never tried: no next_cleanup_at, so an attempt is due.
		machine.SandboxAttempt: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {to: pending}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxDelete: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {to: absent}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxDeletionFailed: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {to: pending}, stale: {reason: ws}, stuck: {reason: ws},
		},
		// Two failures of ten: attempts are left, so the give-up is refused.
		machine.SandboxStuck: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {reason: machine.ReasonAttemptsLeft}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxAdd: {
			absent: {to: available}, available: {reason: ws}, allocated: {reason: ws},
			pending: {reason: ws}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxMarkStale: {
			absent: {reason: nf}, available: {to: stale}, allocated: {to: stale},
			pending: {reason: ws}, stale: {reason: ws}, stuck: {reason: ws},
		},
		machine.SandboxMarkListed: {
			absent: {reason: nf}, available: {to: available}, allocated: {to: allocated},
			pending: {to: pending}, stale: {to: stale}, stuck: {to: stuck},
		},
		machine.SandboxReinstate: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {reason: ws}, stale: {to: available}, stuck: {reason: ws},
		},
		machine.SandboxRetire: {
			absent: {reason: nf}, available: {reason: ws}, allocated: {reason: ws},
			pending: {reason: ws}, stale: {to: absent}, stuck: {reason: ws},
		},
	}
	checkTable(t, machine.Sandbox, table, sandboxIn, input())
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
		{"failure_on_the_last_attempt_is_no_retry", machine.SandboxDeletionFailed, func(t *testing.T) machine.Item { return failedTimes(t, 9) }, machine.ReasonAttemptsSpent},
		{"failure_before_the_last_attempt_is_a_retry", machine.SandboxDeletionFailed, func(t *testing.T) machine.Item { return failedTimes(t, 8) }, ""},
		{"give_up_on_the_last_attempt", machine.SandboxStuck, func(t *testing.T) machine.Item { return failedTimes(t, 9) }, ""},
		{"give_up_past_the_last_attempt", machine.SandboxStuck, func(t *testing.T) machine.Item { return failedTimes(t, 12) }, ""},
		{"no_give_up_before_the_last_attempt", machine.SandboxStuck, func(t *testing.T) machine.Item { return failedTimes(t, 8) }, machine.ReasonAttemptsLeft},
		{"retire_unlisted_since_staled", machine.SandboxRetire, func(t *testing.T) machine.Item { return staleListed(t, now-60, now-120) }, ""},
		{"retire_listed_after_it_was_staled", machine.SandboxRetire, func(t *testing.T) machine.Item { return staleListed(t, now-60, now-10) }, messages.ReasonListed},
		{"retire_listed_the_second_it_was_staled", machine.SandboxRetire, func(t *testing.T) machine.Item { return staleListed(t, now-60, now-60) }, messages.ReasonListed},
		{"retire_staled_before_stale_since_existed", machine.SandboxRetire, func(t *testing.T) machine.Item {
			// updated_at is when it was staled: nothing else changes a stale sandbox.
			item := sandboxIn(t, machine.SandboxStale)
			item["updated_at"], item["last_synced"] = num(now-60), num(now-120)
			return item
		}, ""},
		{"retire_staled_before_stale_since_existed_then_listed", machine.SandboxRetire, func(t *testing.T) machine.Item {
			item := sandboxIn(t, machine.SandboxStale)
			item["updated_at"], item["last_synced"] = num(now-60), num(now-1)
			return item
		}, messages.ReasonListed},
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

// failedTimes is a pending deletion the provider refused n times.
func failedTimes(t *testing.T, n int64) machine.Item {
	item := sandboxIn(t, machine.SandboxPendingDeletion)
	item["deletion_retry_count"] = num(n)
	return item
}

// staleListed is a sandbox staled at staleSince and last listed at lastSynced.
func staleListed(t *testing.T, staleSince, lastSynced int64) machine.Item {
	item := sandboxIn(t, machine.SandboxStale)
	item["stale_since"], item["last_synced"] = num(staleSince), num(lastSynced)
	return item
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
		{"another_failure_counted_under_a_give_up", machine.SandboxStuck, machine.SandboxPendingDeletion, "deletion_retry_count", num(10)},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			read := sandboxIn(t, c.State)
			switch c.Transition {
			case machine.SandboxExpire:
				read["allocated_at"] = num(now - 6*3600) // due when read
			case machine.SandboxStuck:
				read["deletion_retry_count"] = num(9) // the last attempt when read
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

	assert.Equal(t, now+4*60, integer(t, next, "next_cleanup_at"), "the third failure waits 1m·2²")
	assert.Equal(t, now, integer(t, next, "updated_at"))

	item := failedTimes(t, 9)
	item["next_cleanup_at"] = num(now - 1)
	out := machine.Sandbox.Decide(machine.Sandbox.Transition(machine.SandboxStuck), item, item, input())
	require.True(t, out.Applies(), out.Reason)
	next = out.Next
	assert.Equal(t, machine.SandboxCleanupStuck, str(t, next, "status"))
	assert.Equal(t, int64(10), integer(t, next, "deletion_retry_count"))
	assert.Equal(t, "provider said no", str(t, next, "last_deletion_error"))
	assert.NotContains(t, next, "next_cleanup_at", "no attempt is due any more")

	next = decide(machine.SandboxMarkStale, machine.SandboxAllocated)
	assert.Equal(t, int64(0), integer(t, next, "allocated_at"), "the seed's STALE item")
	assert.NotContains(t, next, "allocated_to_track")
	assert.NotContains(t, next, "idempotency_key")
	assert.Equal(t, now, integer(t, next, "stale_since"))
	assert.Equal(t, now, integer(t, next, "updated_at"))

	for _, state := range machine.Sandbox.States {
		next = decide(machine.SandboxMarkListed, state)
		assert.Equal(t, state, str(t, next, "status"))
		assert.Equal(t, now, integer(t, next, "last_synced"), state)
		assert.Equal(t, now-3600, integer(t, next, "updated_at"), "%s: a refresh is no change of state", state)
	}

	stale := staleListed(t, now-60, now-120)
	stale["allocated_to_track"] = &types.AttributeValueMemberS{Value: track} // staled before stale sandboxes dropped it
	out = machine.Sandbox.Decide(machine.Sandbox.Transition(machine.SandboxReinstate), stale, stale, input())
	require.True(t, out.Applies(), out.Reason)
	next = out.Next
	assert.Equal(t, machine.SandboxAvailable, str(t, next, "status"))
	assert.Equal(t, int64(0), integer(t, next, "allocated_at"))
	for _, attr := range []string{"allocated_to_track", "idempotency_key", "stale_since"} {
		assert.NotContains(t, next, attr)
	}

	next = decide(machine.SandboxAdd, machine.Absent)
	assert.Equal(t, "SBX#s-2", str(t, next, "PK"))
	assert.Equal(t, "s-2", str(t, next, "sandbox_id"))
	assert.Equal(t, "ext-2", str(t, next, "external_id"))
	assert.Equal(t, int64(0), integer(t, next, "allocated_at"))
	assert.Equal(t, now, integer(t, next, "last_synced"))
}

// TestCleanupPolicy_backs_off_to_its_cap: the wait after each failure
// doubles from Backoff and stops at BackoffMax, however many failures.
func TestCleanupPolicy_backs_off_to_its_cap(t *testing.T) {
	p := machine.CleanupPolicy{MaxAttempts: 50, Backoff: time.Minute, BackoffMax: time.Hour}
	var got []int64
	for n := 1; n <= 8; n++ {
		got = append(got, p.Delay(n))
	}
	assert.Equal(t, []int64{60, 120, 240, 480, 960, 1920, 3600, 3600}, got)
	assert.Equal(t, int64(3600), p.Delay(1_000_000), "no overflow")
	assert.Equal(t, machine.DefaultCleanupPolicy.Delay(3), machine.CleanupPolicy{}.Delay(3), "the zero policy is the default")
	assert.Equal(t, int64(1), machine.CleanupPolicy{MaxAttempts: 2, Backoff: time.Millisecond}.Delay(1), "at least a second")
}

// TestSandboxFailedDeletion_gives_up_on_the_last_attempt: the store's
// choice between the two outcomes of a refused deletion is the one whose
// guard holds.
func TestSandboxFailedDeletion_gives_up_on_the_last_attempt(t *testing.T) {
	in := input()
	in.Cleanup.MaxAttempts = 3
	assert.Equal(t, machine.SandboxDeletionFailed, machine.SandboxFailedDeletion(failedTimes(t, 0), in))
	assert.Equal(t, machine.SandboxDeletionFailed, machine.SandboxFailedDeletion(failedTimes(t, 1), in))
	assert.Equal(t, machine.SandboxStuck, machine.SandboxFailedDeletion(failedTimes(t, 2), in), "the third failure of three")
	in.Cleanup.MaxAttempts = 1
	assert.Equal(t, machine.SandboxStuck, machine.SandboxFailedDeletion(failedTimes(t, 0), in), "one attempt: the first failure gives up")
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

// TestSandboxAttempt_waits_out_the_backoff: a cleanup asks the provider
// once next_cleanup_at has come, or when none was ever set; the query
// filter the sweep uses says the same.
func TestSandboxAttempt_waits_out_the_backoff(t *testing.T) {
	attempt := machine.Sandbox.Transition(machine.SandboxAttempt)
	pending := sandboxIn(t, machine.SandboxPendingDeletion)
	for next, want := range map[int64]string{now + 1: machine.ReasonNotDue, now: "", now - 60: ""} {
		pending["next_cleanup_at"] = num(next)
		assert.Equal(t, want, machine.Sandbox.Decide(attempt, pending, pending, input()).Reason, "next attempt at now%+d", next-now)
	}
	filter := machine.Sandbox.Guards(attempt, input(), nil)
	got := build(t, &filter, nil)
	assert.Equal(t, "(attribute_not_exists (#0)) OR (#0 <= :0)", got.text)
	assert.Equal(t, []string{"next_cleanup_at"}, got.names)
}
