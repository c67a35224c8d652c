package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"transit/messages"
)

// seenEvents is how many event IDs the inbox remembers to drop
// duplicates: SNS and SQS deliver at least once, and a command sent again
// re-publishes its events with the same IDs.
const seenEvents = 1024

// taskEventBuffer holds the events about the running task that the
// reporter has not taken yet: answers, a cancellation, a lost lease.
const taskEventBuffer = 64

// inbox routes the events for the agent: the one a command caused to
// whoever waits for it (by causation ID), the ones about the running
// task that no command of the agent caused (a user's answer or
// cancellation, a requeue) to the task's reporter. Anything else is old
// news (a result whose wait timed out, a previous run's) and is dropped.
type inbox struct {
	log *slog.Logger
	// closed is closed when the bus delivers no more.
	closed chan struct{}

	mu      sync.Mutex
	waiters map[string]chan messages.Envelope
	taskID  string
	task    chan messages.Envelope
	seen    map[string]bool
	order   []string
}

func newInbox(log *slog.Logger) *inbox {
	return &inbox{log: log, closed: make(chan struct{}), waiters: map[string]chan messages.Envelope{}, seen: map[string]bool{}}
}

// pump delivers the bus's events until it closes or ctx ends.
func (in *inbox) pump(ctx context.Context, events <-chan messages.Envelope) {
	defer close(in.closed)
	for {
		select {
		case env, ok := <-events:
			if !ok {
				return
			}
			in.deliver(env)
		case <-ctx.Done():
			return
		}
	}
}

// expect registers a wait for the event command id causes; it must come
// before the command is sent, which the event may overtake.
func (in *inbox) expect(id string) <-chan messages.Envelope {
	in.mu.Lock()
	defer in.mu.Unlock()
	ch := make(chan messages.Envelope, 1)
	in.waiters[id] = ch
	return ch
}

// forget ends the wait for command id's event.
func (in *inbox) forget(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.waiters, id)
}

// watch routes the events about task id to the returned channel until
// unwatch.
func (in *inbox) watch(taskID string) <-chan messages.Envelope {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.taskID, in.task = taskID, make(chan messages.Envelope, taskEventBuffer)
	return in.task
}

func (in *inbox) unwatch() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.taskID, in.task = "", nil
}

func (in *inbox) deliver(env messages.Envelope) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if env.ID != "" {
		if in.seen[env.ID] {
			return
		}
		in.seen[env.ID] = true
		in.order = append(in.order, env.ID)
		if len(in.order) > seenEvents {
			delete(in.seen, in.order[0])
			in.order = in.order[1:]
		}
	}
	if w, ok := in.waiters[env.CausationID]; ok {
		delete(in.waiters, env.CausationID)
		w <- env
		return
	}
	if in.task != nil && taskOf(env) == in.taskID {
		select {
		case in.task <- env:
		default:
			in.log.Error("agent: too many events about the task waiting, dropped one", "task_id", in.taskID, "type", env.Type, "event_id", env.ID)
		}
		return
	}
	if env.Type == messages.TaskRejected {
		// A refusal no one waits for: a heartbeat's, or a command's whose
		// wait ended.
		in.log.Warn("agent: a command was rejected", "causation_id", env.CausationID, "rejection", string(env.Payload))
		return
	}
	in.log.Debug("agent: event of no interest, dropped", "type", env.Type, "event_id", env.ID, "causation_id", env.CausationID)
}

// taskOf is the task an event is about, if any.
func taskOf(env messages.Envelope) string {
	var p struct {
		TaskID string `json:"task_id"`
	}
	if json.Unmarshal(env.Payload, &p) != nil {
		return ""
	}
	return p.TaskID
}
