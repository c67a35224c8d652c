package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
)

// fakeTransit is a Bus that plays transit for one org: it decodes each
// command as transit does (messages.Decode validates it) and answers
// with the events transit would publish (messages.Encode), keeping one
// state per task. Tests steer it with its hooks.
type fakeTransit struct {
	t      *testing.T
	events chan messages.Envelope

	mu       sync.Mutex
	commands []messages.Command
	queued   []messages.TaskLeasedPayload
	state    map[string]string
	outcomes map[string][]messages.Out
	// answer, when set, is the user's answer to every question.
	answer string
	// reject, when it returns a reason, refuses the command.
	reject func(messages.Command) string
	// drop, when it returns true, loses the command's events.
	drop func(messages.Command) bool
	// seen is called with every command, outside the lock.
	seen func(messages.Command)
}

func newFakeTransit(t *testing.T, tasks ...messages.TaskLeasedPayload) *fakeTransit {
	return &fakeTransit{t: t, events: make(chan messages.Envelope, 1000), queued: tasks, state: map[string]string{}, outcomes: map[string][]messages.Out{}}
}

func (f *fakeTransit) Events() <-chan messages.Envelope { return f.events }

func (f *fakeTransit) Send(_ context.Context, t messages.Type, body []byte) error {
	cmd, err := messages.Decode(body, messages.Meta{Type: string(t)})
	require.NoError(f.t, err, "transit would dead-letter %s", body)
	f.mu.Lock()
	f.commands = append(f.commands, cmd)
	// As transit does: a command sent again is answered as it was.
	outs, again := f.outcomes[cmd.ID]
	if !again {
		outs = f.apply(cmd)
		f.outcomes[cmd.ID] = outs
	}
	drop := f.drop != nil && f.drop(cmd)
	seen := f.seen
	f.mu.Unlock()
	if seen != nil {
		seen(cmd)
	}
	if !drop {
		for _, out := range outs {
			f.publish(cmd, out)
		}
	}
	return nil
}

// publish sends the event out caused by cmd.
func (f *fakeTransit) publish(cmd messages.Command, out messages.Out) {
	_, body, err := messages.Encode(cmd, out)
	require.NoError(f.t, err)
	var env messages.Envelope
	require.NoError(f.t, json.Unmarshal(body, &env))
	f.events <- env
}

// user sends, as a user would, a command about a task and publishes its
// event.
func (f *fakeTransit) user(t messages.Type, out messages.Out) {
	id := uuid.NewString()
	f.publish(messages.Command{ID: id, Type: t, CorrelationID: id}, out)
}

// apply decides a command as the task machine would, roughly.
func (f *fakeTransit) apply(cmd messages.Command) []messages.Out {
	now := time.Now()
	one := func(t messages.Type, p any) []messages.Out { return []messages.Out{{Type: t, At: now, Payload: p}} }
	var taskID, agentID string
	switch p := cmd.Payload.(type) {
	case *messages.AgentHeartbeatPayload:
		return nil
	case *messages.TaskLeasePayload:
		if len(f.queued) == 0 {
			return one(messages.TaskLeaseEmpty, messages.TaskLeaseEmptyPayload{OrgID: p.OrgID, AgentID: p.AgentID})
		}
		task := f.queued[0]
		f.queued = f.queued[1:]
		task.AgentID, task.Attempts = p.AgentID, 1
		f.state[task.TaskID] = machine.TaskLeased
		return one(messages.TaskLeased, task)
	case *messages.TaskAgentPayload:
		taskID, agentID = p.TaskID, p.AgentID
	case *messages.TaskProgressPayload:
		taskID, agentID = p.TaskID, p.AgentID
	case *messages.TaskQuestionPayload:
		taskID, agentID = p.TaskID, p.AgentID
	case *messages.TaskResultPayload:
		taskID, agentID = p.TaskID, p.AgentID
	case *messages.TaskErrorPayload:
		taskID, agentID = p.TaskID, p.AgentID
	default:
		f.t.Errorf("an agent sent %s", cmd.Type)
		return nil
	}
	if f.reject != nil {
		if reason := f.reject(cmd); reason != "" {
			return one(messages.TaskRejected, messages.TaskRejectedPayload{Command: cmd.Type, OrgID: "acme", TaskID: taskID, AgentID: agentID,
				Actor: messages.Actor("agent:" + agentID), Reason: reason})
		}
	}
	changed := func(t messages.Type, state string, p messages.TaskChangedPayload) []messages.Out {
		f.state[taskID] = state
		p.OrgID, p.TaskID, p.AgentID, p.State, p.By = "acme", taskID, agentID, state, messages.Actor("agent:"+agentID)
		return one(t, p)
	}
	switch p := cmd.Payload.(type) {
	case *messages.TaskAgentPayload:
		return changed(messages.TaskStarted, machine.TaskRunning, messages.TaskChangedPayload{})
	case *messages.TaskProgressPayload:
		return one(messages.TaskProgressed, messages.TaskProgressedPayload{OrgID: "acme", TaskID: taskID, AgentID: agentID, Lines: len(p.Lines)})
	case *messages.TaskQuestionPayload:
		if f.state[taskID] != machine.TaskRunning {
			return one(messages.TaskRejected, messages.TaskRejectedPayload{Command: cmd.Type, OrgID: "acme", TaskID: taskID, AgentID: agentID, Reason: messages.ReasonWrongState})
		}
		outs := changed(messages.TaskAwaitingResponse, machine.TaskAwaitingResponse, messages.TaskChangedPayload{Question: p.Question})
		if f.answer != "" {
			// The user answers at once: the answer may overtake the event
			// of the question.
			answer := f.answer
			go f.user(messages.TaskRespond, messages.Out{Type: messages.TaskResponseReceived, At: now, Payload: messages.TaskChangedPayload{
				OrgID: "acme", TaskID: taskID, AgentID: agentID, State: machine.TaskRunning, By: "user:u-dev", Response: answer}})
			f.state[taskID] = machine.TaskRunning
		}
		return outs
	case *messages.TaskResultPayload:
		if f.state[taskID] != machine.TaskRunning {
			return one(messages.TaskRejected, messages.TaskRejectedPayload{Command: cmd.Type, OrgID: "acme", TaskID: taskID, AgentID: agentID, Reason: messages.ReasonWrongState})
		}
		return changed(messages.TaskCompleted, machine.TaskCompleted, messages.TaskChangedPayload{Result: p.Result})
	case *messages.TaskErrorPayload:
		return changed(messages.TaskFailed, machine.TaskError, messages.TaskChangedPayload{Error: p.Error})
	}
	return nil
}

// sent lists the commands received, in order.
func (f *fakeTransit) sent() []messages.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messages.Command(nil), f.commands...)
}

// types lists the types of the commands received, heartbeats left out.
func (f *fakeTransit) types() []messages.Type {
	var ts []messages.Type
	for _, c := range f.sent() {
		if c.Type != messages.AgentHeartbeat {
			ts = append(ts, c.Type)
		}
	}
	return ts
}

// lines are every log line reported, in the order sent.
func (f *fakeTransit) lines() []messages.LogLine {
	var ls []messages.LogLine
	for _, c := range f.sent() {
		if p, ok := c.Payload.(*messages.TaskProgressPayload); ok {
			ls = append(ls, p.Lines...)
		}
	}
	return ls
}

// of returns the payload of the one command of type t.
func of[T any](t *testing.T, f *fakeTransit, typ messages.Type) *T {
	t.Helper()
	var found []*T
	for _, c := range f.sent() {
		if c.Type == typ {
			found = append(found, c.Payload.(*T))
		}
	}
	require.Len(t, found, 1, "commands of type %s", typ)
	return found[0]
}

func task(id string) messages.TaskLeasedPayload {
	return messages.TaskLeasedPayload{OrgID: "acme", TaskID: id, ProjectID: "web", Title: "Add login", Prompt: "Add login\nand logout",
		Priority: 50, Model: "claude-sonnet-4", LeaseExpiresAt: time.Now().Add(2 * time.Minute).Format(time.RFC3339), CorrelationID: "corr-" + id}
}

// testAgent is an agent of org acme running script once, with quick
// heartbeats and resends.
func testAgent(t *testing.T, script string, modify ...func(*Config)) *Agent {
	t.Helper()
	cfg := Config{OrgID: "acme", AgentID: "agent-1", Exec: script, Dir: t.TempDir(), Once: true, Heartbeat: time.Hour,
		Timeout: 10 * time.Second, Version: "test", Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, m := range modify {
		m(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	return a
}

// runAgent runs the agent on f and returns Run's error.
func runAgent(t *testing.T, a *Agent, f *fakeTransit) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Run(ctx, f)
}
