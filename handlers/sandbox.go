// Package handlers holds one command handler per domain: decode is done by
// the router, each handler calls its store transition and turns the
// outcome into events.
package handlers

import (
	"context"
	"fmt"
	"time"

	"transit/machine"
	"transit/messages"
	"transit/provider"
	"transit/store"
)

type sandboxStore interface {
	Allocate(ctx context.Context, cmd store.Cmd, trackID, idempotencyKey string) (store.Sandbox, error)
	MarkDeletion(ctx context.Context, cmd store.Cmd, sandboxID, trackID string) (store.Sandbox, error)
	Expire(ctx context.Context, cmd store.Cmd, sandboxID string) (store.Sandbox, error)
	OverdueAllocations(ctx context.Context, now int64) ([]store.Sandbox, error)
	CleanupDue(ctx context.Context, now int64) ([]store.Sandbox, error)
	PendingCleanup(ctx context.Context, cmd store.Cmd, sandboxID string) (store.Sandbox, bool, error)
	Deleted(ctx context.Context, cmd store.Cmd, sb store.Sandbox) (store.Sandbox, error)
	DeletionFailed(ctx context.Context, cmd store.Cmd, sb store.Sandbox, reason string, policy machine.CleanupPolicy) (store.Sandbox, error)
	CleanupNotAttempted(ctx context.Context, cmd store.Cmd, sb store.Sandbox, reason string) (store.Sandbox, error)
	SyncOutcome(ctx context.Context, cmd store.Cmd) (store.SyncResult, bool, error)
	Sync(ctx context.Context, cmd store.Cmd, inventory []messages.InventoryItem) (store.SyncResult, error)
	Reinstate(ctx context.Context, cmd store.Cmd, sandboxID string) (store.Sandbox, error)
	Retire(ctx context.Context, cmd store.Cmd, sandboxID string) (store.Sandbox, error)
}

// sandboxProvider is the external sandbox provider (docs/sandbox.md).
type sandboxProvider interface {
	// DeleteSandbox deletes a sandbox; deleting one already gone succeeds.
	DeleteSandbox(ctx context.Context, externalID string) error
}

// inventoryLister is a provider that lists its sandboxes, which a
// sandbox.sync without an inventory pulls. It is asked for apart from
// sandboxProvider, so a provider that only deletes still serves.
type inventoryLister interface {
	ListSandboxes(ctx context.Context) ([]provider.Sandbox, error)
}

// Sandbox handles the sandbox broker's commands.
type Sandbox struct {
	store    sandboxStore
	provider sandboxProvider
	now      func() time.Time
	// expiryQueue, when set, is the queue an allocation's expiry timer
	// sends sandbox.expire to.
	expiryQueue string
	// cleanupPolicy paces the retries of a deletion the provider refuses.
	cleanupPolicy machine.CleanupPolicy
}

// NewSandbox returns the sandbox handler. now is the clock transitions
// decide by. provider may be nil when none is configured: every cleanup is
// then answered sandbox.deletion-failed (provider_not_configured) and the
// sandbox left as it is.
func NewSandbox(st sandboxStore, provider sandboxProvider, now func() time.Time) *Sandbox {
	if st == nil || now == nil {
		panic("handlers: NewSandbox needs a store and a clock")
	}
	return &Sandbox{store: st, provider: provider, now: now}
}

// WithCleanupPolicy sets how a deletion the provider refuses is retried
// and when it stops (machine.DefaultCleanupPolicy unless set).
func (h *Sandbox) WithCleanupPolicy(p machine.CleanupPolicy) *Sandbox {
	h.cleanupPolicy = p
	return h
}

// WithExpiryTimers makes every allocation arm a durable timer that sends
// sandbox.expire to queue when its lab window closes.
func (h *Sandbox) WithExpiryTimers(queue string) *Sandbox {
	h.expiryQueue = queue
	return h
}

// expiryMargin puts the expiry timer a second after the window closes, so
// an instance whose clock runs a little behind still finds it overdue.
const expiryMargin = time.Second

// Handle applies one sandbox command.
func (h *Sandbox) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	switch p := cmd.Payload.(type) {
	case *messages.SandboxAllocatePayload:
		return h.allocate(ctx, c, p)
	case *messages.SandboxMarkDeletionPayload:
		return h.markDeletion(ctx, c, p)
	case *messages.SandboxExpirePayload:
		if p.SandboxID == "" {
			return h.expireSweep(ctx, c)
		}
		return h.expire(ctx, c, p.SandboxID)
	case *messages.SandboxCleanupPayload:
		if p.SandboxID == "" {
			return h.cleanupSweep(ctx, c)
		}
		return h.cleanup(ctx, c, p.SandboxID)
	case *messages.SandboxSyncPayload:
		return h.sync(ctx, c, p)
	case *messages.SandboxReinstatePayload:
		return h.reinstate(ctx, c, p.SandboxID)
	case *messages.SandboxRetirePayload:
		return h.retire(ctx, c, p.SandboxID)
	}
	return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no sandbox handler", cmd.Type)}
}

func (h *Sandbox) allocate(ctx context.Context, c store.Cmd, p *messages.SandboxAllocatePayload) ([]messages.Out, error) {
	c.Actor = p.TrackID
	sb, err := h.store.Allocate(ctx, c, p.TrackID, p.IdempotencyKey)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.SandboxAllocationRejected, rej.At, messages.SandboxAllocationRejectedPayload{
			TrackID: p.TrackID, IdempotencyKey: p.IdempotencyKey, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	outs := one(messages.SandboxAllocated, unix(sb.AllocatedAt), messages.SandboxAllocatedPayload{
		SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, Name: sb.Name, TrackID: sb.AllocatedToTrack,
		IdempotencyKey: sb.IdempotencyKey, AllocatedAt: sb.AllocatedAt, ExpiresAt: sb.ExpiresAt(),
	})
	if h.expiryQueue == "" {
		return outs, nil
	}
	timer, err := h.expiryTimer(c, sb)
	if err != nil {
		return nil, err
	}
	return append(outs, timer), nil
}

// expiryTimerGroup groups the sandboxes' expiry timers.
const expiryTimerGroup = "sandbox-expiry"

// expiryTimerID names a sandbox's expiry timer: one per sandbox, so a
// re-allocation replaces it and a release knows which to delete.
func expiryTimerID(sandboxID string) string { return expiryTimerGroup + ":" + sandboxID }

// expiryTimer is the timer.create that expires an allocation. The timer
// is named after the sandbox, so a re-allocation replaces it; the
// sandbox.expire it carries has an ID derived from this allocation, so a
// firing repeated by a retry is one command.
func (h *Sandbox) expiryTimer(c store.Cmd, sb store.Sandbox) (messages.Out, error) {
	return commandTimer(c, unix(sb.AllocatedAt), h.expiryQueue, expiryTimerID(sb.SandboxID), expiryTimerGroup, sb.SandboxID,
		unix(sb.ExpiresAt()).Add(expiryMargin), messages.SandboxExpire, messages.SandboxExpirePayload{SandboxID: sb.SandboxID})
}

func (h *Sandbox) markDeletion(ctx context.Context, c store.Cmd, p *messages.SandboxMarkDeletionPayload) ([]messages.Out, error) {
	c.Actor = p.TrackID
	sb, err := h.store.MarkDeletion(ctx, c, p.SandboxID, p.TrackID)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.SandboxDeletionRejected, rej.At, messages.SandboxDeletionRejectedPayload{
			SandboxID: p.SandboxID, TrackID: p.TrackID, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	outs := one(messages.SandboxDeletionMarked, unix(sb.DeletionRequestedAt), messages.SandboxDeletionMarkedPayload{
		SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, TrackID: sb.AllocatedToTrack, DeletionRequestedAt: sb.DeletionRequestedAt,
	})
	if h.expiryQueue == "" {
		return outs, nil
	}
	// The released allocation's expiry timer has
	// nothing left to expire: delete it rather than let it fire into a
	// rejection. Its ID derives from this command, so a redelivery sends
	// the same delete.
	return append(outs, messages.Out{Type: messages.TimerDelete, At: unix(sb.DeletionRequestedAt), Command: true,
		Payload: messages.TimerDeletePayload{TimerID: expiryTimerID(sb.SandboxID)}}), nil
}

// expire emits nothing when the sandbox is no longer an overdue
// allocation: the track released it, or a sweep and a timer both fired.
func (h *Sandbox) expire(ctx context.Context, c store.Cmd, sandboxID string) ([]messages.Out, error) {
	sb, err := h.store.Expire(ctx, c, sandboxID)
	if _, ok := store.AsRejection(err); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.SandboxExpired, unix(sb.DeletionRequestedAt), messages.SandboxExpiredPayload{
		SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, TrackID: sb.AllocatedToTrack,
		AllocatedAt: sb.AllocatedAt, DeletionRequestedAt: sb.DeletionRequestedAt,
	}), nil
}

// expireSweep sends one sandbox.expire per overdue allocation. Their IDs
// derive from the sweep's, so a redelivered sweep sends the same commands.
func (h *Sandbox) expireSweep(ctx context.Context, c store.Cmd) ([]messages.Out, error) {
	overdue, err := h.store.OverdueAllocations(ctx, c.At.Unix())
	if err != nil {
		return nil, err
	}
	outs := make([]messages.Out, 0, len(overdue))
	for _, sb := range overdue {
		outs = append(outs, messages.Out{Type: messages.SandboxExpire, Key: sb.SandboxID, At: c.At, Command: true,
			Payload: messages.SandboxExpirePayload{SandboxID: sb.SandboxID}})
	}
	return outs, nil
}

// cleanup deletes the sandbox at the provider, then records the result.
// A redelivery after either outcome replays it without asking the
// provider again. A refusal is retried after the cleanup policy's backoff,
// and the last one it allows leaves the sandbox cleanup_stuck.
func (h *Sandbox) cleanup(ctx context.Context, c store.Cmd, sandboxID string) ([]messages.Out, error) {
	sb, done, err := h.store.PendingCleanup(ctx, c, sandboxID)
	if !done && err == nil {
		if h.provider == nil {
			sb, err = h.store.CleanupNotAttempted(ctx, c, sb, messages.ReasonProviderNotConfigured)
		} else if perr := h.provider.DeleteSandbox(ctx, sb.ExternalID); perr != nil {
			sb, err = h.store.DeletionFailed(ctx, c, sb, perr.Error(), h.cleanupPolicy)
		} else {
			sb, err = h.store.Deleted(ctx, c, sb)
		}
	}
	if _, ok := store.AsRejection(err); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch sb.Status {
	case store.StatusDeleted:
		return one(messages.SandboxDeleted, unix(sb.UpdatedAt), messages.SandboxDeletedPayload{
			SandboxID: sb.SandboxID, ExternalID: sb.ExternalID,
		}), nil
	case store.StatusCleanupStuck:
		return one(messages.SandboxCleanupStuck, unix(sb.UpdatedAt), messages.SandboxCleanupStuckPayload{
			SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, DeletionRetryCount: sb.DeletionRetryCount, LastError: sb.LastDeletionError,
		}), nil
	}
	return one(messages.SandboxDeletionFailed, unix(sb.UpdatedAt), messages.SandboxDeletionFailedPayload{
		SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, DeletionRetryCount: sb.DeletionRetryCount, Reason: sb.LastDeletionError,
	}), nil
}

// cleanupSweep sends one sandbox.cleanup per pending deletion whose next
// attempt is due: a sandbox the provider refused waits out its backoff.
func (h *Sandbox) cleanupSweep(ctx context.Context, c store.Cmd) ([]messages.Out, error) {
	due, err := h.store.CleanupDue(ctx, c.At.Unix())
	if err != nil {
		return nil, err
	}
	outs := make([]messages.Out, 0, len(due))
	for _, sb := range due {
		outs = append(outs, messages.Out{Type: messages.SandboxCleanup, Key: sb.SandboxID, At: c.At, Command: true,
			Payload: messages.SandboxCleanupPayload{SandboxID: sb.SandboxID}})
	}
	return outs, nil
}

// sync reconciles the pool with the inventory the command carries, or,
// without one, with the provider's own list. A pulled sync looks for its
// recorded outcome first, so a redelivery does not ask the provider again.
func (h *Sandbox) sync(ctx context.Context, c store.Cmd, p *messages.SandboxSyncPayload) ([]messages.Out, error) {
	inventory := p.Inventory
	if p.Pull() {
		res, done, err := h.store.SyncOutcome(ctx, c)
		if err != nil {
			return nil, err
		}
		if done {
			return synced(res), nil
		}
		if inventory, err = h.pull(ctx); err != nil {
			return nil, err
		}
	}
	res, err := h.store.Sync(ctx, c, inventory)
	if err != nil {
		return nil, err
	}
	return synced(res), nil
}

// pull asks the provider for its inventory. Without a provider that lists
// the command can never succeed here: it is invalid, and dead-lettered
// with the reason. An inventory the provider answers that breaks the
// rules a producer's must keep is the provider's failure, retried like
// one.
func (h *Sandbox) pull(ctx context.Context) ([]messages.InventoryItem, error) {
	lister, ok := h.provider.(inventoryLister)
	if !ok {
		return nil, &messages.InvalidError{Command: messages.SandboxSync, Field: "inventory",
			Reason: "required: no sandbox provider that lists its sandboxes is configured (TRANSIT_PROVIDER_URL) to pull it from"}
	}
	listed, err := lister.ListSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("pull the inventory: %w", err)
	}
	inventory := make([]messages.InventoryItem, len(listed))
	for i, sb := range listed {
		inventory[i] = messages.InventoryItem{ExternalID: sb.ExternalID, Name: sb.Name, LabDurationHours: sb.LabDurationHours}
	}
	pulled := messages.SandboxSyncPayload{Inventory: inventory}
	if err := pulled.Validate(); err != nil {
		// %v, not %w: the command itself is valid, so this is no poison.
		return nil, fmt.Errorf("pull the inventory: the provider listed an invalid one: %v", err)
	}
	return inventory, nil
}

func synced(res store.SyncResult) []messages.Out {
	ids := func(list []string) []string { return append(make([]string, 0, len(list)), list...) }
	return one(messages.SandboxSynced, unix(res.At), messages.SandboxSyncedPayload{Added: ids(res.Added), Staled: ids(res.Staled)})
}

// reinstate returns a stale sandbox to the pool; anything else is answered
// with a rejection.
func (h *Sandbox) reinstate(ctx context.Context, c store.Cmd, sandboxID string) ([]messages.Out, error) {
	sb, err := h.store.Reinstate(ctx, c, sandboxID)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.SandboxReinstateRejected, rej.At, messages.SandboxRejectedPayload{SandboxID: sandboxID, Reason: rej.Reason}), nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.SandboxReinstated, unix(sb.UpdatedAt), messages.SandboxReinstatedPayload{
		SandboxID: sb.SandboxID, ExternalID: sb.ExternalID, Name: sb.Name,
	}), nil
}

// retire deletes a stale sandbox's item; anything else is answered with a
// rejection.
func (h *Sandbox) retire(ctx context.Context, c store.Cmd, sandboxID string) ([]messages.Out, error) {
	sb, err := h.store.Retire(ctx, c, sandboxID)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.SandboxRetireRejected, rej.At, messages.SandboxRejectedPayload{SandboxID: sandboxID, Reason: rej.Reason}), nil
	}
	if err != nil {
		return nil, err
	}
	// As for sandbox.deleted, the time is the recorded snapshot's, so a
	// replay emits the same event.
	return one(messages.SandboxRetired, unix(sb.UpdatedAt), messages.SandboxRetiredPayload{SandboxID: sb.SandboxID, ExternalID: sb.ExternalID}), nil
}

func one(t messages.Type, at time.Time, payload any) []messages.Out {
	return []messages.Out{{Type: t, At: at, Payload: payload}}
}

func unix(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
