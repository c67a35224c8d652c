package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"transit/messages"
	"transit/store"
	"transit/timers"
)

type timerStore interface {
	CreateTimer(ctx context.Context, cmd store.Cmd, version int64, t store.Timer) (store.TimerRef, error)
	DeleteTimer(ctx context.Context, cmd store.Cmd, shard int, version int64, id string) (store.TimerRef, error)
	StartFiring(ctx context.Context, cmd store.Cmd, shard int, id, uuid string, executeAt, until time.Time) (store.Timer, error)
	RecordedFiring(ctx context.Context, cmd store.Cmd) (store.Firing, bool, error)
	GetTimer(ctx context.Context, shard int, id string) (store.Timer, bool, error)
	FinishFiring(ctx context.Context, cmd store.Cmd, t store.Timer, f store.Firing) (store.Firing, error)
	SettleFiring(ctx context.Context, cmd store.Cmd, t store.Timer, f store.Firing) error
}

// timerShards says which shard a timer is in and at which version a
// write into it must find the shard (timers.Scheduler).
type timerShards interface {
	ShardOf(timerID string) int
	Version(ctx context.Context, shard int) (int64, error)
	Moved(shard int, version int64)
	Scheduled(shard int, executeAt time.Time)
}

type timerCaller interface {
	Call(ctx context.Context, t store.Timer) (timers.Answer, error)
}

// A firing is held until the command's own deadline (plus a margin for
// clocks), after which another delivery may take it: the holder can no
// longer record an outcome. The callback ends finishReserve before that
// deadline, so its outcome can still be recorded.
const (
	firingMargin  = time.Second
	finishReserve = 2 * time.Second
)

// Timer handles the durable timer commands.
type Timer struct {
	store  timerStore
	shards timerShards
	caller timerCaller
	now    func() time.Time
	// late observes how late each callback is called (WithLateness).
	late func(time.Duration)
}

// NewTimer returns the timer handler.
func NewTimer(st timerStore, shards timerShards, caller timerCaller, now func() time.Time) *Timer {
	if st == nil || shards == nil || caller == nil || now == nil {
		panic("handlers: NewTimer needs a store, shards, a caller and a clock")
	}
	return &Timer{store: st, shards: shards, caller: caller, now: now, late: func(time.Duration) {}}
}

// WithLateness has observe told, as each callback is called, how long
// after its execute_at that is.
func (h *Timer) WithLateness(observe func(late time.Duration)) *Timer {
	h.late = observe
	return h
}

// Handle applies one timer command.
func (h *Timer) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	switch p := cmd.Payload.(type) {
	case *messages.TimerCreatePayload:
		return h.create(ctx, c, p)
	case *messages.TimerDeletePayload:
		return h.delete(ctx, c, p)
	case *messages.TimerDuePayload:
		return h.due(ctx, c, p)
	}
	return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no timer handler", cmd.Type)}
}

// create writes the timer under its shard's version. Its uuid derives from
// the command, so a redelivery writes the same timer.
func (h *Timer) create(ctx context.Context, c store.Cmd, p *messages.TimerCreatePayload) ([]messages.Out, error) {
	shard := h.shards.ShardOf(p.TimerID)
	t, err := TimerRecord(shard, messages.DerivedID(c.ID, messages.TimerCreate, "timer_uuid"), p, c.At)
	if err != nil {
		return nil, err
	}
	// Its firings join this command's chain.
	t.CorrelationID, t.CreatedBy = c.CorrelationID, c.ID
	var ref store.TimerRef
	err = h.atVersion(ctx, shard, func(v int64) (err error) {
		ref, err = h.store.CreateTimer(ctx, c, v, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	h.shards.Scheduled(shard, ref.ExecuteAt)
	return one(messages.TimerCreated, c.At, messages.TimerCreatedPayload{
		TimerID: ref.ID, TimerUUID: ref.UUID, GroupID: ref.GroupID, Shard: ref.Shard, ExecuteAt: ref.ExecuteAt, Callback: ref.Callback,
	}), nil
}

// TimerRecord is the record a validated timer.create writes into shard,
// under uuid, at time now.
func TimerRecord(shard int, uuid string, p *messages.TimerCreatePayload, now time.Time) (store.Timer, error) {
	t := store.NewTimer(shard, p.TimerID, uuid, p.ExecuteAt, now)
	policy, err := json.Marshal(p.RetryPolicy)
	if err != nil {
		return store.Timer{}, fmt.Errorf("timer %s retry policy: %w", p.TimerID, err)
	}
	t.GroupID, t.CallbackURL, t.Payload, t.RetryPolicy = p.GroupID, p.Callback, string(p.Payload), string(policy)
	t.CallbackTimeout = time.Duration(p.CallbackTimeout).Seconds()
	return t, nil
}

func (h *Timer) delete(ctx context.Context, c store.Cmd, p *messages.TimerDeletePayload) ([]messages.Out, error) {
	shard := h.shards.ShardOf(p.TimerID)
	var ref store.TimerRef
	err := h.atVersion(ctx, shard, func(v int64) (err error) {
		ref, err = h.store.DeleteTimer(ctx, c, shard, v, p.TimerID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return one(messages.TimerDeleted, c.At, messages.TimerDeletedPayload{TimerID: ref.ID, TimerUUID: ref.UUID, Shard: ref.Shard}), nil
}

// atVersion runs write at the shard's current version. A refusal means
// the shard moved on: a stale owner learns it here and stops serving the
// shard, and the command is retried at the new version.
func (h *Timer) atVersion(ctx context.Context, shard int, write func(version int64) error) error {
	v, err := h.shards.Version(ctx, shard)
	if err != nil {
		return err
	}
	err = write(v)
	if errors.Is(err, store.ErrShardMoved) {
		h.shards.Moved(shard, v)
	}
	return err
}

// due runs one firing: it takes the firing (one delivery calls back at a
// time), calls back, records the outcome, then changes the timer. A
// firing that already has an outcome re-emits it without calling again,
// and finishes the timer's change if its delivery stopped before it; one
// whose timer was deleted, replaced or moved on does nothing.
func (h *Timer) due(ctx context.Context, c store.Cmd, p *messages.TimerDuePayload) ([]messages.Out, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = c.At.Add(messages.MaxCallbackTimeout + finishReserve)
	}
	t, err := h.store.StartFiring(ctx, c, p.Shard, p.TimerID, p.TimerUUID, p.ExecuteAt, deadline.Add(firingMargin))
	switch {
	case errors.Is(err, store.ErrNotDue):
		outs, _, err := h.recorded(ctx, c, p, false, nil)
		return outs, err
	case errors.Is(err, store.ErrFiring):
		// Held by another delivery of this command, which may have
		// stopped after recording the outcome: settle now rather than
		// after its hold lapses.
		if outs, done, rerr := h.recorded(ctx, c, p, true, nil); rerr != nil || done {
			return outs, rerr
		}
		return nil, err
	case err != nil:
		return nil, err
	}
	// Taken again after such a delivery's hold lapsed: settle, do not
	// call back a second time.
	if outs, done, err := h.recorded(ctx, c, p, true, &t); err != nil || done {
		return outs, err
	}
	callCtx, cancel := context.WithDeadline(ctx, deadline.Add(-finishReserve))
	h.late(h.now().Sub(t.ExecuteAt.Time))
	answer, cerr := h.caller.Call(callCtx, t)
	cancel()
	at := h.now()
	f := store.Firing{Timer: t.Ref(), At: at, Attempts: t.Attempts + 1}
	switch {
	case cerr == nil:
		f.Result = store.FiringFired
		if next := answer.Reschedule; next != nil {
			f.Next, f.NextUUID = next, messages.DerivedID(c.ID, messages.TimerDue, "next_uuid")
		}
	default:
		f.LastError = cerr.Error()
		var policy messages.RetryPolicy
		if err := json.Unmarshal([]byte(t.RetryPolicy), &policy); err != nil {
			return nil, fmt.Errorf("timer %s retry policy: %w", t.ID, err)
		}
		f.Result = store.FiringFailed
		if next, ok := policy.Next(f.Attempts, t.FirstExecuteAt.Time, at); ok {
			f.Result, f.Next = store.FiringRetry, &next
		}
	}
	f, err = h.store.FinishFiring(ctx, c, t, f)
	if err != nil {
		return nil, err
	}
	return firingEvents(f), nil
}

// recorded returns the events of c's recorded firing; done is false when
// it has none. With settle, the timer's change the outcome calls for is
// made first, if c still holds the firing: the delivery that recorded it
// may have stopped before that change. taken is the timer as this
// delivery took it; nil when it holds none and the timer is read.
func (h *Timer) recorded(ctx context.Context, c store.Cmd, p *messages.TimerDuePayload, settle bool, taken *store.Timer) (outs []messages.Out, done bool, err error) {
	f, done, err := h.store.RecordedFiring(ctx, c)
	if err != nil || !done {
		return nil, false, err
	}
	if settle {
		t, found := store.Timer{}, taken != nil
		if taken != nil {
			t = *taken
		} else if t, found, err = h.store.GetTimer(ctx, p.Shard, p.TimerID); err != nil {
			return nil, false, err
		}
		if found {
			if err := h.store.SettleFiring(ctx, c, t, f); err != nil {
				return nil, false, err
			}
		}
	}
	return firingEvents(f), true, nil
}

// firingEvents are a firing's events: a retry has none, its audit record
// and the next firing say enough.
func firingEvents(f store.Firing) []messages.Out {
	switch f.Result {
	case store.FiringFired:
		ev := messages.TimerFiredPayload{TimerID: f.Timer.ID, TimerUUID: f.Timer.UUID, Shard: f.Timer.Shard,
			ExecuteAt: f.Timer.ExecuteAt, FiredAt: f.At, Attempts: f.Attempts, Rescheduled: f.Next, NextUUID: f.NextUUID}
		return one(messages.TimerFired, f.At, ev)
	case store.FiringFailed:
		return one(messages.TimerFailed, f.At, messages.TimerFailedPayload{TimerID: f.Timer.ID, TimerUUID: f.Timer.UUID,
			Shard: f.Timer.Shard, ExecuteAt: f.Timer.ExecuteAt, Attempts: f.Attempts, LastError: f.LastError})
	}
	return nil
}

// commandTimer is the timer.create, decided at decided, that sends
// command t with payload to queue at at: a later command of transit's own
// (a sandbox's expiry, a lease running out). The command's ID derives
// from c and key, so a redelivery of c arms the same timer with the same
// command; the timer is named timerID, so a later one of that name
// replaces it. The command is in c's chain, caused by c.
func commandTimer(c store.Cmd, decided time.Time, queue, timerID, group, key string, at time.Time, t messages.Type, payload any) (messages.Out, error) {
	cmd, err := messages.NewCommand(messages.DerivedID(c.ID, t, key), t, payload, decided,
		messages.Cause{CorrelationID: c.CorrelationID, CausationID: c.ID})
	if err != nil {
		return messages.Out{}, err
	}
	// Keyed by the timer: one command may arm several, each its own
	// timer.create.
	return messages.Out{Type: messages.TimerCreate, At: decided, Command: true, Key: timerID, Payload: messages.TimerCreatePayload{
		TimerID: timerID, GroupID: group, ExecuteAt: at, Callback: messages.CallbackSQS + "://" + queue, Payload: cmd,
	}}, nil
}
