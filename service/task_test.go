package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/machine"
	"transit/messages"
	"transit/provider"
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

	// The listings a user reads (transit query), newest first, paged.
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-2", ProjectID: "web", Prompt: "second", Actor: "user:u-dev"}, messages.TaskQueued)
	first, err := st.ListTasks(ctx, "acme", store.ByProject, "web", 1, "")
	require.NoError(t, err)
	require.Len(t, first.Items, 1)
	assert.Equal(t, "t-2", first.Items[0].TaskID, "the most recently changed first")
	require.NotEmpty(t, first.Next)
	second, err := st.ListTasks(ctx, "acme", store.ByProject, "web", 1, first.Next)
	require.NoError(t, err)
	require.Len(t, second.Items, 1)
	assert.Equal(t, "t-1", second.Items[0].TaskID)
	for index, key := range map[string]string{store.ByAgent: "agent-1", store.ByState: machine.TaskCompleted} {
		page, err := st.ListTasks(ctx, "acme", index, key, 10, "")
		require.NoError(t, err)
		require.Len(t, page.Items, 1, index)
		assert.Equal(t, "t-1", page.Items[0].TaskID, index)
	}
	_, err = st.ListTasks(ctx, "acme", store.ByProject, "web", 1, "not-a-cursor")
	assert.ErrorIs(t, err, store.ErrBadCursor)
	mine, err := st.ListNotifications(ctx, "u-dev", 10, "")
	require.NoError(t, err)
	require.Len(t, mine.Items, 2)
	assert.Equal(t, "TASK_COMPLETED", mine.Items[0].Type, "newest first")
	newer, _, err := st.TaskHistorySince(ctx, "t-1", events[6].SK, "")
	require.NoError(t, err)
	assert.Len(t, newer, 2, "a tail reads what it has not shown")

	// The items in the tables' shapes: camelCase attributes as designed.
	// The table also holds each task ID's claim.
	raw := slices.DeleteFunc(s.scan(store.Tasks), func(it map[string]any) bool { return !strings.HasPrefix(it["PK"].(string), "ORG#") })
	require.Len(t, raw, 2)
	slices.SortFunc(raw, func(a, b map[string]any) int { return strings.Compare(a["SK"].(string), b["SK"].(string)) })
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
	// A task's history is keyed by its ID alone: another org cannot take
	// an ID in use and write into that history.
	s.apply(messages.ProjectCreate, messages.ProjectCreatePayload{OrgID: "rival", ProjectID: "web", Name: "Web", Actor: "user:u-rival"}, messages.ProjectCreated)
	assert.Equal(t, messages.ReasonAlreadyExists, s.rejected(messages.TaskQueue, messages.TaskQueuePayload{
		OrgID: "rival", TaskID: "t-1", ProjectID: "web", Prompt: "mine", Actor: "user:u-rival"}), "another org's task ID")
	_, found, err := s.svc.Store.GetTask(ctx, "rival", "t-1")
	require.NoError(t, err)
	assert.False(t, found)
	history, _, err := s.svc.Store.TaskHistory(ctx, "t-1")
	require.NoError(t, err)
	assert.Len(t, history, 2, "t-1's history is acme's alone")
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "rival", TaskID: "t-rival", ProjectID: "web", Prompt: "mine", Actor: "user:u-rival"}, messages.TaskQueued)
	web, err := s.svc.Store.ListTasks(ctx, "acme", store.ByProject, "web", 10, "")
	require.NoError(t, err)
	require.Len(t, web.Items, 1, "a listing of acme's project web shows no other org's project web")
	assert.Equal(t, "t-1", web.Items[0].TaskID)
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

// TestTasks_silent_agent_loses_its_task: an agent that stops
// heartbeating turns stale, then offline (AGENT_OFFLINE); its lease runs
// out and the task is requeued (REQUEUED, attempts kept) and leased by
// another agent (RETRIED); when the last attempt's lease runs out too,
// the task ends in ERROR with QUEUE_STUCK. All of it on durable timers.
func TestTasks_silent_agent_loses_its_task(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.SandboxExpiry = config.ExpiryTimer
		c.TaskLease, c.TaskMaxAttempts = 3*time.Second, 2
		c.AgentStaleAfter, c.AgentOfflineAfter = 2*time.Second, 2*time.Second
	})
	s.serve(service.ServeOptions{})
	s.org()
	ctx := context.Background()
	heartbeat := func(agent, task string) {
		s.send(uuid.NewString(), messages.AgentHeartbeat, messages.AgentHeartbeatPayload{OrgID: "acme", AgentID: agent, Host: "laptop",
			PID: 42, Cwd: "/src/web", Version: "1.0.0", CurrentTaskID: task, CurrentProjectID: "web"})
	}
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "p", Actor: "user:u-dev"}, messages.TaskQueued)
	heartbeat("agent-1", "")
	first := payloadOf[messages.TaskLeasedPayload](t, s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeased))
	assert.Equal(t, 1, first.Attempts)
	heartbeat("agent-1", "t-1") // renews the lease once, then silence

	stale := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(ofType(evs, messages.AgentOffline)) > 0 })
	require.Len(t, ofType(stale, messages.AgentStale), 1)
	assert.Equal(t, machine.AgentStale, payloadOf[messages.AgentStatusPayload](t, ofType(stale, messages.AgentStale)[0]).Status)
	offline := payloadOf[messages.AgentStatusPayload](t, ofType(stale, messages.AgentOffline)[0])
	assert.Equal(t, "agent-1", offline.AgentID)
	agents := s.scan(store.Agents)
	require.Len(t, agents, 1)
	assert.Equal(t, machine.AgentOffline, agents[0]["status"])

	requeued := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(ofType(evs, messages.TaskRequeued)) > 0 })
	assert.Equal(t, "agent-1", payloadOf[messages.TaskChangedPayload](t, ofType(requeued, messages.TaskRequeued)[0]).AgentID)
	task, _, err := s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	assert.Equal(t, machine.TaskQueued, task.State)
	assert.Empty(t, task.AgentID)

	second := payloadOf[messages.TaskLeasedPayload](t, s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-2"}, messages.TaskLeased))
	assert.Equal(t, "t-1", second.TaskID)
	assert.Equal(t, 2, second.Attempts, "attempts kept across the requeue")
	stuck := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(ofType(evs, messages.TaskStuck)) > 0 })
	assert.Equal(t, machine.TaskError, payloadOf[messages.TaskChangedPayload](t, ofType(stuck, messages.TaskStuck)[0]).State)
	task, _, err = s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	assert.Equal(t, machine.TaskError, task.State)
	assert.Empty(t, s.scan(store.Queue), "a stuck task leaves the queue")

	events, _, err := s.svc.Store.TaskHistory(ctx, "t-1")
	require.NoError(t, err)
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Type)
	}
	assert.Equal(t, []string{"CREATED", "QUEUED", "LEASED", "REQUEUED", "LEASED", "RETRIED", "ERROR"}, kinds)
	notes, err := s.svc.Store.Notifications(ctx, "acme")
	require.NoError(t, err)
	var noteKinds []string
	for _, n := range notes {
		noteKinds = append(noteKinds, n.Type)
	}
	assert.ElementsMatch(t, []string{"AGENT_OFFLINE", "QUEUE_STUCK"}, noteKinds)
}

func ofType(events []service.TapEvent, t messages.Type) []service.TapEvent {
	var out []service.TapEvent
	for _, e := range events {
		if e.Envelope.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// TestSecrets_sealed_outside_development: a secret stored outside
// development is KMS ciphertext in the table that opens to the value, and
// the value is in no event and no audit record; without a KMS key it is
// refused (plaintext_refused).
func TestSecrets_sealed_outside_development(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.KMSKey = "auto" })
	s.serve(service.ServeOptions{})
	s.org()
	const value = "sk-ant-api03-very-secret-value"
	stored := s.apply(messages.SecretStore, messages.SecretStorePayload{OrgID: "acme", SecretID: "anthropic", SecretType: "anthropic_key",
		Value: value, Actor: "user:u-owner"}, messages.SecretStored)
	assert.True(t, payloadOf[messages.SecretStoredPayload](t, stored).Encrypted)
	assert.NotContains(t, string(stored.Envelope.Payload), value)
	sec, found, err := s.svc.Store.GetSecret(context.Background(), "acme", "anthropic")
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, sec.Encrypted)
	assert.NotContains(t, sec.CipherText, value)
	key, err := provider.EnsureKey(context.Background(), kms.NewFromConfig(s.svc.AWS), "alias/"+s.cfg.Prefix+"-secrets")
	require.NoError(t, err)
	opened, err := provider.NewSealer(kms.NewFromConfig(s.svc.AWS), key).Open(context.Background(), sec.CipherText,
		map[string]string{"org_id": "acme", "secret_id": "anthropic"})
	require.NoError(t, err)
	assert.Equal(t, value, opened)
	for _, item := range s.auditItems() {
		assert.NotContains(t, item.Details, value)
		assert.NotContains(t, item.Details, sec.CipherText)
	}
	assert.Equal(t, messages.ReasonForbidden, payloadOf[messages.OrgRejectedPayload](t, s.apply(messages.SecretRotate,
		messages.SecretRotatePayload{OrgID: "acme", SecretID: "anthropic", Value: "x", Actor: "user:u-dev"}, messages.OrgRejected)).Reason,
		"only a manager changes secrets")

	plain := newStack(t) // production, no KMS key
	plain.serve(service.ServeOptions{})
	plain.org()
	refused := payloadOf[messages.OrgRejectedPayload](t, plain.apply(messages.SecretStore, messages.SecretStorePayload{OrgID: "acme",
		SecretID: "anthropic", SecretType: "anthropic_key", Value: value, Actor: "user:u-owner"}, messages.OrgRejected))
	assert.Equal(t, messages.ReasonPlaintextRefused, refused.Reason)
	_, found, err = plain.svc.Store.GetSecret(context.Background(), "acme", "anthropic")
	require.NoError(t, err)
	assert.False(t, found)
}

// TestTasks_a_late_older_lease_timer_does_not_strand_the_lease: SQS does
// not keep order, so a heartbeat's older timer.create may replace a newer
// one and fire before the lease ends. The lease, found renewed, arms its
// timer again for when it really ends, and the task is requeued then.
func TestTasks_a_late_older_lease_timer_does_not_strand_the_lease(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.SandboxExpiry, c.TaskLease, c.TaskMaxAttempts = config.ExpiryTimer, 4*time.Second, 2
	})
	s.serve(service.ServeOptions{})
	s.org()
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "p", Actor: "user:u-dev"}, messages.TaskQueued)
	s.apply(messages.TaskLease, messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}, messages.TaskLeased)
	s.send(uuid.NewString(), messages.AgentHeartbeat, messages.AgentHeartbeatPayload{OrgID: "acme", AgentID: "agent-1", Host: "laptop", CurrentTaskID: "t-1"})
	leaseTimers := func(evs []service.TapEvent) int {
		n := 0
		for _, e := range ofType(evs, messages.TimerCreated) {
			if payloadOf[messages.TimerCreatedPayload](t, e).TimerID == "task-lease:acme:t-1" {
				n++
			}
		}
		return n
	}
	// Armed by the lease, then again by the heartbeat that renewed it.
	s.collect(30*time.Second, func(evs []service.TapEvent) bool { return leaseTimers(evs) == 2 })

	renewed, _, err := s.svc.Store.CurrentLease(context.Background(), "acme", "t-1")
	require.NoError(t, err)

	// An older timer.create for the lease timer, applied last: due now.
	expire, err := messages.NewCommand(uuid.NewString(), messages.TaskLeaseExpire,
		messages.TaskLeaseExpiredPayload{OrgID: "acme", TaskID: "t-1", AgentID: "agent-1"}, time.Now())
	require.NoError(t, err)
	s.apply(messages.TimerCreate, messages.TimerCreatePayload{TimerID: "task-lease:acme:t-1", ExecuteAt: time.Now(),
		Callback: "sqs://" + s.svc.Stack.CommandQueue(messages.Task), Payload: expire}, messages.TimerCreated)

	requeued := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(ofType(evs, messages.TaskRequeued)) > 0 })
	ev := payloadOf[messages.TaskChangedPayload](t, ofType(requeued, messages.TaskRequeued)[0])
	assert.Equal(t, "agent-1", ev.AgentID)
	assert.GreaterOrEqual(t, ev.At, renewed.LeaseExpiresAt, "requeued when the renewed lease ran out, not at the older timer")
}
