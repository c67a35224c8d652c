package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"transit/messages"
	"transit/store"
	"transit/timers"
)

type nucleusStore interface {
	RegisterAccount(ctx context.Context, cmd store.Cmd, p messages.AccountRegisterPayload) (store.Account, error)
	UpdateAccount(ctx context.Context, cmd store.Cmd, p messages.AccountUpdatePayload) (store.Account, error)
	GetAccount(ctx context.Context, id string) (store.Account, bool, error)
	RecordedTest(ctx context.Context, cmd store.Cmd) (store.AccountTest, bool, error)
	RecordTest(ctx context.Context, cmd store.Cmd, accountID, role, identity, testErr string) (store.AccountTest, error)
	UpsertSchedule(ctx context.Context, cmd store.Cmd, p messages.ScheduleUpsertPayload, nextStart, nextStop string) (store.Schedule, error)
	EnableSchedule(ctx context.Context, cmd store.Cmd, p messages.ScheduleRefPayload, windows store.Windows) (store.Schedule, error)
	DisableSchedule(ctx context.Context, cmd store.Cmd, p messages.ScheduleRefPayload) (store.Schedule, error)
	DeleteSchedule(ctx context.Context, cmd store.Cmd, p messages.ScheduleRefPayload) (store.Removed[store.Schedule], error)
	AttachResource(ctx context.Context, cmd store.Cmd, p messages.ResourcePayload, arn messages.ResourceARN) (store.TargetedResource, error)
	DetachResource(ctx context.Context, cmd store.Cmd, p messages.ResourcePayload) (store.Removed[store.TargetedResource], error)
	Refuse(ctx context.Context, cmd store.Cmd, entity, reason string) error
	RecordedWindow(ctx context.Context, cmd store.Cmd) (store.WindowOutcome, bool, error)
	OpenWindow(ctx context.Context, cmd store.Cmd, id, edge, windowAt string) (store.Schedule, []store.TargetedResource, *store.WindowOutcome, error)
	ClaimResource(ctx context.Context, cmd store.Cmd, at time.Time, r store.TargetedResource, window string, until time.Time) (store.TargetedResource, bool, error)
	FinishResource(ctx context.Context, cmd store.Cmd, at time.Time, r store.TargetedResource, edge, window string, result messages.ExecutionResult, count int) (messages.ExecutionResult, error)
	CloseWindow(ctx context.Context, cmd store.Cmd, id, edge, windowAt, next string, w store.WindowOutcome) (store.WindowOutcome, error)
}

// Cloud acts in an account through its role (provider.Cloud): who the
// role is, and starting and stopping its resources. Both are idempotent:
// a resource already up or down is left so.
type Cloud interface {
	Identity(ctx context.Context, roleARN string) (string, error)
	Start(ctx context.Context, roleARN string, r messages.ResourceARN, restore int32) error
	Stop(ctx context.Context, roleARN string, r messages.ResourceARN) (int32, error)
}

// windowParallelism bounds the resources one window acts on at once.
const windowParallelism = 8

// busyPause is how often a delivery looks again at a resource another
// delivery of its window holds.
const busyPause = 500 * time.Millisecond

// windowHold is how long a window holds a resource when its command has
// no deadline: after it, another delivery may act instead.
const windowHold = 5 * time.Minute

// Nucleus handles the Nucleus platform's commands.
type Nucleus struct {
	store nucleusStore
	cloud Cloud
	// queue is the Nucleus command queue, where window timers send
	// schedule.window-due.
	queue string
	now   func() time.Time
}

// NewNucleus returns the Nucleus handler; window timers call back to queue.
func NewNucleus(st nucleusStore, cloud Cloud, queue string, now func() time.Time) *Nucleus {
	if st == nil || cloud == nil || queue == "" || now == nil {
		panic("handlers: NewNucleus needs a store, a cloud, the Nucleus queue and a clock")
	}
	return &Nucleus{store: st, cloud: cloud, queue: queue, now: now}
}

// Handle applies one Nucleus command.
func (h *Nucleus) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	var (
		outs       []messages.Out
		err        error
		id, detail string
	)
	switch p := cmd.Payload.(type) {
	case *messages.AccountRegisterPayload:
		c.Actor, id = p.UserID, p.AccountID
		outs, err = account(messages.AccountRegistered)(h.store.RegisterAccount(ctx, c, *p))
	case *messages.AccountUpdatePayload:
		c.Actor, id = p.UserID, p.AccountID
		outs, err = account(messages.AccountUpdated)(h.store.UpdateAccount(ctx, c, *p))
	case *messages.AccountTestPayload:
		c.Actor, id = p.UserID, p.AccountID
		outs, err = h.test(ctx, c, p)
	case *messages.ScheduleUpsertPayload:
		c.Actor, id = p.UserID, p.ScheduleID
		outs, detail, err = h.upsert(ctx, c, p)
	case *messages.ScheduleRefPayload:
		c.Actor, id = p.UserID, p.ScheduleID
		outs, err = h.scheduleRef(ctx, c, cmd.Type, p)
	case *messages.ResourcePayload:
		c.Actor, id, detail = p.UserID, p.ScheduleID, p.ResourceARN
		outs, err = h.resource(ctx, c, cmd.Type, p)
	case *messages.ScheduleWindowPayload:
		c.Actor, id, detail = p.UserID, p.ScheduleID, store.WindowName(p.Edge, p.WindowAt)
		outs, err = h.window(ctx, c, p)
	default:
		return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no Nucleus handler", cmd.Type)}
	}
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.NucleusRejected, rej.At, messages.NucleusRejectedPayload{
			Command: cmd.Type, ID: id, UserID: c.Actor, Reason: rej.Reason, Detail: detail,
		}), nil
	}
	return outs, err
}

// account is the event of an account registered or updated.
func account(t messages.Type) func(store.Account, error) ([]messages.Out, error) {
	return func(a store.Account, err error) ([]messages.Out, error) {
		if err != nil {
			return nil, err
		}
		return one(t, parseISO(a.UpdatedAt), accountPayload(a)), nil
	}
}

func accountPayload(a store.Account) messages.AccountPayload {
	return messages.AccountPayload{AccountID: a.AccountID, AccountName: a.AccountName, RoleARN: a.RoleARN,
		Status: a.Status, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// test assumes the account's role and records who STS says it is, or
// why it could not. A redelivery replays the result without a new test.
func (h *Nucleus) test(ctx context.Context, c store.Cmd, p *messages.AccountTestPayload) ([]messages.Out, error) {
	res, done, err := h.store.RecordedTest(ctx, c)
	if err != nil {
		return nil, err
	}
	if !done {
		a, found, err := h.store.GetAccount(ctx, p.AccountID)
		if err != nil {
			return nil, err
		}
		// An account never registered is refused by the store, which
		// records the rejection.
		identity, testErr := "", ""
		if found {
			if identity, err = h.cloud.Identity(ctx, a.RoleARN); err != nil {
				testErr = err.Error()
			}
		}
		if res, err = h.store.RecordTest(ctx, c, p.AccountID, a.RoleARN, identity, testErr); err != nil {
			return nil, err
		}
	}
	a := res.Account
	status := messages.AccountActive
	if res.Error != "" {
		status = messages.AccountFailed
	}
	return one(messages.AccountTested, parseISO(a.LastTestRunAt), messages.AccountTestedPayload{AccountID: a.AccountID,
		Status: status, Identity: res.Identity, Error: res.Error, TestedAt: a.LastTestRunAt}), nil
}

// crons parses a schedule's crons; a bad one is the rejection's reason,
// and its detail says why.
func crons(startCron, endCron, zone string) (start, stop timers.Cron, reason, detail string) {
	var err error
	if start, err = timers.ParseCron(startCron, zone); err == nil {
		stop, err = timers.ParseCron(endCron, zone)
	}
	switch {
	case errors.Is(err, timers.ErrInvalidZone):
		return start, stop, messages.ReasonInvalidTimezone, err.Error()
	case err != nil:
		return start, stop, messages.ReasonInvalidCron, err.Error()
	}
	return start, stop, "", ""
}

// nextWindows are a schedule's next start and stop after now, as stored.
func nextWindows(now time.Time) store.Windows {
	return func(startCron, endCron, zone string) (string, string, error) {
		start, stop, reason, detail := crons(startCron, endCron, zone)
		if reason != "" {
			return "", "", fmt.Errorf("stored schedule: %s", detail)
		}
		return store.At(start.Next(now)).String(), store.At(stop.Next(now)).String(), nil
	}
}

func (h *Nucleus) upsert(ctx context.Context, c store.Cmd, p *messages.ScheduleUpsertPayload) ([]messages.Out, string, error) {
	if _, _, reason, detail := crons(p.StartCron, p.EndCron, p.Timezone); reason != "" {
		return nil, detail, h.store.Refuse(ctx, c, "SCHEDULE#"+p.ScheduleID, reason)
	}
	nextStart, nextStop, err := nextWindows(c.At)(p.StartCron, p.EndCron, p.Timezone)
	if err != nil {
		return nil, "", err
	}
	sch, err := h.store.UpsertSchedule(ctx, c, *p, nextStart, nextStop)
	if err != nil {
		return nil, "", err
	}
	outs, err := h.armed(c, messages.ScheduleUpserted, sch)
	return outs, "", err
}

func (h *Nucleus) scheduleRef(ctx context.Context, c store.Cmd, t messages.Type, p *messages.ScheduleRefPayload) ([]messages.Out, error) {
	switch t {
	case messages.ScheduleEnable:
		sch, err := h.store.EnableSchedule(ctx, c, *p, nextWindows(c.At))
		if err != nil {
			return nil, err
		}
		return h.armed(c, messages.ScheduleEnabled, sch)
	case messages.ScheduleDisable:
		sch, err := h.store.DisableSchedule(ctx, c, *p)
		if err != nil {
			return nil, err
		}
		return h.armed(c, messages.ScheduleDisabled, sch)
	}
	del, err := h.store.DeleteSchedule(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	at := parseISO(del.At)
	outs := one(messages.ScheduleDeleted, at, messages.ScheduleDeletedPayload{ScheduleID: del.Item.ScheduleID,
		ScheduleName: del.Item.ScheduleName, Resources: del.Item.ResourceCount, DeletedAt: del.At})
	return append(outs, disarm(at, del.Item.ScheduleID)...), nil
}

// armed is a schedule's event with its window timers: armed for its next
// windows while it is enabled, deleted while it is not.
func (h *Nucleus) armed(c store.Cmd, t messages.Type, sch store.Schedule) ([]messages.Out, error) {
	at := parseISO(sch.UpdatedAt)
	outs := one(t, at, messages.SchedulePayload{ScheduleID: sch.ScheduleID, ScheduleName: sch.ScheduleName,
		StartCron: sch.StartCron, EndCron: sch.EndCron, Timezone: sch.Timezone, Enabled: sch.Enabled,
		NextStartAt: sch.NextStartAt, NextStopAt: sch.NextStopAt, UpdatedAt: sch.UpdatedAt})
	if !sch.Enabled {
		return append(outs, disarm(at, sch.ScheduleID)...), nil
	}
	for _, w := range []struct{ edge, at string }{{messages.EdgeStart, sch.NextStartAt}, {messages.EdgeStop, sch.NextStopAt}} {
		timer, err := h.windowTimer(c, at, sch.ScheduleID, w.edge, w.at)
		if err != nil {
			return nil, err
		}
		outs = append(outs, timer)
	}
	return outs, nil
}

// windowTimerID names a schedule's timer of one edge: a later window
// replaces the one before.
func windowTimerID(scheduleID, edge string) string { return "nucleus:" + scheduleID + ":" + edge }

func (h *Nucleus) windowTimer(c store.Cmd, decided time.Time, scheduleID, edge, windowAt string) (messages.Out, error) {
	return commandTimer(c, decided, h.queue, windowTimerID(scheduleID, edge), "nucleus-window", edge, parseISO(windowAt),
		messages.ScheduleWindowDue, messages.ScheduleWindowPayload{ScheduleID: scheduleID, Edge: edge, WindowAt: windowAt, UserID: "system"})
}

// disarm deletes a schedule's window timers.
func disarm(at time.Time, scheduleID string) []messages.Out {
	var outs []messages.Out
	for _, edge := range []string{messages.EdgeStart, messages.EdgeStop} {
		id := windowTimerID(scheduleID, edge)
		outs = append(outs, messages.Out{Type: messages.TimerDelete, At: at, Command: true, Key: id, Payload: messages.TimerDeletePayload{TimerID: id}})
	}
	return outs
}

func (h *Nucleus) resource(ctx context.Context, c store.Cmd, t messages.Type, p *messages.ResourcePayload) ([]messages.Out, error) {
	var (
		r  store.TargetedResource
		at string
	)
	if t == messages.ResourceAttach {
		arn, err := messages.ParseResourceARN(p.ResourceARN)
		if err != nil {
			return nil, &messages.InvalidError{Command: t, Field: "resource_arn", Reason: err.Error()}
		}
		if r, err = h.store.AttachResource(ctx, c, *p, arn); err != nil {
			return nil, err
		}
		at = r.AttachedAt
	} else {
		removed, err := h.store.DetachResource(ctx, c, *p)
		if err != nil {
			return nil, err
		}
		r, at = removed.Item, removed.At
	}
	event := map[messages.Type]messages.Type{messages.ResourceAttach: messages.ResourceAttached, messages.ResourceDetach: messages.ResourceDetached}[t]
	return one(event, parseISO(at), messages.ResourceEventPayload{ScheduleID: r.ScheduleID, ResourceARN: r.ResourceARN,
		ResourceType: r.ResourceType, Region: r.Region, AccountID: r.AccountID, At: at}), nil
}

// window acts on every resource of the schedule for one window, once:
// each resource is held while it acts and records what the window did
// with its EXECUTE audit entry, so a redelivery acts only where no
// delivery finished before. Then the schedule's next window of the edge
// is armed. A window the schedule no longer has armed does nothing.
func (h *Nucleus) window(ctx context.Context, c store.Cmd, p *messages.ScheduleWindowPayload) ([]messages.Out, error) {
	w, done, err := h.store.RecordedWindow(ctx, c)
	if err != nil {
		return nil, err
	}
	if !done {
		if w, err = h.execute(ctx, c, p); err != nil {
			return nil, err
		}
	}
	at := parseISO(p.WindowAt)
	outs := one(messages.ScheduleWindowExecuted, at, messages.WindowExecutedPayload{ScheduleID: p.ScheduleID, Edge: p.Edge,
		WindowAt: p.WindowAt, Results: w.Results, NextAt: w.NextAt, Overtaken: w.Overtaken})
	if w.NextAt == "" {
		return outs, nil
	}
	timer, err := h.windowTimer(c, at, p.ScheduleID, p.Edge, w.NextAt)
	if err != nil {
		return nil, err
	}
	return append(outs, timer), nil
}

func (h *Nucleus) execute(ctx context.Context, c store.Cmd, p *messages.ScheduleWindowPayload) (store.WindowOutcome, error) {
	sch, resources, replayed, err := h.store.OpenWindow(ctx, c, p.ScheduleID, p.Edge, p.WindowAt)
	switch {
	case err != nil:
		return store.WindowOutcome{}, err
	case replayed != nil:
		return *replayed, nil
	}
	start, stop, reason, detail := crons(sch.StartCron, sch.EndCron, sch.Timezone)
	if reason != "" {
		return store.WindowOutcome{}, fmt.Errorf("schedule %s: %s", sch.ScheduleID, detail)
	}
	edge, other := start, stop
	if p.Edge == messages.EdgeStop {
		edge, other = stop, start
	}
	// The next window after this one, or after now when transit was down
	// through some: a missed window is not made up.
	at := parseISO(p.WindowAt)
	next := store.At(edge.Next(later(at, c.At))).String()
	// A window late enough that the other edge's cron has fired since
	// (transit was down through both, or a late redelivery) acts on
	// nothing: the edge that fired last acts, whichever window of the
	// two arrives first, and the resources end as the schedule now says.
	if latest(other, at, c.At).After(later(at, latest(edge, at, c.At))) {
		return h.store.CloseWindow(ctx, c, p.ScheduleID, p.Edge, p.WindowAt, next, store.WindowOutcome{Results: []messages.ExecutionResult{}, Overtaken: true})
	}
	results, err := h.act(ctx, c, p, resources)
	if err != nil {
		return store.WindowOutcome{}, err
	}
	return h.store.CloseWindow(ctx, c, p.ScheduleID, p.Edge, p.WindowAt, next, store.WindowOutcome{Results: results})
}

// maxCatchUp bounds the fire times latest walks through: a minutely
// cron across two months.
const maxCatchUp = 100_000

// latest is the last time c fires after after and not after now; the
// zero time when it does not.
func latest(c timers.Cron, after, now time.Time) time.Time {
	var last time.Time
	for i, t := 0, c.Next(after); i < maxCatchUp && !t.IsZero() && !t.After(now); i, t = i+1, c.Next(t) {
		last = t
	}
	return last
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// act runs the window on each resource, a few at once; results keep the
// resources' order.
func (h *Nucleus) act(ctx context.Context, c store.Cmd, p *messages.ScheduleWindowPayload, resources []store.TargetedResource) ([]messages.ExecutionResult, error) {
	until := c.At.Add(windowHold)
	if deadline, ok := ctx.Deadline(); ok {
		until = deadline.Add(firingMargin)
	}
	window := store.WindowName(p.Edge, p.WindowAt)
	roles, err := h.roles(ctx, resources)
	if err != nil {
		return nil, err
	}
	results := make([]*messages.ExecutionResult, len(resources))
	errs := make([]error, len(resources))
	sem := make(chan struct{}, windowParallelism)
	var wg sync.WaitGroup
	for i, r := range resources {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = h.actOn(ctx, c, r, p.Edge, window, until, roles[r.AccountID])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]messages.ExecutionResult, 0, len(results))
	for _, r := range results {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

// role is an account's role, or why there is none to act through.
type role struct{ arn, missing string }

// roles are the roles of the resources' accounts; an account not
// registered fails its resources, a failed read the whole window.
func (h *Nucleus) roles(ctx context.Context, resources []store.TargetedResource) (map[string]role, error) {
	roles := map[string]role{}
	for _, r := range resources {
		if _, ok := roles[r.AccountID]; ok {
			continue
		}
		a, found, err := h.store.GetAccount(ctx, r.AccountID)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read account %s: %w", r.AccountID, err)
		case !found:
			roles[r.AccountID] = role{missing: fmt.Sprintf("account %s is not registered", r.AccountID)}
		default:
			roles[r.AccountID] = role{arn: a.RoleARN}
		}
	}
	return roles, nil
}

// actOn acts on one resource unless this window already did (its result
// is then the one recorded); nil when the resource was detached meanwhile.
func (h *Nucleus) actOn(ctx context.Context, c store.Cmd, r store.TargetedResource, edge, window string, until time.Time, via role) (*messages.ExecutionResult, error) {
	held, acted, err := h.store.ClaimResource(ctx, c, h.now(), r, window, until)
	// Another delivery of the window holds it: wait for its result, or
	// for its hold to lapse, rather than spend a receive of this one.
	for errors.Is(err, store.ErrResourceBusy) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(busyPause):
		}
		held, acted, err = h.store.ClaimResource(ctx, c, h.now(), r, window, until)
	}
	if _, rejected := store.AsRejection(err); rejected {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if acted {
		return &messages.ExecutionResult{ResourceARN: held.ResourceARN, ResourceType: held.ResourceType, Status: held.LastStatus, Error: held.LastError}, nil
	}
	result := messages.ExecutionResult{ResourceARN: r.ResourceARN, ResourceType: r.ResourceType, Status: messages.ExecSuccess}
	count, err := h.call(ctx, held, edge, via)
	if err != nil {
		result.Status, result.Error = messages.ExecFail, err.Error()
	}
	if result, err = h.store.FinishResource(ctx, c, h.now(), held, edge, window, result, int(count)); err != nil {
		return nil, err
	}
	return &result, nil
}

// call starts or stops r through its account's role; a stop returns the
// ECS desired count it found.
func (h *Nucleus) call(ctx context.Context, r store.TargetedResource, edge string, via role) (int32, error) {
	if via.missing != "" {
		return 0, errors.New(via.missing)
	}
	arn, err := messages.ParseResourceARN(r.ResourceARN)
	if err != nil {
		return 0, err
	}
	if edge == messages.EdgeStart {
		return 0, h.cloud.Start(ctx, via.arn, arn, int32(r.DesiredCount))
	}
	return h.cloud.Stop(ctx, via.arn, arn)
}
