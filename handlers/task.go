package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"transit/config"
	"transit/machine"
	"transit/messages"
	"transit/store"
)

type taskStore interface {
	QueueTask(ctx context.Context, cmd store.Cmd, p messages.TaskQueuePayload) (store.Task, error)
	LeaseTask(ctx context.Context, cmd store.Cmd, p messages.TaskLeasePayload, leaseFor time.Duration) (store.Lease, error)
	ChangeTask(ctx context.Context, cmd store.Cmd, ts store.TaskStep) (store.TaskChange, error)
	ExpireLease(ctx context.Context, cmd store.Cmd, p messages.TaskLeaseExpiredPayload, maxAttempts int) (store.TaskChange, error)
	RecordHeartbeat(ctx context.Context, cmd store.Cmd, p messages.AgentHeartbeatPayload, leaseFor time.Duration) (store.Heartbeat, error)
	AgentSilence(ctx context.Context, cmd store.Cmd, p messages.AgentSilentPayload) (store.Agent, error)
	CurrentLease(ctx context.Context, orgID, taskID string) (store.QueueItem, bool, error)
	GetAgent(ctx context.Context, orgID, agentID string) (store.Agent, bool, error)
	ReadNotification(ctx context.Context, cmd store.Cmd, p messages.NotificationReadPayload) (store.Notification, error)
}

// TaskPolicy is how long a lease lasts without a heartbeat, how many
// leases a task gets before it ends stuck, and how long an agent may be
// silent before it is stale, then offline.
type TaskPolicy struct {
	Lease                    time.Duration
	MaxAttempts              int
	StaleAfter, OfflineAfter time.Duration
}

// Task handles the agent-task commands.
type Task struct {
	store  taskStore
	policy TaskPolicy
	// queue is the task command queue, where lease timers send
	// task.lease-expired.
	queue string
	now   func() time.Time
}

// NewTaskFor returns the task handler of a stack as its configuration
// says: serve's, and the benchmark's baseline's.
func NewTaskFor(st taskStore, cfg config.Config, queue string, now func() time.Time) *Task {
	return NewTask(st, TaskPolicy{Lease: cfg.TaskLease, MaxAttempts: cfg.TaskMaxAttempts,
		StaleAfter: cfg.AgentStaleAfter, OfflineAfter: cfg.AgentOfflineAfter}, queue, now)
}

// NewTask returns the task handler; timers call back to queue.
func NewTask(st taskStore, policy TaskPolicy, queue string, now func() time.Time) *Task {
	if st == nil || now == nil || queue == "" || policy.Lease <= 0 || policy.MaxAttempts <= 0 || policy.StaleAfter <= 0 || policy.OfflineAfter <= 0 {
		panic("handlers: NewTask needs a store, a policy, the task queue and a clock")
	}
	return &Task{store: st, policy: policy, queue: queue, now: now}
}

// Handle applies one task command.
func (h *Task) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	var (
		outs []messages.Out
		err  error
		ref  messages.TaskRejectedPayload
	)
	switch p := cmd.Payload.(type) {
	case *messages.TaskQueuePayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, TaskID: p.TaskID, Actor: p.Actor}
		outs, err = h.queueTask(ctx, c, p)
	case *messages.TaskLeasePayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, AgentID: p.AgentID, Actor: p.Actor}
		outs, err = h.lease(ctx, c, p)
	case *messages.TaskAgentPayload:
		ref = agentRef(*p)
		outs, err = h.change(ctx, c, *p, store.TaskStep{Transition: machine.TaskStart, Message: "started"})
	case *messages.TaskProgressPayload:
		ref = agentRef(p.TaskAgentPayload)
		outs, err = h.progress(ctx, c, p)
	case *messages.TaskQuestionPayload:
		ref = agentRef(p.TaskAgentPayload)
		outs, err = h.change(ctx, c, p.TaskAgentPayload, store.TaskStep{
			Transition: machine.TaskAsk, Message: p.Question, In: machine.TaskInput{Question: p.Question},
			Notify: &store.Notification{Type: "TASK_AWAITING_RESPONSE", Title: "A task is waiting for your answer", Message: p.Question, Severity: "info"},
		})
	case *messages.TaskResultPayload:
		ref = agentRef(p.TaskAgentPayload)
		outs, err = h.change(ctx, c, p.TaskAgentPayload, store.TaskStep{
			Transition: machine.TaskComplete, Message: p.Result, In: machine.TaskInput{Result: p.Result},
			Notify: &store.Notification{Type: "TASK_COMPLETED", Title: "A task completed", Message: p.Result, Severity: "info"},
			Queue:  machine.QueueRemove,
		})
	case *messages.TaskErrorPayload:
		ref = agentRef(p.TaskAgentPayload)
		outs, err = h.change(ctx, c, p.TaskAgentPayload, store.TaskStep{
			Transition: machine.TaskFail, Message: p.Error, In: machine.TaskInput{Error: p.Error},
			Notify: &store.Notification{Type: "TASK_ERROR", Title: "A task failed", Message: p.Error, Severity: "error"},
			Queue:  machine.QueueRemove,
		})
	case *messages.TaskResponsePayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, TaskID: p.TaskID, Actor: p.Actor}
		outs, err = h.byUser(ctx, c, p.OrgID, p.TaskID, p.Actor, store.TaskStep{
			Transition: machine.TaskAnswer, Message: p.Response, In: machine.TaskInput{Response: p.Response}, Roles: machine.Workers,
		})
	case *messages.TaskCancelPayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, TaskID: p.TaskID, Actor: p.Actor}
		outs, err = h.byUser(ctx, c, p.OrgID, p.TaskID, p.Actor, store.TaskStep{
			Transition: machine.TaskCancel, Message: "cancelled by " + string(p.Actor), Queue: machine.QueueRemove, Roles: machine.Workers,
		})
	case *messages.TaskLeaseExpiredPayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, TaskID: p.TaskID, AgentID: p.AgentID, Actor: p.Actor}
		outs, err = h.expire(ctx, c, p)
	case *messages.AgentHeartbeatPayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, AgentID: p.AgentID, Actor: p.Actor}
		outs, err = h.heartbeat(ctx, c, p)
	case *messages.AgentSilentPayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, AgentID: p.AgentID, Actor: p.Actor}
		outs, err = h.silent(ctx, c, p)
	case *messages.NotificationReadPayload:
		ref = messages.TaskRejectedPayload{OrgID: p.OrgID, Actor: p.Actor}
		outs, err = h.read(ctx, c, p)
	default:
		return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no task handler", cmd.Type)}
	}
	if rej, ok := store.AsRejection(err); ok {
		if ref.Actor == "system" {
			// A timer of transit's own found nothing to do: the lease was
			// renewed, the agent heard from, the task moved on.
			return nil, nil
		}
		ref.Command, ref.Reason = cmd.Type, rej.Reason
		return one(messages.TaskRejected, rej.At, ref), nil
	}
	return outs, err
}

func agentRef(p messages.TaskAgentPayload) messages.TaskRejectedPayload {
	return messages.TaskRejectedPayload{OrgID: p.OrgID, TaskID: p.TaskID, AgentID: p.AgentID, Actor: p.Actor}
}

func (h *Task) queueTask(ctx context.Context, c store.Cmd, p *messages.TaskQueuePayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	t, err := h.store.QueueTask(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	return one(messages.TaskQueued, parseISO(t.CreatedAt), messages.TaskQueuedPayload{OrgID: t.OrgID, TaskID: t.TaskID, ProjectID: t.ProjectID,
		Title: t.Title, Priority: t.Priority, Model: t.Model, DesiredAgentID: t.DesiredAgentID, CreatedAt: t.CreatedAt}), nil
}

// lease leases a task and arms its lease timer: when the lease may have
// run out (no heartbeat renewed it), task.lease-expired requeues the task.
func (h *Task) lease(ctx context.Context, c store.Cmd, p *messages.TaskLeasePayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	l, err := h.store.LeaseTask(ctx, c, *p, h.policy.Lease)
	if errors.Is(err, store.ErrNothingToLease) {
		return one(messages.TaskLeaseEmpty, parseISO(l.DecidedAt), messages.TaskLeaseEmptyPayload{OrgID: p.OrgID, AgentID: p.AgentID}), nil
	}
	if err != nil {
		return nil, err
	}
	t := l.Task
	timer, err := h.leaseTimer(c, parseISO(l.DecidedAt), t.OrgID, t.TaskID, p.AgentID, parseISO(l.LeaseExpiresAt))
	if err != nil {
		return nil, err
	}
	return []messages.Out{{Type: messages.TaskLeased, At: parseISO(l.DecidedAt), Payload: messages.TaskLeasedPayload{
		OrgID: t.OrgID, TaskID: t.TaskID, AgentID: p.AgentID, ProjectID: t.ProjectID, Title: t.Title, Prompt: t.Prompt,
		Priority: t.Priority, Model: t.Model, Attempts: l.Attempts, LeaseExpiresAt: l.LeaseExpiresAt, CorrelationID: t.CorrelationID,
	}}, timer}, nil
}

// leaseTimerID names a task's lease timer: one per task, so a renewal
// replaces it and the task's end deletes it.
func leaseTimerID(orgID, taskID string) string { return "task-lease:" + orgID + ":" + taskID }

// leaseTimer is the timer.create, decided at decided, that expires a
// lease at expires.
func (h *Task) leaseTimer(c store.Cmd, decided time.Time, orgID, taskID, agentID string, expires time.Time) (messages.Out, error) {
	return commandTimer(c, decided, h.queue, leaseTimerID(orgID, taskID), "task-lease", taskID, expires, messages.TaskLeaseExpire,
		messages.TaskLeaseExpiredPayload{OrgID: orgID, TaskID: taskID, AgentID: agentID, Actor: "system"})
}

func (h *Task) progress(ctx context.Context, c store.Cmd, p *messages.TaskProgressPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	ts := store.TaskStep{Message: p.Message, Lines: p.Lines}
	if ts.Message == "" {
		ts.Message = fmt.Sprintf("%d log line(s)", len(p.Lines))
	}
	ts.Transition = machine.TaskProgress
	return h.change(ctx, c, p.TaskAgentPayload, ts)
}

// change applies a command of the task's leasing agent.
func (h *Task) change(ctx context.Context, c store.Cmd, p messages.TaskAgentPayload, ts store.TaskStep) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	ts.OrgID, ts.TaskID, ts.Actor, ts.In.Agent = p.OrgID, p.TaskID, p.Actor, p.AgentID
	return h.apply(ctx, c, ts)
}

// byUser applies a command of a user of the org, in one of ts.Roles.
func (h *Task) byUser(ctx context.Context, c store.Cmd, orgID, taskID string, actor messages.Actor, ts store.TaskStep) ([]messages.Out, error) {
	c.Actor = string(actor)
	ts.OrgID, ts.TaskID, ts.Actor = orgID, taskID, actor
	return h.apply(ctx, c, ts)
}

// apply changes the task and says so.
func (h *Task) apply(ctx context.Context, c store.Cmd, ts store.TaskStep) ([]messages.Out, error) {
	ch, err := h.store.ChangeTask(ctx, c, ts)
	if err != nil {
		return nil, err
	}
	return h.changed(c, ts, ch), nil
}

// changed is what a task change emits: the transition's event, and, once
// the task ended, a timer.delete of its lease timer.
func (h *Task) changed(c store.Cmd, ts store.TaskStep, ch store.TaskChange) []messages.Out {
	t := ch.Task
	// A requeued task has no agent any more: the event names the one
	// whose lease expired, so that agent learns it.
	t.AgentID = cmp.Or(t.AgentID, ts.In.Agent)
	tr := machine.Task.Transition(ts.Transition)
	var outs []messages.Out
	if tr.Event == messages.TaskProgressed {
		outs = one(tr.Event, parseISO(t.UpdatedAt), messages.TaskProgressedPayload{OrgID: t.OrgID, TaskID: t.TaskID, AgentID: t.AgentID,
			Message: ts.Message, Lines: len(ts.Lines), FirstSeq: firstSeq(ts.Lines), LastSeq: lastSeq(ts.Lines), At: t.UpdatedAt})
	} else {
		outs = one(tr.Event, parseISO(t.UpdatedAt), messages.TaskChangedPayload{OrgID: t.OrgID, TaskID: t.TaskID, AgentID: t.AgentID, State: t.State,
			At: t.UpdatedAt, By: ts.Actor, Question: ts.In.Question, Response: ts.In.Response, Result: ts.In.Result, Error: ts.In.Error,
			Attempts: attemptsOf(ts.Transition, t)})
	}
	if t.EndedAt != "" && ts.Transition != machine.TaskStuck {
		outs = append(outs, messages.Out{Type: messages.TimerDelete, At: parseISO(t.UpdatedAt), Command: true,
			Payload: messages.TimerDeletePayload{TimerID: leaseTimerID(t.OrgID, t.TaskID)}})
	}
	return outs
}

// expire ends a lease its timer found run out; the timer that fired is
// gone, so a stuck task has none to delete.
func (h *Task) expire(ctx context.Context, c store.Cmd, p *messages.TaskLeaseExpiredPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	ch, err := h.store.ExpireLease(ctx, c, *p, h.policy.MaxAttempts)
	if rej, ok := store.AsRejection(err); ok && rej.Reason == machine.ReasonRenewed {
		return h.rearmLease(ctx, c, rej.At, p.OrgID, p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	ts := store.TaskStep{Transition: machine.TaskRequeue, Actor: p.Actor, In: machine.TaskInput{Agent: p.AgentID}}
	if ch.Task.State == machine.TaskError {
		ts.Transition, ts.In.Error = machine.TaskStuck, ch.Task.Error
	}
	return h.changed(c, ts, ch), nil
}

// rearmLease arms the lease timer again for the lease as it now is. A
// timer that finds its lease renewed is usually replaced already; but
// SQS does not keep order, and a heartbeat's older timer.create applied
// after a newer one would leave a timer due before the lease ends: it
// fires, finds the lease renewed, and without this nothing would ever
// expire the lease.
func (h *Task) rearmLease(ctx context.Context, c store.Cmd, decided time.Time, orgID, taskID string) ([]messages.Out, error) {
	q, found, err := h.store.CurrentLease(ctx, orgID, taskID)
	if err != nil || !found || q.LeaseOwner == "" {
		return nil, err
	}
	timer, err := h.leaseTimer(c, decided, orgID, taskID, q.LeaseOwner, parseISO(q.LeaseExpiresAt))
	if err != nil {
		return nil, err
	}
	return []messages.Out{timer}, nil
}

// heartbeat keeps the agent online: it re-arms the agent's silence timer
// and, when the heartbeat renewed the lease of its current task, the
// lease timer.
func (h *Task) heartbeat(ctx context.Context, c store.Cmd, p *messages.AgentHeartbeatPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	hb, err := h.store.RecordHeartbeat(ctx, c, *p, h.policy.Lease)
	if err != nil {
		return nil, err
	}
	heard := parseISO(hb.Agent.LastHeartbeatAt)
	silence, err := h.silenceTimer(c, heard, p.OrgID, p.AgentID, hb.Agent.LastHeartbeatAt, heard.Add(h.policy.StaleAfter))
	if err != nil {
		return nil, err
	}
	outs := []messages.Out{silence}
	if hb.Renewed {
		timer, err := h.leaseTimer(c, heard, p.OrgID, p.CurrentTaskID, p.AgentID, parseISO(hb.LeaseExpiresAt))
		if err != nil {
			return nil, err
		}
		outs = append(outs, timer)
	}
	return outs, nil
}

// silenceTimerID names an agent's silence timer: each heartbeat replaces it.
func silenceTimerID(orgID, agentID string) string { return "agent-silence:" + orgID + ":" + agentID }

// silenceTimer is the timer.create, decided at decided, that sends
// agent.silent at at, for the heartbeat heard then.
func (h *Task) silenceTimer(c store.Cmd, decided time.Time, orgID, agentID, heard string, at time.Time) (messages.Out, error) {
	return commandTimer(c, decided, h.queue, silenceTimerID(orgID, agentID), "agent-silence", agentID, at, messages.AgentSilence,
		messages.AgentSilentPayload{OrgID: orgID, AgentID: agentID, LastHeartbeatAt: heard, Actor: "system"})
}

// silent turns a silent agent stale, arming the timer that turns it
// offline if it stays silent, or offline.
func (h *Task) silent(ctx context.Context, c store.Cmd, p *messages.AgentSilentPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	a, err := h.store.AgentSilence(ctx, c, *p)
	if rej, ok := store.AsRejection(err); ok && rej.Reason == machine.ReasonHeard {
		// As for leases (rearmLease): a silence timer armed for an older
		// heartbeat may have replaced the newest one's.
		a, found, err := h.store.GetAgent(ctx, p.OrgID, p.AgentID)
		if err != nil || !found || a.Status != machine.AgentOnline {
			return nil, err
		}
		heard := parseISO(a.LastHeartbeatAt)
		timer, err := h.silenceTimer(c, rej.At, p.OrgID, p.AgentID, a.LastHeartbeatAt, heard.Add(h.policy.StaleAfter))
		if err != nil {
			return nil, err
		}
		return []messages.Out{timer}, nil
	}
	if err != nil {
		return nil, err
	}
	ev := messages.AgentStatusPayload{OrgID: a.OrgID, AgentID: a.AgentID, Status: a.Status, LastHeartbeatAt: a.LastHeartbeatAt}
	// When the silence began to count as stale, and as offline: the
	// heartbeat's time and the delays, the same on every redelivery.
	stale := parseISO(p.LastHeartbeatAt).Add(h.policy.StaleAfter)
	offline := stale.Add(h.policy.OfflineAfter)
	if a.Status == machine.AgentOffline {
		return one(messages.AgentOffline, offline, ev), nil
	}
	timer, err := h.silenceTimer(c, stale, p.OrgID, p.AgentID, p.LastHeartbeatAt, offline)
	if err != nil {
		return nil, err
	}
	return []messages.Out{{Type: messages.AgentStale, At: stale, Payload: ev}, timer}, nil
}

func (h *Task) read(ctx context.Context, c store.Cmd, p *messages.NotificationReadPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	_, err := h.store.ReadNotification(ctx, c, *p)
	return nil, err
}

// attemptsOf is what a requeued or stuck task's event says of its
// leases: the task records the number of its last.
func attemptsOf(transition string, t store.Task) int {
	if transition == machine.TaskRequeue || transition == machine.TaskStuck {
		return t.Attempts
	}
	return 0
}

func firstSeq(lines []messages.LogLine) int64 {
	if len(lines) == 0 {
		return 0
	}
	return lines[0].Seq
}

func lastSeq(lines []messages.LogLine) int64 {
	if len(lines) == 0 {
		return 0
	}
	return lines[len(lines)-1].Seq
}
