package machine_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
)

const (
	roleA       = "arn:aws:iam::123456789012:role/transit"
	roleB       = "arn:aws:iam::123456789012:role/transit-v2"
	startAt     = "2027-01-15T08:00:00.000Z" // the start window that fires
	stopAt      = "2027-01-15T18:00:00.000Z"
	nextStartAt = "2027-01-16T08:00:00.000Z"
	nextStopAt  = "2027-01-16T18:00:00.000Z"
	window      = messages.EdgeStart + "@" + startAt
	lastWindow  = messages.EdgeStop + "@2027-01-14T18:00:00.000Z"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// accountIn is account 123456789012, "prod", with roleA, in state; a
// failed one records its error. nil for Absent.
func accountIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	fields := map[string]any{"pk": "ACCOUNT#123456789012", "sk": "METADATA", "gsi1pk": "TYPE#ACCOUNT", "gsi1sk": "prod",
		"account_id": "123456789012", "account_name": "prod", "role_arn": roleA, "status": state,
		"created_at": isoPast, "updated_at": isoPast}
	if state != messages.AccountPending {
		fields["last_test_run_at"] = isoPast
	}
	if state == messages.AccountFailed {
		fields["last_test_error"] = "AccessDenied"
	}
	return item(t, fields)
}

// accountInput renames to "production" and tests roleA (the account's
// role), the test failing with "expired"; Row is the account registered.
func accountInput(t *testing.T) machine.NucleusInput {
	row := item(t, map[string]any{"pk": "ACCOUNT#123456789012", "sk": "METADATA", "gsi1pk": "TYPE#ACCOUNT", "gsi1sk": "prod",
		"account_id": "123456789012", "account_name": "prod", "role_arn": roleA, "created_at": isoNow, "updated_at": isoNow})
	return machine.NucleusInput{Now: isoNow, Row: row, Name: "production", Role: roleA, Error: "expired"}
}

// TestAccount_every_state_and_transition: the account's table, tested
// with the role it has.
func TestAccount_every_state_and_transition(t *testing.T) {
	nf, dup := messages.ReasonNotFound, messages.ReasonAlreadyExists
	pending, active, failed := messages.AccountPending, messages.AccountActive, messages.AccountFailed
	table := map[string]map[string]cell{
		machine.AccountRegister: {machine.Absent: {to: pending}, pending: {reason: dup}, active: {reason: dup}, failed: {reason: dup}},
		machine.AccountRename:   {machine.Absent: {reason: nf}, pending: {to: pending}, active: {to: active}, failed: {to: failed}},
		machine.AccountRerole:   {machine.Absent: {reason: nf}, pending: {to: pending}, active: {to: pending}, failed: {to: pending}},
		machine.AccountPass:     {machine.Absent: {reason: nf}, pending: {to: active}, active: {to: active}, failed: {to: active}},
		machine.AccountFail:     {machine.Absent: {reason: nf}, pending: {to: failed}, active: {to: failed}, failed: {to: failed}},
		machine.AccountExists: {machine.Absent: {reason: messages.ReasonAccountNotFound}, pending: {to: pending},
			active: {to: active}, failed: {to: failed}},
	}
	checkTable(t, machine.Account, table, accountIn, accountInput(t))
}

// TestAccount_a_test_of_another_role_is_role_changed: in every state, a
// test of a role the account no longer has records nothing; an account
// that does not exist is not_found first.
func TestAccount_a_test_of_another_role_is_role_changed(t *testing.T) {
	in := accountInput(t)
	in.Role = roleB
	for _, name := range []string{machine.AccountPass, machine.AccountFail} {
		tr := machine.Account.Transition(name)
		for _, state := range machine.Account.States {
			it := accountIn(t, state)
			out := machine.Account.Decide(tr, it, it, in)
			assert.Equal(t, messages.ReasonRoleChanged, out.Reason, "%s from %s", name, state)
			assert.Equal(t, messages.NucleusRejected, out.Event)
			assert.Nil(t, out.Next)
		}
		assert.Equal(t, messages.ReasonNotFound, machine.Account.Decide(tr, nil, nil, in).Reason, name)
	}
	in.Role = ""
	it := accountIn(t, messages.AccountActive)
	assert.Equal(t, messages.ReasonRoleChanged, machine.Account.Decide(machine.Account.Transition(machine.AccountPass), it, it, in).Reason,
		"no role tested is no role of the account")

	cond := machine.Account.Condition(machine.Account.Transition(machine.AccountPass), accountInput(t), accountIn(t, messages.AccountPending))
	got := build(t, &cond, nil)
	assert.Equal(t, []string{"role_arn", "status"}, got.names)
	assert.Contains(t, got.values, roleA)
}

// TestAccount_transitions_set_what_they_declare: a registration writes
// the row pending; a rename moves the name and its index key, nothing
// else; a new role makes it pending, untested; a test records when, and
// its error only when it failed.
func TestAccount_transitions_set_what_they_declare(t *testing.T) {
	in := accountInput(t)
	decide := func(name, state string, in machine.NucleusInput) machine.Item {
		t.Helper()
		it := accountIn(t, state)
		out := machine.Account.Decide(machine.Account.Transition(name), it, it, in)
		require.True(t, out.Applies(), "%s from %s: %s", name, state, out.Reason)
		return out.Next
	}

	registered := decide(machine.AccountRegister, machine.Absent, in)
	assert.Equal(t, messages.AccountPending, str(t, registered, "status"))
	for attr, v := range in.Row {
		assert.Equal(t, v, registered[attr], attr)
	}
	assert.Len(t, registered, len(in.Row)+1, "the row and its status")
	assert.Equal(t, messages.AccountRegistered, machine.Account.Decide(machine.Account.Transition(machine.AccountRegister), nil, nil, in).Event)

	renamed := decide(machine.AccountRename, messages.AccountFailed, in)
	assert.Equal(t, "production", str(t, renamed, "account_name"))
	assert.Equal(t, "production", str(t, renamed, "gsi1sk"), "the name index follows the name")
	assert.Equal(t, isoNow, str(t, renamed, "updated_at"))
	assert.Equal(t, roleA, str(t, renamed, "role_arn"))
	assert.Equal(t, messages.AccountFailed, str(t, renamed, "status"))
	assert.Equal(t, "AccessDenied", str(t, renamed, "last_test_error"), "a rename keeps the last test")

	rerole := in
	rerole.Role, rerole.Name = roleB, ""
	reroled := decide(machine.AccountRerole, messages.AccountFailed, rerole)
	assert.Equal(t, roleB, str(t, reroled, "role_arn"))
	assert.Equal(t, messages.AccountPending, str(t, reroled, "status"))
	assert.NotContains(t, reroled, "last_test_error", "a new role is untested")
	assert.Equal(t, "prod", str(t, reroled, "account_name"), "no name given: kept")
	assert.Equal(t, "prod", str(t, reroled, "gsi1sk"))
	rerole.Name = "production"
	both := decide(machine.AccountRerole, messages.AccountActive, rerole)
	assert.Equal(t, "production", str(t, both, "account_name"))
	assert.Equal(t, "production", str(t, both, "gsi1sk"))
	update := machine.Account.Update(machine.Account.Transition(machine.AccountRename), machine.NucleusInput{Now: isoNow}, accountIn(t, messages.AccountActive))
	got := build(t, nil, &update)
	assert.Equal(t, []string{"updated_at"}, got.names, "a rename without a name changes only updated_at")

	passed := decide(machine.AccountPass, messages.AccountFailed, in)
	assert.Equal(t, isoNow, str(t, passed, "last_test_run_at"))
	assert.NotContains(t, passed, "last_test_error", "a passed test clears the error")
	assert.Equal(t, "prod", str(t, passed, "account_name"))
	failedNext := decide(machine.AccountFail, messages.AccountActive, in)
	assert.Equal(t, isoNow, str(t, failedNext, "last_test_run_at"))
	assert.Equal(t, "expired", str(t, failedNext, "last_test_error"))
	assert.Equal(t, messages.AccountTested, machine.Account.Transition(machine.AccountFail).Event)

	active := accountIn(t, messages.AccountActive)
	assert.Equal(t, active, decide(machine.AccountExists, messages.AccountActive, in), "a check changes nothing")
	assert.True(t, machine.Account.Transition(machine.AccountExists).Checks())
}

// scheduleIn is schedule s-1 with three resources, created in the past,
// in state: enabled ones have their windows armed (start at startAt).
// nil for Absent.
func scheduleIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	fields := map[string]any{"pk": "SCHEDULE#s-1", "sk": "METADATA", "gsi1pk": "TYPE#SCHEDULE", "gsi1sk": "office",
		"schedule_id": "s-1", "schedule_name": "office", "start_cron": "0 8 * * 1-5", "end_cron": "0 18 * * 1-5",
		"timezone": "Europe/Paris", "enabled": state == machine.ScheduleEnabled, "schedule_state": state,
		"resource_count": 3, "created_at": isoPast, "updated_at": isoPast}
	if state == machine.ScheduleEnabled {
		fields["next_start_at"], fields["next_stop_at"] = startAt, stopAt
	}
	return item(t, fields)
}

// scheduleRow is the schedule an upsert writes: renamed, enabled with
// its windows or disabled without.
func scheduleRow(t *testing.T, enabled bool) machine.Item {
	fields := map[string]any{"pk": "SCHEDULE#s-1", "sk": "METADATA", "gsi1pk": "TYPE#SCHEDULE", "gsi1sk": "office hours",
		"schedule_id": "s-1", "schedule_name": "office hours", "start_cron": "0 9 * * 1-5", "end_cron": "0 17 * * 1-5",
		"timezone": "Europe/Paris", "enabled": enabled, "updated_at": isoNow}
	if enabled {
		fields["next_start_at"], fields["next_stop_at"] = nextStartAt, nextStopAt
	}
	return item(t, fields)
}

// scheduleInput is the start window at startAt, moving on to
// nextStartAt; an enable arms nextStartAt and nextStopAt.
func scheduleInput(t *testing.T) machine.NucleusInput {
	return machine.NucleusInput{Now: isoNow, Row: scheduleRow(t, true), NextStart: nextStartAt, NextStop: nextStopAt,
		WindowAt: startAt, Next: nextStartAt}
}

// TestSchedule_every_state_and_transition: the schedule's table, for the
// start window armed on an enabled schedule: its stop edge's advance is
// superseded (the window is not the stop's), and a disabled schedule's
// windows are disabled before anything else.
func TestSchedule_every_state_and_transition(t *testing.T) {
	nf := messages.ReasonNotFound
	on, off := machine.ScheduleEnabled, machine.ScheduleDisabled
	table := map[string]map[string]cell{
		machine.ScheduleUpsertOn:  {machine.Absent: {to: on}, on: {to: on}, off: {to: on}},
		machine.ScheduleUpsertOff: {machine.Absent: {to: off}, on: {to: off}, off: {to: off}},
		machine.ScheduleEnable:    {machine.Absent: {reason: nf}, on: {to: on}, off: {to: on}},
		machine.ScheduleDisable:   {machine.Absent: {reason: nf}, on: {to: off}, off: {to: off}},
		machine.ScheduleDelete:    {machine.Absent: {reason: nf}, on: {to: machine.Absent}, off: {to: machine.Absent}},
		machine.ScheduleAttach:    {machine.Absent: {reason: nf}, on: {to: on}, off: {to: off}},
		machine.ScheduleDetach:    {machine.Absent: {reason: nf}, on: {to: on}, off: {to: off}},
		machine.ScheduleAdvStart:  {machine.Absent: {reason: nf}, on: {to: on}, off: {reason: messages.ReasonDisabled}},
		machine.ScheduleAdvStop:   {machine.Absent: {reason: nf}, on: {reason: messages.ReasonSuperseded}, off: {reason: messages.ReasonDisabled}},
	}
	checkTable(t, machine.Schedule, table, scheduleIn, scheduleInput(t))
}

// TestSchedule_resource_count_serialises_its_changes: the count read is
// pinned (a change since is stale, not a rejection, even where the
// schedule is full now); attaching needs room below
// MaxScheduleResources; attaching and detaching count.
func TestSchedule_resource_count_serialises_its_changes(t *testing.T) {
	in := scheduleInput(t)
	attach, detach := machine.Schedule.Transition(machine.ScheduleAttach), machine.Schedule.Transition(machine.ScheduleDetach)
	withCount := func(n int64) machine.Item {
		it := scheduleIn(t, machine.ScheduleEnabled)
		it["resource_count"] = num(n)
		return it
	}

	for _, name := range []string{machine.ScheduleUpsertOn, machine.ScheduleUpsertOff, machine.ScheduleDelete, machine.ScheduleAttach, machine.ScheduleDetach} {
		tr := machine.Schedule.Transition(name)
		out := machine.Schedule.Decide(tr, withCount(4), withCount(3), in)
		assert.True(t, out.Stale, "%s: a resource attached since the read", name)
		assert.Empty(t, out.Reason, name)
		assert.Nil(t, out.Next, name)
	}
	assert.True(t, machine.Schedule.Decide(machine.Schedule.Transition(machine.ScheduleUpsertOn), withCount(0), nil, in).Stale,
		"an upsert read absent, created since")
	assert.True(t, machine.Schedule.Decide(attach, withCount(messages.MaxScheduleResources), withCount(messages.MaxScheduleResources-1), in).Stale,
		"the pin before the room: full since the read is read again")

	full := withCount(messages.MaxScheduleResources)
	out := machine.Schedule.Decide(attach, full, full, in)
	assert.Equal(t, messages.ReasonScheduleFull, out.Reason)
	assert.Equal(t, messages.NucleusRejected, out.Event)
	assert.False(t, out.Stale)
	last := withCount(messages.MaxScheduleResources - 1)
	next := machine.Schedule.Decide(attach, last, last, in).Next
	assert.Equal(t, int64(messages.MaxScheduleResources), integer(t, next, "resource_count"), "the last one fits")
	assert.True(t, machine.Schedule.Decide(detach, full, full, in).Applies(), "a full schedule detaches")

	three := withCount(3)
	assert.Equal(t, int64(4), integer(t, machine.Schedule.Decide(attach, three, three, in).Next, "resource_count"))
	assert.Equal(t, int64(2), integer(t, machine.Schedule.Decide(detach, three, three, in).Next, "resource_count"))
	assert.Equal(t, startAt, str(t, machine.Schedule.Decide(attach, three, three, in).Next, "next_start_at"), "the rest is kept")

	cond := machine.Schedule.Condition(attach, in, three)
	got := build(t, &cond, nil)
	assert.Equal(t, []string{"resource_count", "schedule_state"}, got.names)
	assert.Contains(t, got.values, "3", "the count as read")
	assert.Contains(t, got.values, "50", "the room")
	assert.Contains(t, got.text, "<", "room is below the bound")
	update := machine.Schedule.Update(attach, in, three)
	assert.Contains(t, build(t, nil, &update).values, "4")

	created := machine.Schedule.Condition(machine.Schedule.Transition(machine.ScheduleUpsertOn), in, nil)
	got = build(t, &created, nil)
	assert.Equal(t, 2, strings.Count(got.text, "attribute_not_exists"), "no schedule, or one read without a count: still none")
}

// TestSchedule_upsert_writes_it_whole_keeping_created_at_and_count: an
// upsert is a put of the row given; a new schedule is created now with no
// resources; an existing one keeps when it was created and its count,
// and loses what the row leaves out (a disabled one's windows).
func TestSchedule_upsert_writes_it_whole_keeping_created_at_and_count(t *testing.T) {
	on, off := machine.Schedule.Transition(machine.ScheduleUpsertOn), machine.Schedule.Transition(machine.ScheduleUpsertOff)
	in := scheduleInput(t)

	created := machine.Schedule.Decide(on, nil, nil, in)
	require.True(t, created.Applies())
	assert.Equal(t, messages.ScheduleUpserted, created.Event)
	assert.Equal(t, isoNow, str(t, created.Next, "created_at"), "a new schedule is created now")
	assert.Equal(t, int64(0), integer(t, created.Next, "resource_count"), "with no resources")
	assert.Equal(t, machine.ScheduleEnabled, str(t, created.Next, "schedule_state"))
	assert.Equal(t, nextStartAt, str(t, created.Next, "next_start_at"))
	assert.Equal(t, created.Next, machine.Schedule.Created(on, in, nil), "the put is the item decided")

	old := scheduleIn(t, machine.ScheduleDisabled)
	replaced := machine.Schedule.Decide(on, old, old, in).Next
	assert.Equal(t, isoPast, str(t, replaced, "created_at"), "created_at kept across an upsert")
	assert.Equal(t, int64(3), integer(t, replaced, "resource_count"), "its resources kept")
	assert.Equal(t, "office hours", str(t, replaced, "schedule_name"))
	assert.Equal(t, "office hours", str(t, replaced, "gsi1sk"))
	assert.Equal(t, "0 9 * * 1-5", str(t, replaced, "start_cron"))
	assert.Equal(t, nextStopAt, str(t, replaced, "next_stop_at"))
	assert.Equal(t, isoNow, str(t, replaced, "updated_at"))

	in.Row = scheduleRow(t, false)
	enabled := scheduleIn(t, machine.ScheduleEnabled)
	disabled := machine.Schedule.Decide(off, enabled, enabled, in).Next
	assert.Equal(t, machine.ScheduleDisabled, str(t, disabled, "schedule_state"))
	assert.False(t, disabled["enabled"].(*types.AttributeValueMemberBOOL).Value)
	assert.NotContains(t, disabled, "next_start_at", "a disabled schedule's row has no windows, and the put drops the old ones")
	assert.NotContains(t, disabled, "next_stop_at")
	assert.Equal(t, isoPast, str(t, disabled, "created_at"))
	assert.Equal(t, int64(3), integer(t, disabled, "resource_count"))
}

// TestSchedule_enable_arms_and_disable_forgets_the_windows.
func TestSchedule_enable_arms_and_disable_forgets_the_windows(t *testing.T) {
	in := scheduleInput(t)
	enable, disable := machine.Schedule.Transition(machine.ScheduleEnable), machine.Schedule.Transition(machine.ScheduleDisable)

	off := scheduleIn(t, machine.ScheduleDisabled)
	out := machine.Schedule.Decide(enable, off, off, in)
	require.True(t, out.Applies())
	assert.Equal(t, messages.ScheduleEnabled, out.Event)
	assert.True(t, out.Next["enabled"].(*types.AttributeValueMemberBOOL).Value)
	assert.Equal(t, nextStartAt, str(t, out.Next, "next_start_at"))
	assert.Equal(t, nextStopAt, str(t, out.Next, "next_stop_at"))
	assert.Equal(t, isoNow, str(t, out.Next, "updated_at"))
	assert.Equal(t, isoPast, str(t, out.Next, "created_at"))
	assert.Equal(t, int64(3), integer(t, out.Next, "resource_count"))
	on := scheduleIn(t, machine.ScheduleEnabled)
	assert.Equal(t, nextStartAt, str(t, machine.Schedule.Decide(enable, on, on, in).Next, "next_start_at"), "enabling again re-arms")

	out = machine.Schedule.Decide(disable, on, on, in)
	require.True(t, out.Applies())
	assert.Equal(t, messages.ScheduleDisabled, out.Event)
	assert.False(t, out.Next["enabled"].(*types.AttributeValueMemberBOOL).Value)
	assert.NotContains(t, out.Next, "next_start_at")
	assert.NotContains(t, out.Next, "next_stop_at")
	assert.Equal(t, int64(3), integer(t, out.Next, "resource_count"))
	update := machine.Schedule.Update(disable, in, on)
	got := build(t, nil, &update)
	assert.Contains(t, got.text, "REMOVE")
	assert.Equal(t, []string{"enabled", "next_start_at", "next_stop_at", "schedule_state", "updated_at"}, got.names)

	deleted := machine.Schedule.Decide(machine.Schedule.Transition(machine.ScheduleDelete), on, on, in)
	assert.Nil(t, deleted.Next)
	assert.Equal(t, messages.ScheduleDeleted, deleted.Event)
}

// TestSchedule_a_window_advances_only_as_armed: each edge moves its own
// window on, if the window that fired is still the one armed (else
// superseded) and the schedule is enabled (disabled first).
func TestSchedule_a_window_advances_only_as_armed(t *testing.T) {
	on := scheduleIn(t, machine.ScheduleEnabled)
	start, stop := machine.Schedule.Transition(machine.ScheduleAdvStart), machine.Schedule.Transition(machine.ScheduleAdvStop)

	out := machine.Schedule.Decide(start, on, on, scheduleInput(t))
	require.True(t, out.Applies())
	assert.Equal(t, messages.ScheduleWindowExecuted, out.Event)
	assert.Equal(t, nextStartAt, str(t, out.Next, "next_start_at"))
	assert.Equal(t, stopAt, str(t, out.Next, "next_stop_at"), "the other edge's window is kept")

	stopIn := machine.NucleusInput{WindowAt: stopAt, Next: nextStopAt}
	out = machine.Schedule.Decide(stop, on, on, stopIn)
	require.True(t, out.Applies())
	assert.Equal(t, nextStopAt, str(t, out.Next, "next_stop_at"))
	assert.Equal(t, startAt, str(t, out.Next, "next_start_at"))
	assert.Equal(t, messages.ReasonSuperseded, machine.Schedule.Decide(start, on, on, stopIn).Reason)

	retimed := scheduleIn(t, machine.ScheduleEnabled)
	retimed["next_start_at"] = s("2027-01-15T09:00:00.000Z")
	out = machine.Schedule.Decide(start, retimed, retimed, scheduleInput(t))
	assert.Equal(t, messages.ReasonSuperseded, out.Reason)
	assert.Equal(t, messages.NucleusRejected, out.Event)

	off := scheduleIn(t, machine.ScheduleDisabled)
	off["next_start_at"] = s(startAt) // were it still armed, disabled decides
	assert.Equal(t, messages.ReasonDisabled, machine.Schedule.Decide(start, off, off, scheduleInput(t)).Reason)
}

// resourceIn is an EC2 instance of schedule s-1 in state: one that has
// acted records the last window (a stop, the day before); an acting one
// is held by window until isoNext; a stopped one remembers a desired
// count of 2, a failed one its error. nil for Absent.
func resourceIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	fields := map[string]any{"pk": "SCHEDULE#s-1", "sk": "RESOURCE#arn:aws:ec2:eu-west-3:123456789012:instance/i-1",
		"gsi1pk": "ACCOUNT#123456789012", "gsi1sk": "SCHEDULE#s-1", "resource_arn": "arn:aws:ec2:eu-west-3:123456789012:instance/i-1",
		"resource_type": "ec2", "region": "eu-west-3", "account_id": "123456789012", "schedule_id": "s-1", "attached_at": isoPast}
	if state != machine.ResourceAttached {
		fields["execution_state"] = state
		fields["last_window"], fields["last_status"], fields["last_executed_at"] = lastWindow, messages.ExecSuccess, isoPast
		fields["desired_count"] = 2
	}
	switch state {
	case machine.ResourceActing:
		fields["window"], fields["acting_until"] = window, isoNext
	case machine.ResourceFailed:
		fields["last_status"], fields["last_error"] = messages.ExecFail, "UnauthorizedOperation"
	}
	return item(t, fields)
}

// resourceInput is the start window at startAt, claiming until isoNext
// and finishing a stop that found a desired count of 3.
func resourceInput(t *testing.T) machine.NucleusInput {
	row := item(t, map[string]any{"pk": "SCHEDULE#s-1", "sk": "RESOURCE#arn:aws:ecs:eu-west-3:123456789012:service/c/web",
		"gsi1pk": "ACCOUNT#123456789012", "gsi1sk": "SCHEDULE#s-1", "resource_arn": "arn:aws:ecs:eu-west-3:123456789012:service/c/web",
		"resource_type": "ecs", "region": "eu-west-3", "account_id": "123456789012", "schedule_id": "s-1", "attached_at": isoNow})
	return machine.NucleusInput{Now: isoNow, Row: row, Window: window, ActingUntil: isoNext, Status: messages.ExecSuccess,
		Error: "ThrottlingException", Count: 3}
}

// TestResource_every_state_and_transition: the resource's table for the
// start window: it claims a resource in any state but the one it already
// holds, whose hold is live (busy), and finishes only what it holds.
func TestResource_every_state_and_transition(t *testing.T) {
	nf, ws, dup := messages.ReasonNotFound, messages.ReasonWrongState, messages.ReasonAlreadyExists
	const (
		absent   = machine.Absent
		attached = machine.ResourceAttached
		acting   = machine.ResourceActing
		running  = machine.ResourceRunning
		stopped  = machine.ResourceStopped
		failed   = machine.ResourceFailed
	)
	finish := func(to string) map[string]cell {
		return map[string]cell{absent: {reason: nf}, attached: {reason: ws}, acting: {to: to}, running: {reason: ws},
			stopped: {reason: ws}, failed: {reason: ws}}
	}
	table := map[string]map[string]cell{
		machine.ResourceAttach: {absent: {to: attached}, attached: {reason: dup}, acting: {reason: dup}, running: {reason: dup},
			stopped: {reason: dup}, failed: {reason: dup}},
		machine.ResourceDetach: {absent: {reason: nf}, attached: {to: absent}, acting: {to: absent}, running: {to: absent},
			stopped: {to: absent}, failed: {to: absent}},
		machine.ResourceClaim: {absent: {reason: nf}, attached: {to: acting}, acting: {reason: machine.ReasonBusy}, running: {to: acting},
			stopped: {to: acting}, failed: {to: acting}},
		machine.ResourceStart: finish(running),
		machine.ResourceStop:  finish(stopped),
		machine.ResourceFail:  finish(failed),
	}
	checkTable(t, machine.Resource, table, resourceIn, resourceInput(t))
}

// TestResource_a_window_claims_once_at_a_time: a window that is a
// resource's last has acted (whether or not a hold is live: acted comes
// first); a live hold is busy until it lapses (acting_until before now);
// a claim holds the resource for the window.
func TestResource_a_window_claims_once_at_a_time(t *testing.T) {
	claim := machine.Resource.Transition(machine.ResourceClaim)
	cases := []struct {
		name   string
		state  string
		change func(machine.Item)
		reason string
	}{
		{"never acted", machine.ResourceAttached, func(machine.Item) {}, ""},
		{"acted on by another window", machine.ResourceStopped, func(machine.Item) {}, ""},
		{"acted on by this window", machine.ResourceRunning, func(it machine.Item) { it["last_window"] = s(window) }, machine.ReasonActed},
		{"acted, and held by a later delivery", machine.ResourceActing, func(it machine.Item) { it["last_window"] = s(window) }, machine.ReasonActed},
		{"held live", machine.ResourceActing, func(machine.Item) {}, machine.ReasonBusy},
		{"held until now", machine.ResourceActing, func(it machine.Item) { it["acting_until"] = s(isoNow) }, machine.ReasonBusy},
		{"hold lapsed", machine.ResourceActing, func(it machine.Item) { it["acting_until"] = s(isoPast) }, ""},
		{"held by another window", machine.ResourceActing, func(it machine.Item) { it["window"] = s(lastWindow) }, machine.ReasonBusy},
		{"last window of another type", machine.ResourceRunning, func(it machine.Item) { it["last_window"] = num(1) }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it := resourceIn(t, c.state)
			c.change(it)
			out := machine.Resource.Decide(claim, it, it, resourceInput(t))
			assert.False(t, out.Stale)
			assert.Equal(t, c.reason, out.Reason)
			if c.reason != "" {
				assert.Nil(t, out.Next)
				return
			}
			assert.Equal(t, machine.ResourceActing, str(t, out.Next, "execution_state"))
			assert.Equal(t, window, str(t, out.Next, "window"))
			assert.Equal(t, isoNext, str(t, out.Next, "acting_until"))
			assert.Equal(t, it["last_window"], out.Next["last_window"], "the last window is the finish's to record")
		})
	}

	cond := machine.Resource.Condition(claim, resourceInput(t), resourceIn(t, machine.ResourceRunning))
	got := build(t, &cond, nil)
	assert.Contains(t, got.text, "<>", "not acted: last_window <> the window")
	assert.Equal(t, 3, strings.Count(got.text, "attribute_not_exists"), "unset state, no last window, no hold")
	assert.Equal(t, []string{"acting_until", "execution_state", "last_window", "pk"}, got.names)
	assert.Contains(t, got.values, window)
	assert.Contains(t, got.values, isoNow)
}

// TestResource_a_finish_records_the_window_it_holds: only the window
// holding the resource finishes it (superseded otherwise, after
// wrong_state); every finish records the window, its status and when,
// and drops the hold; a success clears the last error, a failure sets
// it; a stop remembers the desired count it found, unless it found 0.
func TestResource_a_finish_records_the_window_it_holds(t *testing.T) {
	in := resourceInput(t)
	names := []string{machine.ResourceStart, machine.ResourceStop, machine.ResourceFail}
	for _, name := range names {
		tr := machine.Resource.Transition(name)
		other := resourceIn(t, machine.ResourceActing)
		other["window"] = s(lastWindow)
		assert.Equal(t, messages.ReasonSuperseded, machine.Resource.Decide(tr, other, other, in).Reason, "%s by a window that lost the hold", name)
		running := resourceIn(t, machine.ResourceRunning)
		running["window"] = s(window)
		assert.Equal(t, messages.ReasonWrongState, machine.Resource.Decide(tr, running, running, in).Reason, "%s: the state first", name)

		failedBefore := resourceIn(t, machine.ResourceActing)
		failedBefore["last_error"] = s("UnauthorizedOperation")
		out := machine.Resource.Decide(tr, failedBefore, failedBefore, in)
		require.True(t, out.Applies(), "%s: %s", name, out.Reason)
		next := out.Next
		assert.Equal(t, window, str(t, next, "last_window"), name)
		assert.Equal(t, messages.ExecSuccess, str(t, next, "last_status"), name)
		assert.Equal(t, isoNow, str(t, next, "last_executed_at"), name)
		assert.NotContains(t, next, "window", name)
		assert.NotContains(t, next, "acting_until", name)
		assert.Equal(t, "ec2", str(t, next, "resource_type"), "%s keeps the resource", name)
		switch name {
		case machine.ResourceFail:
			assert.Equal(t, "ThrottlingException", str(t, next, "last_error"))
			assert.Equal(t, int64(2), integer(t, next, "desired_count"), "a failure keeps the count remembered")
		default:
			assert.NotContains(t, next, "last_error", "%s: a success clears the error", name)
		}
	}

	stop := machine.Resource.Transition(machine.ResourceStop)
	acting := resourceIn(t, machine.ResourceActing)
	assert.Equal(t, int64(3), integer(t, machine.Resource.Decide(stop, acting, acting, in).Next, "desired_count"), "a stop that found 3")
	in.Count = 0
	assert.Equal(t, int64(2), integer(t, machine.Resource.Decide(stop, acting, acting, in).Next, "desired_count"),
		"a stop that found 0 keeps the count remembered")
	update := machine.Resource.Update(stop, in, acting)
	assert.NotContains(t, build(t, nil, &update).names, "desired_count")
	start := machine.Resource.Decide(machine.Resource.Transition(machine.ResourceStart), acting, acting, resourceInput(t)).Next
	assert.Equal(t, int64(2), integer(t, start, "desired_count"), "a start keeps the count for the next")

	update = machine.Resource.Update(machine.Resource.Transition(machine.ResourceStart), resourceInput(t), acting)
	got := build(t, nil, &update)
	assert.Equal(t, []string{"acting_until", "execution_state", "last_error", "last_executed_at", "last_status", "last_window", "window"}, got.names)
	assert.Contains(t, got.text, "REMOVE")
}

// TestResource_attach_writes_the_row_attached: a resource attached has no
// execution state (attached is its Unset state); detaching deletes it.
func TestResource_attach_writes_the_row_attached(t *testing.T) {
	in := resourceInput(t)
	out := machine.Resource.Decide(machine.Resource.Transition(machine.ResourceAttach), nil, nil, in)
	require.True(t, out.Applies())
	assert.Equal(t, messages.ResourceAttached, out.Event)
	assert.Equal(t, in.Row, out.Next)
	assert.NotContains(t, out.Next, "execution_state")

	update := machine.Resource.Update(machine.Resource.Transition(machine.ResourceAttach), in, nil)
	assert.Contains(t, build(t, nil, &update).text, "REMOVE", "the attached state is no state attribute")

	running := resourceIn(t, machine.ResourceRunning)
	detached := machine.Resource.Decide(machine.Resource.Transition(machine.ResourceDetach), running, running, in)
	assert.Nil(t, detached.Next)
	assert.Equal(t, messages.ResourceDetached, detached.Event)
}

// TestNucleus_diagrams_draw_the_rejecting_guards, not the count pin.
func TestNucleus_diagrams_draw_the_rejecting_guards(t *testing.T) {
	schedule := machine.Schedule.Mermaid()
	assert.Contains(t, schedule, "enabled --> enabled: "+string(messages.ResourceAttach)+" (room else "+messages.ReasonScheduleFull+")")
	assert.NotContains(t, schedule, "resources unchanged")
	assert.Contains(t, schedule, "enabled --> enabled: "+string(messages.ScheduleWindowDue)+", next_start_at as armed (window armed else superseded)")
	assert.NotContains(t, schedule, "disabled --> disabled: "+string(messages.ScheduleWindowDue), "a disabled schedule's window is refused, not taken")
	resource := machine.Resource.Mermaid()
	assert.Contains(t, resource, "acting --> running: "+string(messages.ScheduleWindowDue)+" (held by the window else superseded)")
	assert.Contains(t, resource, "attached --> acting: "+string(messages.ScheduleWindowDue)+
		", a window holds it while it acts (not acted else acted, not held else busy)")
	assert.Contains(t, resource, "[*] --> attached: "+string(messages.ResourceAttach))
	assert.Contains(t, machine.Account.Mermaid(), "ACTIVE --> PENDING: "+string(messages.AccountUpdate)+", a new role, untested")
}

// neMachine has one transition, guarded by an attribute v that must
// differ from the input (OrAbsent as given).
func neMachine(orAbsent bool) *machine.Machine[any] {
	return &machine.Machine[any]{Name: "ne", State: "state", Key: "pk", Unset: "here", States: []string{"here"},
		Transitions: []machine.Transition[any]{{Name: "differ", From: []string{"here"}, To: machine.Same,
			Guards: []machine.Guard[any]{{Name: "differs", Reason: "same", Attr: "v", Op: machine.Ne, OrAbsent: orAbsent,
				Value: func(in any, _ machine.Item) any { return in }}}}}}
}

// TestNe_holds_when_the_attribute_differs: equal is refused, different
// holds, as does a value of another type (DynamoDB's <> across types);
// an absent attribute holds only OrAbsent.
func TestNe_holds_when_the_attribute_differs(t *testing.T) {
	cases := []struct {
		name     string
		v        types.AttributeValue // nil: absent
		in       any
		orAbsent bool
		holds    bool
	}{
		{"equal string", s("a"), "a", false, false},
		{"equal string, or absent", s("a"), "a", true, false},
		{"equal number", num(5), 5, false, false},
		{"equal number, another spelling", &types.AttributeValueMemberN{Value: "5.0"}, 5, false, false},
		{"different string", s("b"), "a", false, true},
		{"different number", num(6), 5, true, true},
		{"absent, or absent", nil, "a", true, true},
		{"absent", nil, "a", false, false},
		{"number and string", num(5), "5", false, true},
		{"string and number", s("5"), 5, false, true},
		{"bool and string", &types.AttributeValueMemberBOOL{Value: true}, "true", false, true},
		{"different bool", &types.AttributeValueMemberBOOL{Value: true}, false, false, true},
		{"equal bool", &types.AttributeValueMemberBOOL{Value: true}, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := neMachine(c.orAbsent)
			it := machine.Item{"pk": s("X#1")}
			if c.v != nil {
				it["v"] = c.v
			}
			out := m.Decide(m.Transition("differ"), it, it, c.in)
			if c.holds {
				assert.True(t, out.Applies(), "refused: %s", out.Reason)
				assert.Equal(t, it, out.Next)
			} else {
				assert.Equal(t, "same", out.Reason)
				assert.False(t, out.Stale)
			}
		})
	}
}

// TestNe_condition_is_not_equal: Condition renders Ne as <> with its
// value a placeholder; OrAbsent adds attribute_not_exists, OR'd.
func TestNe_condition_is_not_equal(t *testing.T) {
	guards := func(orAbsent bool) (expression.ConditionBuilder, expression.ConditionBuilder) {
		m := neMachine(orAbsent)
		tr := m.Transition("differ")
		return m.Condition(tr, "start@x", nil), m.Guards(tr, "start@x", nil)
	}
	cond, alone := guards(false)
	got := build(t, &cond, nil)
	assert.Equal(t, []string{"pk", "state", "v"}, got.names)
	assert.Equal(t, []string{"start@x"}, got.values)
	assert.Regexp(t, `\(#\d+ <> :\d+\)$`, got.text)
	assert.NotContains(t, got.text, "start@x")
	filter := build(t, &alone, nil)
	assert.Regexp(t, `^#\d+ <> :\d+$`, filter.text)
	assert.Equal(t, []string{"v"}, filter.names)

	cond, alone = guards(true)
	got = build(t, &cond, nil)
	assert.Equal(t, []string{"start@x"}, got.values)
	assert.Regexp(t, `\(\(attribute_not_exists \(#\d+\)\) OR \(#\d+ <> :\d+\)\)$`, got.text)
	filter = build(t, &alone, nil)
	assert.Regexp(t, `^\(attribute_not_exists \(#(\d+)\)\) OR \(#(\d+) <> :\d+\)$`, filter.text)
	assert.Equal(t, []string{"v"}, filter.names, "one attribute, named once")
}
