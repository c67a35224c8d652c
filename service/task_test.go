package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// org seeds an org "acme" with an owner u-owner, a member u-dev and a
// viewer u-view, and a project "web", each through its command.
func (s *stack) org() {
	s.t.Helper()
	s.apply(messages.OrgCreate, messages.OrgCreatePayload{OrgID: "acme", Name: "Acme", Actor: "system"}, messages.OrgEventCreated)
	for id, role := range map[string]string{"u-owner": messages.RoleOwner, "u-dev": messages.RoleMember, "u-view": messages.RoleViewer} {
		s.apply(messages.UserRegister, messages.UserRegisterPayload{OrgID: "acme", UserID: id, Email: id + "@acme.test",
			Password: "correct horse battery", DisplayName: id, Role: role, Actor: "system"}, messages.UserRegistered)
	}
	s.apply(messages.ProjectCreate, messages.ProjectCreatePayload{OrgID: "acme", ProjectID: "web", Name: "Web",
		DefaultModel: "claude-sonnet-4", Actor: "user:u-owner"}, messages.ProjectCreated)
}

// apply sends a command and waits for its one event, of type want.
func (s *stack) apply(t messages.Type, payload any, want messages.Type) service.TapEvent {
	s.t.Helper()
	id := uuid.NewString()
	s.send(id, t, payload)
	return s.eventFor(id, want)
}

// rejected sends a command and returns the reason of its rejection.
func (s *stack) rejected(t messages.Type, payload any) string {
	s.t.Helper()
	ev := s.apply(t, payload, messages.TaskRejected)
	rej := payloadOf[messages.TaskRejectedPayload](s.t, ev)
	assert.Equal(s.t, t, rej.Command)
	return rej.Reason
}

func agentCmd(task string) messages.TaskAgentPayload {
	return messages.TaskAgentPayload{OrgID: "acme", TaskID: task, AgentID: "agent-1"}
}

// TestTasks_lifecycle_with_a_question: a member queues a task, an agent
// leases it, starts, logs, asks, the member answers, the agent completes;
// every state, TaskEvent, log line and notification is as declared, in
// order, and the items are in the tables' shapes.
func TestTasks_lifecycle_with_a_question(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.org()
	ctx := context.Background()
	st := s.svc.Store

	queued := payloadOf[messages.TaskQueuedPayload](t, s.apply(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "Add login\nand logout", Actor: "user:u-dev",
	}, messages.TaskQueued))
	assert.Equal(t, messages.TaskQueuedPayload{OrgID: "acme", TaskID: "t-1", ProjectID: "web", Title: "Add login",
		Priority: messages.DefaultPriority, Model: "claude-sonnet-4", CreatedAt: queued.CreatedAt}, queued)

	lease := s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeased)
	leased := payloadOf[messages.TaskLeasedPayload](t, lease)
	assert.Equal(t, "t-1", leased.TaskID)
	assert.Equal(t, 1, leased.Attempts)
	assert.Equal(t, "Add login\nand logout", leased.Prompt)
	assert.Equal(t, "acme", lease.Attributes[messages.OrgAttribute], "filter attributes")
	assert.Equal(t, "agent-1", lease.Attributes[messages.AgentAttribute])

	s.apply(messages.TaskStart, agentCmd("t-1"), messages.TaskStarted)
	at := time.Now().UTC()
	lines := []messages.LogLine{
		{Seq: 1, At: at, Stream: "stdout", Line: "reading the code", Level: "info"},
		{Seq: 2, At: at, Stream: "stderr", Line: "warning: deprecated API", Level: "warn"},
	}
	progressed := payloadOf[messages.TaskProgressedPayload](t, s.apply(messages.TaskProgress,
		messages.TaskProgressPayload{TaskAgentPayload: agentCmd("t-1"), Lines: lines}, messages.TaskProgressed))
	assert.Equal(t, 2, progressed.Lines)
	s.apply(messages.TaskAwaitResponse, messages.TaskQuestionPayload{TaskAgentPayload: agentCmd("t-1"), Question: "Keep the old sessions?"}, messages.TaskAwaitingResponse)
	s.apply(messages.TaskProgress, messages.TaskProgressPayload{TaskAgentPayload: agentCmd("t-1"),
		Lines: []messages.LogLine{{Seq: 3, At: at.Add(time.Second), Stream: "system", Line: "waiting for an answer", Level: "info"}}}, messages.TaskProgressed)
	answered := payloadOf[messages.TaskChangedPayload](t, s.apply(messages.TaskRespond,
		messages.TaskResponsePayload{OrgID: "acme", TaskID: "t-1", Response: "Yes, keep them", Actor: "user:u-dev"}, messages.TaskResponseReceived))
	assert.Equal(t, machine.TaskRunning, answered.State)
	assert.Equal(t, "agent-1", answered.AgentID, "the agent sees the answer")
	done := payloadOf[messages.TaskChangedPayload](t, s.apply(messages.TaskComplete,
		messages.TaskResultPayload{TaskAgentPayload: agentCmd("t-1"), Result: "login and logout added"}, messages.TaskCompleted))
	assert.Equal(t, machine.TaskCompleted, done.State)

	task, found, err := st.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, machine.TaskCompleted, task.State)
	assert.Equal(t, "agent-1", task.AgentID)
	assert.Equal(t, "login and logout added", task.Result)
	assert.Equal(t, "Yes, keep them", task.ResponseText)
	assert.Empty(t, task.ClarificationQuestion, "the question is answered")
	assert.NotEmpty(t, task.StartedAt)
	assert.NotEmpty(t, task.EndedAt)
	assert.Equal(t, "u-dev", task.CreatedBy)

	events, logs, err := st.TaskHistory(ctx, "t-1")
	require.NoError(t, err)
	var kinds []string
	for i, e := range events {
		kinds = append(kinds, e.Type)
		assert.Equal(t, fmt.Sprintf("#%06d", i+1), e.SK[len(e.SK)-7:], "events numbered in order")
		assert.Equal(t, task.CorrelationID, e.CorrelationID)
	}
	assert.Equal(t, []string{"CREATED", "QUEUED", "LEASED", "STARTED", "LOG_BATCH", "AWAITING_RESPONSE", "LOG_BATCH", "RESPONSE_RECEIVED", "COMPLETED"}, kinds)
	assert.Equal(t, "user:u-dev", events[0].Actor)
	assert.Equal(t, "agent:agent-1", events[3].Actor)
	assert.Equal(t, "user:u-dev", events[7].Actor)
	require.Len(t, logs, 3)
	assert.Equal(t, []string{"reading the code", "warning: deprecated API", "waiting for an answer"}, []string{logs[0].Line, logs[1].Line, logs[2].Line})
	assert.Equal(t, "stderr", logs[1].Stream)

	notes, err := st.Notifications(ctx, "acme")
	require.NoError(t, err)
	var noteKinds []string
	for _, n := range notes {
		noteKinds = append(noteKinds, n.Type)
		assert.Equal(t, "u-dev", n.UserID, "to the user who queued the task")
		assert.Equal(t, "t-1", n.TaskID)
		assert.False(t, n.Read)
	}
	assert.ElementsMatch(t, []string{"TASK_AWAITING_RESPONSE", "TASK_COMPLETED"}, noteKinds)

	assert.Empty(t, s.scan(store.Queue), "an ended task leaves the queue")
	// The items in the tables' shapes: camelCase attributes as designed.
	raw := s.scan(store.Tasks)
	require.Len(t, raw, 1)
	for _, attr := range []string{"PK", "SK", "taskId", "orgId", "projectId", "agentId", "state", "title", "prompt", "priority",
		"createdAt", "updatedAt", "startedAt", "endedAt", "result", "responseText", "correlationId"} {
		assert.Contains(t, raw[0], attr)
	}
	assert.Equal(t, "ORG#acme", raw[0]["PK"])
	assert.Equal(t, "TASK#t-1", raw[0]["SK"])
}

// scan reads a whole table of the stack, items decoded loosely.
func (s *stack) scan(t store.Table) []map[string]any {
	s.t.Helper()
	out, err := s.svc.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, t)), ConsistentRead: aws.Bool(true)})
	require.NoError(s.t, err)
	var items []map[string]any
	require.NoError(s.t, attributevalue.UnmarshalListOfMaps(out.Items, &items))
	return items
}

// TestTasks_illegal_steps_are_rejected_and_change_nothing: the wrong
// agent, another org, a viewer, a wrong state, a step after completion
// or cancellation: each is task.command-rejected with its reason, and the
// task is as it was.
func TestTasks_illegal_steps_are_rejected_and_change_nothing(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.org()
	ctx := context.Background()
	s.apply(messages.OrgCreate, messages.OrgCreatePayload{OrgID: "rival", Name: "Rival", Actor: "system"}, messages.OrgEventCreated)
	s.apply(messages.UserRegister, messages.UserRegisterPayload{OrgID: "rival", UserID: "u-rival", Email: "r@rival.test",
		Password: "correct horse battery", DisplayName: "R", Role: messages.RoleOwner, Actor: "system"}, messages.UserRegistered)

	assert.Equal(t, messages.ReasonForbidden, s.rejected(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "acme", TaskID: "t-v", ProjectID: "web", Prompt: "p", Actor: "user:u-view"}), "a viewer cannot queue")
	assert.Equal(t, messages.ReasonForbidden, s.rejected(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "acme", TaskID: "t-r", ProjectID: "web", Prompt: "p", Actor: "user:u-rival"}), "another org's user cannot queue")
	assert.Equal(t, messages.ReasonProjectNotFound, s.rejected(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "acme", TaskID: "t-p", ProjectID: "nope", Prompt: "p", Actor: "user:u-dev"}))
	for _, id := range []string{"t-v", "t-r", "t-p"} {
		_, found, err := s.svc.Store.GetTask(ctx, "acme", id)
		require.NoError(t, err)
		assert.False(t, found, "%s was not queued", id)
	}

	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "p", Actor: "user:u-dev"}, messages.TaskQueued)
	assert.Equal(t, messages.ReasonAlreadyExists, s.rejected(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "again", Actor: "user:u-dev"}))
	assert.Equal(t, messages.ReasonWrongState, s.rejected(messages.TaskStart, agentCmd("t-1")), "not leased yet")
	s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeased)
	other := agentCmd("t-1")
	other.AgentID = "agent-2"
	assert.Equal(t, messages.ReasonNotLeaseholder, s.rejected(messages.TaskStart, other), "another agent")
	assert.Equal(t, messages.ReasonNotFound, s.rejected(messages.TaskStart, messages.TaskAgentPayload{OrgID: "rival", TaskID: "t-1", AgentID: "agent-1"}),
		"no org sees another's tasks")
	assert.Equal(t, messages.ReasonWrongState, s.rejected(messages.TaskAwaitResponse,
		messages.TaskQuestionPayload{TaskAgentPayload: agentCmd("t-1"), Question: "?"}), "not started")
	s.apply(messages.TaskStart, agentCmd("t-1"), messages.TaskStarted)
	assert.Equal(t, messages.ReasonWrongState, s.rejected(messages.TaskRespond,
		messages.TaskResponsePayload{OrgID: "acme", TaskID: "t-1", Response: "r", Actor: "user:u-dev"}), "no question asked")
	assert.Equal(t, messages.ReasonForbidden, s.rejected(messages.TaskCancel,
		messages.TaskCancelPayload{OrgID: "acme", TaskID: "t-1", Actor: "user:u-view"}), "a viewer cannot cancel")
	before, _, err := s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)

	cancelled := payloadOf[messages.TaskChangedPayload](t, s.apply(messages.TaskCancel,
		messages.TaskCancelPayload{OrgID: "acme", TaskID: "t-1", Actor: "user:u-owner"}, messages.TaskCancelled))
	assert.Equal(t, "agent-1", cancelled.AgentID, "the leasing agent learns of it")
	assert.Equal(t, messages.ReasonEnded, s.rejected(messages.TaskComplete, messages.TaskResultPayload{TaskAgentPayload: agentCmd("t-1"), Result: "r"}))
	assert.Equal(t, messages.ReasonEnded, s.rejected(messages.TaskCancel, messages.TaskCancelPayload{OrgID: "acme", TaskID: "t-1", Actor: "user:u-dev"}))
	after, _, err := s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	assert.Equal(t, machine.TaskCancelled, after.State)
	assert.Equal(t, before.EventSeq+1, after.EventSeq, "only the cancellation changed it")

	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-2", ProjectID: "web", Prompt: "p", Actor: "user:u-dev"}, messages.TaskQueued)
	s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeased)
	s.apply(messages.TaskStart, agentCmd("t-2"), messages.TaskStarted)
	s.apply(messages.TaskComplete, messages.TaskResultPayload{TaskAgentPayload: agentCmd("t-2"), Result: "done"}, messages.TaskCompleted)
	assert.Equal(t, messages.ReasonEnded, s.rejected(messages.TaskFail, messages.TaskErrorPayload{TaskAgentPayload: agentCmd("t-2"), Error: "late"}), "after completion")
	assert.Equal(t, messages.ReasonEnded, s.rejected(messages.TaskCancel, messages.TaskCancelPayload{OrgID: "acme", TaskID: "t-2", Actor: "user:u-dev"}))
	empty := payloadOf[messages.TaskLeaseEmptyPayload](t, s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeaseEmpty))
	assert.Equal(t, "agent-1", empty.AgentID)
}
