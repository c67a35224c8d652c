package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/internal/agent"
	"transit/machine"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// startAgent runs the reference agent of org acme once, its command
// script, on the stack: its own queue subscribed to the task events, as
// `transit agent --once` does. wait returns Run's error once the agent is
// done and its queue gone.
func (s *stack) startAgent(agentID, script string, modify ...func(*agent.Config)) (wait func() error) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := agent.Config{OrgID: "acme", AgentID: agentID, Exec: script, Dir: s.t.TempDir(), Once: true,
		Capabilities: []string{"interactive"}, Timeout: time.Minute, Version: "test", Logger: s.svc.Logger}
	for _, m := range modify {
		m(&cfg)
	}
	a, err := agent.New(cfg)
	require.NoError(s.t, err)
	topic, err := s.svc.TopicARN(ctx, s.svc.Stack.EventTopic(messages.Task))
	require.NoError(s.t, err)
	bus, err := agent.OpenSQS(ctx, agent.SQSConfig{SQS: s.svc.SQS, SNS: s.svc.SNS, Stack: s.svc.Stack, TopicARN: topic,
		OrgID: "acme", AgentID: agentID, Logger: s.svc.Logger})
	require.NoError(s.t, err)
	done := make(chan error, 1)
	go func() { done <- errors.Join(a.Run(ctx, bus), bus.Close(ctx)) }()
	var result error
	finished := false
	wait = func() error {
		if !finished {
			select {
			case result = <-done:
			case <-time.After(90 * time.Second):
				cancel()
				result = errors.Join(errors.New("the agent did not finish within 90s"), <-done)
			}
			finished = true
		}
		return result
	}
	// A test that fails early still stops the agent and removes its queue
	// before the stack goes.
	s.t.Cleanup(func() {
		cancel()
		_ = wait()
	})
	return wait
}

// queueTask queues task id in project web as u-dev.
func (s *stack) queueTask(id, prompt string) {
	s.t.Helper()
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: id, ProjectID: "web", Prompt: prompt, Actor: "user:u-dev"}, messages.TaskQueued)
}

// taskEvent waits for the first event of type typ about task id.
func (s *stack) taskEvent(id string, typ messages.Type) messages.TaskChangedPayload {
	s.t.Helper()
	var found messages.TaskChangedPayload
	s.collect(60*time.Second, func(evs []service.TapEvent) bool {
		for _, ev := range ofType(evs, typ) {
			if p := payloadOf[messages.TaskChangedPayload](s.t, ev); p.TaskID == id {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// assertQueueGone checks the agent's queue was deleted when it stopped.
func (s *stack) assertQueueGone(agentID string) {
	s.t.Helper()
	_, err := s.svc.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(agent.QueueName(s.svc.Stack, "acme", agentID))})
	var missing *sqstypes.QueueDoesNotExist
	assert.ErrorAs(s.t, err, &missing, "the agent's queue is deleted")
}

// TestAgent_runs_a_task_with_a_question_to_completion: the agent leases
// the queued task, runs a script that logs, asks which database to use,
// reads the answer a member sends and echoes it; the task ends COMPLETED
// with every line in order and the echoed answer as its result.
func TestAgent_runs_a_task_with_a_question_to_completion(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.org()
	ctx := context.Background()
	s.queueTask("t-1", "Add a sessions table")
	wait := s.startAgent("agent-1", `echo "reading the code"
echo "planning: $TRANSIT_TASK_PROMPT"
echo "?? which db?"
read answer
echo "using $answer"`)

	asked := s.taskEvent("t-1", messages.TaskAwaitingResponse)
	assert.Equal(t, "which db?", asked.Question)
	assert.Equal(t, "agent-1", asked.AgentID)
	s.apply(messages.TaskRespond, messages.TaskResponsePayload{OrgID: "acme", TaskID: "t-1", Response: "postgres", Actor: "user:u-dev"},
		messages.TaskResponseReceived)
	require.NoError(t, wait())
	s.assertQueueGone("agent-1")

	task, found, err := s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, machine.TaskCompleted, task.State)
	assert.Equal(t, "using postgres", task.Result)
	assert.Equal(t, "agent-1", task.AgentID)
	assert.Equal(t, "postgres", task.ResponseText)

	events, logs, err := s.svc.Store.TaskHistory(ctx, "t-1")
	require.NoError(t, err)
	var lines []string
	for _, l := range logs {
		lines = append(lines, l.Line)
		assert.Equal(t, "stdout", l.Stream)
		assert.Equal(t, task.CorrelationID, l.CorrelationID)
	}
	assert.Equal(t, []string{"reading the code", "planning: Add a sessions table", "?? which db?", "using postgres"}, lines)
	var kinds []string
	for _, e := range events {
		if e.Type != "LOG_BATCH" {
			kinds = append(kinds, e.Type)
		}
	}
	assert.Equal(t, []string{"CREATED", "QUEUED", "LEASED", "STARTED", "AWAITING_RESPONSE", "RESPONSE_RECEIVED", "COMPLETED"}, kinds)
	assert.Equal(t, "agent:agent-1", events[len(events)-1].Actor)

	agents := s.scan(store.Agents)
	require.Len(t, agents, 1, "the agent heartbeat")
	assert.Equal(t, "agent-1", agents[0]["agentId"])
	assert.Equal(t, machine.AgentOnline, agents[0]["status"])
	assert.Equal(t, true, agents[0]["canInteractive"])
}

// TestAgent_reports_a_failing_command: a script that exits 3 ends its
// task FAILED (ERROR) with the exit status and its last stderr line.
func TestAgent_reports_a_failing_command(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.org()
	ctx := context.Background()
	s.queueTask("t-1", "Migrate the sessions")
	wait := s.startAgent("agent-1", `echo "migrating"; echo "boom: no such table" >&2; exit 3`)
	require.NoError(t, wait(), "a failed task is reported, not an error of the agent")
	s.assertQueueGone("agent-1")

	failed := s.taskEvent("t-1", messages.TaskFailed)
	assert.Equal(t, machine.TaskError, failed.State)
	task, _, err := s.svc.Store.GetTask(ctx, "acme", "t-1")
	require.NoError(t, err)
	assert.Equal(t, machine.TaskError, task.State)
	assert.Equal(t, "exit status 3: boom: no such table", task.Error)
	_, logs, err := s.svc.Store.TaskHistory(ctx, "t-1")
	require.NoError(t, err)
	require.Len(t, logs, 2)
	byStream := map[string]string{}
	for _, l := range logs {
		byStream[l.Stream] = l.Line + " (" + l.Level + ")"
	}
	assert.Equal(t, map[string]string{"stdout": "migrating (info)", "stderr": "boom: no such table (warn)"}, byStream)
}

// TestAgent_stops_a_cancelled_task: a member cancels the running task;
// the agent kills its command and reports nothing more.
func TestAgent_stops_a_cancelled_task(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.org()
	s.queueTask("t-1", "Run for ever")
	start := time.Now()
	wait := s.startAgent("agent-1", `echo "working"; sleep 120`)
	s.collect(60*time.Second, func(evs []service.TapEvent) bool { return len(ofType(evs, messages.TaskProgressed)) > 0 })
	s.apply(messages.TaskCancel, messages.TaskCancelPayload{OrgID: "acme", TaskID: "t-1", Actor: "user:u-dev"}, messages.TaskCancelled)
	require.NoError(t, wait(), "a cancellation is no error")
	assert.Less(t, time.Since(start), 60*time.Second, "the command was killed, not waited for")
	s.assertQueueGone("agent-1")

	events, _, err := s.svc.Store.TaskHistory(context.Background(), "t-1")
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", events[len(events)-1].Type, "nothing reported after the cancellation")
}

// TestAgent_heartbeats_keep_a_long_task_leased: a task that runs longer
// than the lease, with one attempt, completes: each heartbeat naming it
// renews the lease and re-arms its timer, so it is never requeued or
// stuck. (Heartbeats race the task's own transactions: not moto-safe.)
func TestAgent_heartbeats_keep_a_long_task_leased(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TaskLease, c.TaskMaxAttempts = 3*time.Second, 1 })
	s.serve(service.ServeOptions{})
	s.org()
	s.queueTask("t-1", "Take a while")
	wait := s.startAgent("agent-1", `echo "working"; sleep 7; echo "done"`, func(c *agent.Config) { c.Heartbeat = 500 * time.Millisecond })
	require.NoError(t, wait())

	task, _, err := s.svc.Store.GetTask(context.Background(), "acme", "t-1")
	require.NoError(t, err)
	assert.Equal(t, machine.TaskCompleted, task.State, "error: %s", task.Error)
	events, _, err := s.svc.Store.TaskHistory(context.Background(), "t-1")
	require.NoError(t, err)
	for _, e := range events {
		assert.NotContains(t, []string{"REQUEUED", "RETRIED", "ERROR"}, e.Type, "the lease never ran out")
	}
}
