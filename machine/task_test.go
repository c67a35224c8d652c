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
	isoNow  = "2027-01-15T08:00:00.000Z"
	isoPast = "2027-01-15T07:59:00.000Z"
	isoNext = "2027-01-15T08:02:00.000Z"
)

func item(t *testing.T, fields map[string]any) machine.Item {
	t.Helper()
	it, err := attributevalue.MarshalMap(fields)
	require.NoError(t, err)
	return it
}

// taskIn is a task in state, leased by agent-1 when a lease holds it,
// its fourth event the last; nil for Absent.
func taskIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	fields := map[string]any{"PK": "ORG#acme", "SK": "TASK#t-1", "taskId": "t-1", "orgId": "acme", "state": state,
		"title": "t", "prompt": "p", "priority": 50, "createdAt": isoPast, "updatedAt": isoPast, "correlationId": "c", "eventSeq": 4}
	if state != machine.TaskQueued {
		fields["agentId"] = "agent-1"
	}
	return item(t, fields)
}

func taskInput() machine.TaskInput {
	return machine.TaskInput{Now: isoNow, Agent: "agent-1", Events: 1, Question: "q?", Response: "r", Result: "ok", Error: "boom",
		LeaseExpiresAt: isoNext, MaxAttempts: 3, ReadyKey: "050#" + isoPast + "#t-1", Heard: isoPast, User: "u-dev"}
}

// TestTask_every_state_and_transition: the task's table, as the leasing
// agent (or its user) sees it.
func TestTask_every_state_and_transition(t *testing.T) {
	nf, ws, ended, dup := messages.ReasonNotFound, messages.ReasonWrongState, messages.ReasonEnded, messages.ReasonAlreadyExists
	const (
		absent    = machine.Absent
		queued    = machine.TaskQueued
		leased    = machine.TaskLeased
		running   = machine.TaskRunning
		awaiting  = machine.TaskAwaitingResponse
		completed = machine.TaskCompleted
		failed    = machine.TaskError
		cancelled = machine.TaskCancelled
	)
	finals := func(row map[string]cell) map[string]cell {
		row[completed], row[failed], row[cancelled] = cell{reason: ended}, cell{reason: ended}, cell{reason: ended}
		return row
	}
	table := map[string]map[string]cell{
		machine.TaskQueue: {absent: {to: queued}, queued: {reason: dup}, leased: {reason: dup}, running: {reason: dup},
			awaiting: {reason: dup}, completed: {reason: dup}, failed: {reason: dup}, cancelled: {reason: dup}},
		machine.TaskLease:    finals(map[string]cell{absent: {reason: nf}, queued: {to: leased}, leased: {reason: ws}, running: {reason: ws}, awaiting: {reason: ws}}),
		machine.TaskStart:    finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {to: running}, running: {reason: ws}, awaiting: {reason: ws}}),
		machine.TaskProgress: finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {reason: ws}, running: {to: running}, awaiting: {to: awaiting}}),
		machine.TaskAsk:      finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {reason: ws}, running: {to: awaiting}, awaiting: {reason: ws}}),
		machine.TaskAnswer:   finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {reason: ws}, running: {reason: ws}, awaiting: {to: running}}),
		machine.TaskComplete: finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {reason: ws}, running: {to: completed}, awaiting: {reason: ws}}),
		machine.TaskFail:     finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {to: failed}, running: {to: failed}, awaiting: {to: failed}}),
		machine.TaskCancel:   finals(map[string]cell{absent: {reason: nf}, queued: {to: cancelled}, leased: {to: cancelled}, running: {to: cancelled}, awaiting: {to: cancelled}}),
		machine.TaskRequeue:  finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {to: queued}, running: {to: queued}, awaiting: {to: queued}}),
		machine.TaskStuck:    finals(map[string]cell{absent: {reason: nf}, queued: {reason: ws}, leased: {to: failed}, running: {to: failed}, awaiting: {to: failed}}),
	}
	checkTable(t, machine.Task, table, taskIn, taskInput())
}

// TestTask_only_the_leaseholder_acts_and_events_are_numbered: another
// agent is not_leaseholder in every state an agent acts in; a task whose
// events moved on since it was read is stale; every transition advances
// eventSeq by its events.
func TestTask_only_the_leaseholder_acts_and_events_are_numbered(t *testing.T) {
	other := taskInput()
	other.Agent = "agent-2"
	for name, state := range map[string]string{machine.TaskStart: machine.TaskLeased, machine.TaskProgress: machine.TaskRunning,
		machine.TaskAsk: machine.TaskRunning, machine.TaskComplete: machine.TaskRunning, machine.TaskFail: machine.TaskAwaitingResponse,
		machine.TaskRequeue: machine.TaskRunning, machine.TaskStuck: machine.TaskLeased} {
		it := taskIn(t, state)
		assert.Equal(t, messages.ReasonNotLeaseholder, machine.Task.Decide(machine.Task.Transition(name), it, it, other).Reason, name)
	}
	read := taskIn(t, machine.TaskRunning)
	moved := taskIn(t, machine.TaskRunning)
	moved["eventSeq"] = num(5)
	assert.True(t, machine.Task.Decide(machine.Task.Transition(machine.TaskProgress), moved, read, taskInput()).Stale)

	in := taskInput()
	in.Events = 2
	next := machine.Task.Decide(machine.Task.Transition(machine.TaskLease), taskIn(t, machine.TaskQueued), taskIn(t, machine.TaskQueued), in).Next
	assert.Equal(t, int64(6), integer(t, next, "eventSeq"))
	assert.Equal(t, "agent-1", str(t, next, "agentId"))
	assert.Equal(t, isoNow, str(t, next, "updatedAt"))
	requeued := machine.Task.Decide(machine.Task.Transition(machine.TaskRequeue), read, read, taskInput()).Next
	assert.NotContains(t, requeued, "agentId", "a requeued task has no agent")
	answered := machine.Task.Decide(machine.Task.Transition(machine.TaskAnswer), taskIn(t, machine.TaskAwaitingResponse), taskIn(t, machine.TaskAwaitingResponse), taskInput()).Next
	assert.Equal(t, "r", str(t, answered, "responseText"))
}

// queueIn is a waiting queue item leased by agent-1 until a minute ago,
// on its first attempt; nil for Absent.
func queueIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	return item(t, map[string]any{"PK": "ORG#acme", "SK": "QUEUE#" + isoPast + "#t-1", "taskId": "t-1", "projectId": "web",
		"leaseOwner": "agent-1", "leaseExpiresAt": isoPast, "attempts": 1, "nextVisibleAt": isoPast, "priority": 50})
}

// TestQueue_every_state_and_transition: the queue item's table, for an
// item whose lease by agent-1 ran out on its first of three attempts.
func TestQueue_every_state_and_transition(t *testing.T) {
	nf := messages.ReasonNotFound
	w := machine.QueueWaiting
	table := map[string]map[string]cell{
		machine.QueueEnqueue: {machine.Absent: {to: w}, w: {reason: messages.ReasonAlreadyExists}},
		machine.QueueLease:   {machine.Absent: {reason: nf}, w: {reason: machine.ReasonLeased}},
		machine.QueueRenew:   {machine.Absent: {reason: nf}, w: {to: w}},
		machine.QueueRequeue: {machine.Absent: {reason: nf}, w: {to: w}},
		machine.QueueGiveUp:  {machine.Absent: {reason: nf}, w: {reason: machine.ReasonAttemptsLeft}},
		machine.QueueRemove:  {machine.Absent: {reason: nf}, w: {to: machine.Absent}},
	}
	checkTable(t, machine.Queue, table, queueIn, taskInput())
}

// TestQueue_lease_takes_a_free_visible_item_for_the_agent: a leased item
// is leased, one not visible yet not_visible, one reserved for another
// agent reserved; a free one is leased until the lease's end, its attempt
// counted, out of the ready index.
func TestQueue_lease_takes_a_free_visible_item_for_the_agent(t *testing.T) {
	lease := machine.Queue.Transition(machine.QueueLease)
	free := func(change func(machine.Item)) machine.Item {
		it := queueIn(t, machine.QueueWaiting)
		delete(it, "leaseOwner")
		delete(it, "leaseExpiresAt")
		it["readyKey"] = &types.AttributeValueMemberS{Value: "050#x#t-1"}
		change(it)
		return it
	}
	cases := map[string]struct {
		item   machine.Item
		reason string
	}{
		"free":             {free(func(machine.Item) {}), ""},
		"never visible":    {free(func(it machine.Item) { delete(it, "nextVisibleAt") }), ""},
		"for this agent":   {free(func(it machine.Item) { it["desiredAgentId"] = &types.AttributeValueMemberS{Value: "agent-1"} }), ""},
		"for another":      {free(func(it machine.Item) { it["desiredAgentId"] = &types.AttributeValueMemberS{Value: "agent-9"} }), machine.ReasonReserved},
		"not visible yet":  {free(func(it machine.Item) { it["nextVisibleAt"] = &types.AttributeValueMemberS{Value: isoNext} }), machine.ReasonNotVisible},
		"leased by anyone": {queueIn(t, machine.QueueWaiting), machine.ReasonLeased},
	}
	for name, c := range cases {
		out := machine.Queue.Decide(lease, c.item, c.item, taskInput())
		assert.Equal(t, c.reason, out.Reason, name)
		if c.reason == "" {
			assert.Equal(t, "agent-1", str(t, out.Next, "leaseOwner"), name)
			assert.Equal(t, isoNext, str(t, out.Next, "leaseExpiresAt"), name)
			assert.Equal(t, int64(2), integer(t, out.Next, "attempts"), name)
			assert.NotContains(t, out.Next, "readyKey", "%s: a leased item leaves the ready index", name)
		}
	}
}

// TestQueue_an_expiry_requeues_or_gives_up: a lease renewed since is
// renewed; with attempts left it is requeued, back in the ready index; on
// the last attempt it gives up.
func TestQueue_an_expiry_requeues_or_gives_up(t *testing.T) {
	requeue, giveUp := machine.Queue.Transition(machine.QueueRequeue), machine.Queue.Transition(machine.QueueGiveUp)
	renewed := queueIn(t, machine.QueueWaiting)
	renewed["leaseExpiresAt"] = &types.AttributeValueMemberS{Value: isoNext}
	assert.Equal(t, machine.ReasonRenewed, machine.Queue.Decide(requeue, renewed, renewed, taskInput()).Reason)
	assert.Equal(t, machine.ReasonRenewed, machine.Queue.Decide(giveUp, renewed, renewed, taskInput()).Reason)

	it := queueIn(t, machine.QueueWaiting)
	next := machine.Queue.Decide(requeue, it, it, taskInput()).Next
	assert.NotContains(t, next, "leaseOwner")
	assert.Equal(t, "050#"+isoPast+"#t-1", str(t, next, "readyKey"))
	assert.Equal(t, int64(1), integer(t, next, "attempts"), "attempts kept")

	last := queueIn(t, machine.QueueWaiting)
	last["attempts"] = num(3)
	assert.Equal(t, machine.ReasonAttemptsSpent, machine.Queue.Decide(requeue, last, last, taskInput()).Reason)
	assert.True(t, machine.Queue.Decide(giveUp, last, last, taskInput()).Applies())
}

func agentIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	return item(t, map[string]any{"PK": "ORG#acme", "SK": "AGENT#agent-1", "agentId": "agent-1", "status": state, "lastHeartbeatAt": isoPast})
}

// TestAgent_every_state_and_transition: a heartbeat puts any agent
// online; silence since the heartbeat the timer was armed for turns it
// stale, then offline; a heartbeat since is heard.
func TestAgent_every_state_and_transition(t *testing.T) {
	nf, ws := messages.ReasonNotFound, messages.ReasonWrongState
	on, st, off := machine.AgentOnline, machine.AgentStale, machine.AgentOffline
	row := agentIn(t, on)
	in := taskInput()
	in.Row = row
	table := map[string]map[string]cell{
		machine.AgentHeartbeat: {machine.Absent: {to: on}, on: {to: on}, st: {to: on}, off: {to: on}},
		machine.AgentGoStale:   {machine.Absent: {reason: nf}, on: {to: st}, st: {reason: ws}, off: {reason: ws}},
		machine.AgentGoOffline: {machine.Absent: {reason: nf}, on: {reason: ws}, st: {to: off}, off: {reason: ws}},
	}
	checkTable(t, machine.Agent, table, agentIn, in)

	heard := taskInput()
	heard.Heard = "2027-01-15T07:00:00.000Z"
	online := agentIn(t, on)
	assert.Equal(t, machine.ReasonHeard, machine.Agent.Decide(machine.Agent.Transition(machine.AgentGoStale), online, online, heard).Reason)
}

func notificationIn(t *testing.T, state string) machine.Item {
	if state == machine.Absent {
		return nil
	}
	return item(t, map[string]any{"PK": "ORG#acme", "SK": "NOTIF#" + isoPast + "#n-1", "notificationId": "n-1", "userId": "u-dev", "read": false})
}

// TestNotification_every_state_and_transition: sent once, read by its
// recipient; another user is not_recipient, and anyone reads one sent
// to all.
func TestNotification_every_state_and_transition(t *testing.T) {
	sent := machine.NotificationSent
	in := taskInput()
	in.Row = notificationIn(t, sent)
	table := map[string]map[string]cell{
		machine.NotificationSend: {machine.Absent: {to: sent}, sent: {reason: messages.ReasonWrongState}},
		machine.NotificationRead: {machine.Absent: {reason: messages.ReasonNotFound}, sent: {to: sent}},
	}
	checkTable(t, machine.Notification, table, notificationIn, in)

	read := machine.Notification.Transition(machine.NotificationRead)
	n := notificationIn(t, sent)
	assert.True(t, machine.Notification.Decide(read, n, n, in).Next["read"].(*types.AttributeValueMemberBOOL).Value)
	other := in
	other.User = "u-owner"
	assert.Equal(t, messages.ReasonNotRecipient, machine.Notification.Decide(read, n, n, other).Reason)
	delete(n, "userId")
	assert.True(t, machine.Notification.Decide(read, n, n, other).Applies(), "one sent to all")
}

// TestTaskClaim_every_state_and_transition: an ID is claimed once.
func TestTaskClaim_every_state_and_transition(t *testing.T) {
	claimed := machine.TaskClaimed
	in := taskInput()
	in.Row = item(t, map[string]any{"PK": "TASKID#t-1", "SK": "CLAIM", "orgId": "acme"})
	checkTable(t, machine.TaskClaim, map[string]map[string]cell{
		machine.TaskClaimTake: {machine.Absent: {to: claimed}, claimed: {reason: messages.ReasonAlreadyExists}},
	}, func(t *testing.T, state string) machine.Item {
		if state == machine.Absent {
			return nil
		}
		return in.Row
	}, in)
}
