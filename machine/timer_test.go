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
	nowMs     = now * 1000
	timerUUID = "uuid-1"
	dueAt     = "2027-01-15T08:00:00.000Z"
	firing    = "cmd-due-1"
)

// timerIn is a timer record as stored: incarnation uuid-1 due at dueAt,
// held by the firing cmd-due-1 until a minute from now; nil for Absent.
func timerIn(t *testing.T, state string) machine.Item {
	t.Helper()
	if state == machine.Absent {
		return nil
	}
	item, err := attributevalue.MarshalMap(map[string]any{
		"shard_id": 3, "sort_key": "TIMER#t-1", "row_type": 2, "timer_id": "t-1", "timer_uuid": timerUUID,
		"timer_execute_at": dueAt, "timer_execute_at_with_uuid": dueAt + "#" + timerUUID, "timer_group_id": "old-group",
		"timer_callback_url": "sqs://q", "timer_retry_policy": "{}", "timer_callback_timeout_seconds": 5,
		"timer_created_at": "2027-01-15T07:00:00.000Z", "timer_attempts": 1, "timer_first_execute_at": dueAt,
		"timer_firing_by": firing, "timer_firing_until": nowMs + 60_000,
	})
	require.NoError(t, err)
	return item
}

// timerInput is the firing cmd-due-1 of uuid-1 due at dueAt, finishing
// (or taking) it now, with a new record due an hour later (uuid-2)
// without a group.
func timerInput(t *testing.T) machine.TimerInput {
	t.Helper()
	row, err := attributevalue.MarshalMap(map[string]any{
		"shard_id": 3, "sort_key": "TIMER#t-1", "row_type": 2, "timer_id": "t-1", "timer_uuid": "uuid-2",
		"timer_execute_at": "2027-01-15T09:00:00.000Z", "timer_execute_at_with_uuid": "2027-01-15T09:00:00.000Z#uuid-2",
		"timer_callback_url": "sqs://q", "timer_retry_policy": "{}", "timer_callback_timeout_seconds": 5,
		"timer_created_at": "2027-01-15T08:00:00.000Z", "timer_attempts": 0, "timer_first_execute_at": "2027-01-15T09:00:00.000Z",
	})
	require.NoError(t, err)
	return machine.TimerInput{Now: nowMs, Row: row, UUID: timerUUID, ExecuteAt: dueAt, Holder: firing, Until: nowMs + 30_000}
}

// TestTimer_every_state_and_transition: the timer's table, its guards as
// the firing cmd-due-1 sees its own timer; the take is refused because
// that firing already holds it (a second delivery of the same command).
func TestTimer_every_state_and_transition(t *testing.T) {
	nf := messages.ReasonNotFound
	table := map[string]map[string]cell{
		machine.TimerCreate:     {machine.Absent: {to: machine.TimerScheduled}, machine.TimerScheduled: {to: machine.TimerScheduled}},
		machine.TimerDelete:     {machine.Absent: {to: machine.Absent}, machine.TimerScheduled: {to: machine.Absent}},
		machine.TimerTake:       {machine.Absent: {reason: nf}, machine.TimerScheduled: {reason: machine.ReasonFiring}},
		machine.TimerFire:       {machine.Absent: {reason: nf}, machine.TimerScheduled: {to: machine.Absent}},
		machine.TimerReschedule: {machine.Absent: {reason: nf}, machine.TimerScheduled: {to: machine.TimerScheduled}},
		machine.TimerRetry:      {machine.Absent: {reason: nf}, machine.TimerScheduled: {to: machine.TimerScheduled}},
		machine.TimerFail:       {machine.Absent: {reason: nf}, machine.TimerScheduled: {to: machine.Absent}},
	}
	checkTable(t, machine.Timer, table, timerIn, timerInput(t))
}

// TestTimer_take_holds_one_firing_at_a_time: a delivery takes a timer due
// as scheduled whose hold is free or lapsed; another incarnation or due
// time is not_due, a live hold is firing.
func TestTimer_take_holds_one_firing_at_a_time(t *testing.T) {
	take := machine.Timer.Transition(machine.TimerTake)
	cases := []struct {
		name   string
		change func(machine.Item)
		reason string
	}{
		{"never taken", func(it machine.Item) { delete(it, "timer_firing_by"); delete(it, "timer_firing_until") }, ""},
		{"hold lapsed", func(it machine.Item) { it["timer_firing_until"] = num(nowMs - 1) }, ""},
		{"hold live", func(it machine.Item) {}, machine.ReasonFiring},
		{"replaced", func(it machine.Item) { it["timer_uuid"] = &types.AttributeValueMemberS{Value: "uuid-9"} }, machine.ReasonNotDue},
		{"moved on", func(it machine.Item) {
			it["timer_execute_at"] = &types.AttributeValueMemberS{Value: "2027-01-15T08:00:05.000Z"}
		}, machine.ReasonNotDue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			item := timerIn(t, machine.TimerScheduled)
			c.change(item)
			out := machine.Timer.Decide(take, item, item, timerInput(t))
			assert.Equal(t, c.reason, out.Reason)
			if c.reason == "" {
				assert.Equal(t, firing, str(t, out.Next, "timer_firing_by"))
				assert.Equal(t, nowMs+30_000, integer(t, out.Next, "timer_firing_until"))
			}
		})
	}
}

// TestTimer_finish_needs_the_hold: a firing finishes only the timer it
// holds; a replaced timer, or one another delivery took over, is released.
func TestTimer_finish_needs_the_hold(t *testing.T) {
	for _, name := range []string{machine.TimerFire, machine.TimerReschedule, machine.TimerRetry, machine.TimerFail} {
		tr := machine.Timer.Transition(name)
		replaced := timerIn(t, machine.TimerScheduled)
		replaced["timer_uuid"] = &types.AttributeValueMemberS{Value: "uuid-9"}
		takenOver := timerIn(t, machine.TimerScheduled)
		takenOver["timer_firing_by"] = &types.AttributeValueMemberS{Value: "cmd-due-2"}
		free := timerIn(t, machine.TimerScheduled)
		delete(free, "timer_firing_by")
		for what, item := range map[string]machine.Item{"replaced": replaced, "taken over": takenOver, "not taken": free} {
			assert.Equal(t, machine.ReasonReleased, machine.Timer.Decide(tr, item, item, timerInput(t)).Reason, "%s of a timer %s", name, what)
		}
	}
}

// TestTimer_transitions_set_what_they_declare: a creation writes the new
// record whole (nothing of the timer it replaces survives); a retry or a
// rescheduling moves the due time and drops the hold.
func TestTimer_transitions_set_what_they_declare(t *testing.T) {
	old := timerIn(t, machine.TimerScheduled)
	in := timerInput(t)
	created := machine.Timer.Decide(machine.Timer.Transition(machine.TimerCreate), old, old, in).Next
	assert.Equal(t, in.Row, created, "the record as given, no group or hold of the old one")

	for _, name := range []string{machine.TimerRetry, machine.TimerReschedule} {
		next := machine.Timer.Decide(machine.Timer.Transition(name), old, old, in).Next
		assert.Equal(t, "2027-01-15T09:00:00.000Z", str(t, next, "timer_execute_at"), name)
		assert.Equal(t, "2027-01-15T09:00:00.000Z#uuid-2", str(t, next, "timer_execute_at_with_uuid"), name)
		assert.Equal(t, "old-group", str(t, next, "timer_group_id"), "%s keeps the rest of the timer", name)
		assert.NotContains(t, next, "timer_firing_by", name)
		assert.NotContains(t, next, "timer_firing_until", name)
	}
}

// TestTimer_delete_pins_the_incarnation_it_read: a timer created or
// replaced after the read makes the delete stale (read again), not a
// rejection and not a blind delete.
func TestTimer_delete_pins_the_incarnation_it_read(t *testing.T) {
	del := machine.Timer.Transition(machine.TimerDelete)
	current := timerIn(t, machine.TimerScheduled)
	assert.True(t, machine.Timer.Decide(del, current, nil, timerInput(t)).Stale, "created since it was read absent")
	replaced := timerIn(t, machine.TimerScheduled)
	replaced["timer_uuid"] = &types.AttributeValueMemberS{Value: "uuid-9"}
	assert.True(t, machine.Timer.Decide(del, replaced, current, timerInput(t)).Stale, "replaced since it was read")

	cond := machine.Timer.Condition(del, timerInput(t), nil)
	got := build(t, &cond, nil)
	assert.Contains(t, got.text, "attribute_not_exists", "read absent, it must still be absent")
	assert.Empty(t, got.values)
}

// shardIn is a shard record at version 4 owned by i-1; nil for Absent.
func shardIn(t *testing.T, state string) machine.Item {
	t.Helper()
	if state == machine.Absent {
		return nil
	}
	item, err := attributevalue.MarshalMap(map[string]any{
		"shard_id": 3, "sort_key": "SHARD", "row_type": 1, "shard_version": 4, "shard_owner_id": "i-1",
		"shard_claimed_at": "2027-01-15T08:00:00.000Z",
	})
	require.NoError(t, err)
	return item
}

// TestShard_every_state_and_transition: the record's table for a writer
// holding version 4 as i-1 (so a hold before any claim is refused: the
// record exists).
func TestShard_every_state_and_transition(t *testing.T) {
	nf, ws := messages.ReasonNotFound, messages.ReasonWrongState
	table := map[string]map[string]cell{
		// From absent the claim is the writer's, who read the record at 4: moved.
		machine.ShardClaim:         {machine.Absent: {reason: machine.ReasonShardMoved}, machine.ShardRecorded: {to: machine.ShardRecorded}},
		machine.ShardRenew:         {machine.Absent: {reason: nf}, machine.ShardRecorded: {to: machine.ShardRecorded}},
		machine.ShardRelease:       {machine.Absent: {reason: nf}, machine.ShardRecorded: {to: machine.ShardRecorded}},
		machine.ShardHold:          {machine.Absent: {reason: nf}, machine.ShardRecorded: {to: machine.ShardRecorded}},
		machine.ShardHoldUnclaimed: {machine.Absent: {to: machine.Absent}, machine.ShardRecorded: {reason: ws}},
	}
	in := machine.ShardInput{Version: 4, Owner: "i-1", Row: shardIn(t, machine.ShardRecorded), ClaimedAt: "2027-01-15T08:00:05.000Z"}
	checkTable(t, machine.Shard, table, shardIn, in)
}

// TestShard_a_writer_that_lost_the_shard_is_refused: another version or
// owner than the writer holds is moved, whatever it tries.
func TestShard_a_writer_that_lost_the_shard_is_refused(t *testing.T) {
	record := shardIn(t, machine.ShardRecorded)
	for _, in := range []machine.ShardInput{{Version: 3, Owner: "i-1"}, {Version: 4, Owner: "i-2"}, {Version: 0}} {
		for _, name := range []string{machine.ShardRenew, machine.ShardRelease, machine.ShardHold, machine.ShardClaim} {
			if name == machine.ShardClaim || name == machine.ShardHold {
				if in.Version == 4 {
					continue // they hold the version alone, not the owner
				}
			}
			out := machine.Shard.Decide(machine.Shard.Transition(name), record, record, in)
			assert.Equal(t, machine.ReasonShardMoved, out.Reason, "%s at version %d as %q", name, in.Version, in.Owner)
		}
	}
	first := machine.Shard.Decide(machine.Shard.Transition(machine.ShardClaim), nil, nil, machine.ShardInput{Row: record})
	require.True(t, first.Applies(), "a first claim finds no record")
	released := machine.Shard.Decide(machine.Shard.Transition(machine.ShardRelease), record, record, machine.ShardInput{Version: 4, Owner: "i-1"}).Next
	assert.Equal(t, int64(5), integer(t, released, "shard_version"))
	assert.Equal(t, "", str(t, released, "shard_owner_id"))
}
