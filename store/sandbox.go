package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"transit/machine"
	"transit/messages"
)

// Sandbox statuses, the states of machine.Sandbox (docs/sandbox.md).
const (
	StatusAvailable       = machine.SandboxAvailable
	StatusAllocated       = machine.SandboxAllocated
	StatusPendingDeletion = machine.SandboxPendingDeletion
	StatusStale           = machine.SandboxStale
	// StatusDeleted is never stored: it marks the last snapshot of a
	// sandbox the provider deleted, as recorded in the audit table.
	StatusDeleted = machine.Deleted
)

// SandboxStatuses lists every status, the partitions of StatusIndex.
var SandboxStatuses = machine.Sandbox.States

// Sandbox is a SandboxPool item: one lab sandbox of the pool.
type Sandbox struct {
	// PK is the partition key, SBX#<sandbox_id>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is the sort key, always META.
	SK string `dynamodbav:"SK" json:"-"`
	// SandboxID is the sandbox's UUID, a UUIDv5 of its external_id, so a
	// repeated sync creates the same item rather than a twin.
	SandboxID string `dynamodbav:"sandbox_id" json:"sandbox_id"`
	// Name is the human-readable name the provider lists.
	Name string `dynamodbav:"name" json:"name"`
	// ExternalID is the provider's identifier of the sandbox; it never
	// changes.
	ExternalID string `dynamodbav:"external_id" json:"external_id"`
	// Status is the sandbox's state: available, allocated,
	// pending_deletion or stale (the partitions of StatusIndex).
	Status string `dynamodbav:"status" json:"status"`
	// LabDurationHours is how long an allocation may last, in hours; it
	// may be fractional, down to one second (1/3600).
	LabDurationHours float64 `dynamodbav:"lab_duration_hours" json:"lab_duration_hours"`
	// DeletionRetryCount counts failed deletions at the provider.
	DeletionRetryCount int `dynamodbav:"deletion_retry_count" json:"deletion_retry_count"`
	// AllocatedAt is when the sandbox was allocated (Unix seconds), 0
	// before that: every index sorts by it, so it is always stored. The
	// lab window closes at allocated_at + lab_duration_hours.
	AllocatedAt int64 `dynamodbav:"allocated_at" json:"allocated_at"`
	// AllocatedToTrack is the track the sandbox was allocated to; it stays
	// after the release.
	AllocatedToTrack string `dynamodbav:"allocated_to_track,omitempty" json:"allocated_to_track,omitempty"`
	// IdempotencyKey is the allocation's idempotency key (the track ID
	// unless the command named one): a track holds at most one live
	// allocation per key.
	IdempotencyKey string `dynamodbav:"idempotency_key,omitempty" json:"idempotency_key,omitempty"`
	// DeletionRequestedAt is when the sandbox was released by its track or
	// expired (Unix seconds).
	DeletionRequestedAt int64 `dynamodbav:"deletion_requested_at,omitempty" json:"deletion_requested_at,omitempty"`
	// CreatedAt is when a sync added the sandbox (Unix seconds).
	CreatedAt int64 `dynamodbav:"created_at" json:"created_at"`
	// UpdatedAt is when the item last changed (Unix seconds).
	UpdatedAt int64 `dynamodbav:"updated_at" json:"updated_at"`
	// LastSynced is when the sync that added the sandbox ran (Unix
	// seconds); later syncs leave it as it is.
	LastSynced int64 `dynamodbav:"last_synced,omitempty" json:"last_synced,omitempty"`
	// LastDeletionError is the provider's answer to the last failed
	// deletion, for whoever investigates a sandbox stuck in cleanup.
	LastDeletionError string `dynamodbav:"last_deletion_error,omitempty" json:"last_deletion_error,omitempty"`
}

// ExpiresAt is when the allocation's lab window closes.
func (s Sandbox) ExpiresAt() int64 { return s.AllocatedAt + s.labSeconds() }

// labSeconds is the lab duration in whole seconds; the item counts it in
// hours, which may be fractional.
func (s Sandbox) labSeconds() int64 { return int64(math.Round(s.LabDurationHours * 3600)) }

func sandboxKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "SBX#" + id},
		"SK": &types.AttributeValueMemberS{Value: "META"},
	}
}

func sandboxEntity(id string) string { return "SANDBOX#" + id }

// sandboxIDNamespace derives a sandbox's ID from its provider ID, so a
// re-applied sync creates the same item rather than a twin.
var sandboxIDNamespace = uuid.MustParse("0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f")

// SandboxIDFor is the sandbox ID transit gives a provider sandbox.
func SandboxIDFor(externalID string) string {
	return uuid.NewSHA1(sandboxIDNamespace, []byte(externalID)).String()
}

// candidatesPerQuery bounds one StatusIndex read (Limit 15).
const candidatesPerQuery = 15

// allocateRounds bounds how often an allocation re-reads the pool after
// losing every candidate to concurrent allocators.
const allocateRounds = 8

// Allocate gives the track an available sandbox, or the live allocation
// its idempotency key already names. An empty pool is a *Rejection with
// reason pool_exhausted.
func (s *Store) Allocate(ctx context.Context, cmd Cmd, trackID, idempotencyKey string) (Sandbox, error) {
	in := machine.SandboxInput{Now: cmd.At.Unix(), TrackID: trackID, IdempotencyKey: idempotencyKey}
	for round := 0; round < allocateRounds; round++ {
		live, isLive, claim, claimFound, err := s.claimed(ctx, trackID, idempotencyKey)
		if err != nil {
			return Sandbox{}, fmt.Errorf("allocate for %s: %w", trackID, err)
		}
		if isLive {
			return s.recordExisting(ctx, cmd, live)
		}
		candidates, err := s.queryStatus(ctx, StatusAvailable, nil, candidatesPerQuery)
		if err != nil {
			return Sandbox{}, fmt.Errorf("allocate for %s: %w", trackID, err)
		}
		if len(candidates) == 0 {
			// An allocation under the same key may have taken the last
			// sandbox since the claim was read: its claim says so now.
			live, isLive, _, _, err := s.claimed(ctx, trackID, idempotencyKey)
			if err != nil {
				return Sandbox{}, fmt.Errorf("allocate for %s: %w", trackID, err)
			}
			if isLive {
				return s.recordExisting(ctx, cmd, live)
			}
			var sb Sandbox
			err = s.recordRejection(ctx, cmd, "TRACK#"+trackID, &Rejection{Reason: messages.ReasonPoolExhausted, At: cmd.At}, &sb)
			return sb, err
		}
		// Concurrent allocators start at different candidates, so they
		// rarely collide on the same item.
		rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		sb, taken, err := s.allocateOne(ctx, cmd, in, candidates, claim, claimFound)
		if taken || errors.Is(err, errConflict) {
			// Another command claimed the key, or took every candidate.
			continue
		}
		return sb, err
	}
	return Sandbox{}, fmt.Errorf("allocate for %s: every candidate taken in %d rounds: %w", trackID, allocateRounds, errConflict)
}

// allocateOne allocates the first candidate still available, claiming the
// idempotency key in the same transaction. claimTaken reports that
// another allocation claimed the key first.
func (s *Store) allocateOne(ctx context.Context, cmd Cmd, in machine.SandboxInput, candidates []Sandbox, claim IdempotencyClaim, claimFound bool) (sb Sandbox, claimTaken bool, err error) {
	for _, c := range candidates {
		read, err := rawItem(c)
		if err != nil {
			return Sandbox{}, false, err
		}
		st := s.sandboxStep(machine.SandboxAllocate, c.SandboxID, in)
		claimItem, err := s.claimWrite(Sandbox{SandboxID: c.SandboxID, AllocatedToTrack: in.TrackID, IdempotencyKey: in.IdempotencyKey, AllocatedAt: in.Now}, claim, claimFound)
		if err != nil {
			return Sandbox{}, false, err
		}
		st.with = []types.TransactWriteItem{claimItem}
		out, err := write(ctx, s, cmd, st, read, &sb)
		switch {
		case conflictOn(err, 1):
			return Sandbox{}, true, nil
		case errors.Is(err, errStale) || err == nil && !out.Applies():
			// Another allocator took it since the index was read.
			continue
		case err != nil:
			return Sandbox{}, false, fmt.Errorf("allocate %s for %s: %w", c.SandboxID, in.TrackID, err)
		}
		return sb, false, nil
	}
	return Sandbox{}, false, errConflict
}

// recordExisting records that cmd was answered with an allocation made
// earlier, unless cmd already has an outcome.
func (s *Store) recordExisting(ctx context.Context, cmd Cmd, sb Sandbox) (Sandbox, error) {
	put, err := s.newAuditPut(cmd, sandboxEntity(sb.SandboxID), Applied, "", sb)
	if err != nil {
		return Sandbox{}, err
	}
	// The condition check keeps the answer true at the moment it is recorded.
	check, err := conditionCheck(s.sandboxes, sandboxKey(sb.SandboxID),
		expression.Name("status").Equal(expression.Value(StatusAllocated)).
			And(expression.Name("allocated_to_track").Equal(expression.Value(sb.AllocatedToTrack))))
	if err != nil {
		return Sandbox{}, err
	}
	if err := s.settle(ctx, cmd, []types.TransactWriteItem{check, put}, &sb); err != nil {
		return Sandbox{}, fmt.Errorf("record existing allocation %s: %w", sb.SandboxID, err)
	}
	return sb, nil
}

// MarkDeletion releases a sandbox on its owner's request, within the lab
// window: the seed's owner-and-window condition. A refusal is a *Rejection
// with reason not_found, wrong_state, not_owner or expired.
func (s *Store) MarkDeletion(ctx context.Context, cmd Cmd, sandboxID, trackID string) (Sandbox, error) {
	var next Sandbox
	in := machine.SandboxInput{Now: cmd.At.Unix(), TrackID: trackID}
	if err := apply(ctx, s, cmd, s.sandboxStep(machine.SandboxMarkDeletion, sandboxID, in), &next); err != nil {
		return next, fmt.Errorf("mark %s for deletion: %w", sandboxID, err)
	}
	return next, nil
}

// Expire moves an allocation whose lab window has closed to
// pending_deletion. A sandbox that is not (or no longer) an overdue
// allocation is a *Rejection: nothing to do.
func (s *Store) Expire(ctx context.Context, cmd Cmd, sandboxID string) (Sandbox, error) {
	var next Sandbox
	if err := apply(ctx, s, cmd, s.sandboxStep(machine.SandboxExpire, sandboxID, machine.SandboxInput{Now: cmd.At.Unix()}), &next); err != nil {
		return next, fmt.Errorf("expire %s: %w", sandboxID, err)
	}
	return next, nil
}

// sandboxStep is transition name of the sandbox sandboxID.
func (s *Store) sandboxStep(name, sandboxID string, in machine.SandboxInput) step[machine.SandboxInput] {
	return step[machine.SandboxInput]{
		m: machine.Sandbox, t: machine.Sandbox.Transition(name), table: s.sandboxes,
		key: sandboxKey(sandboxID), in: in, entity: sandboxEntity(sandboxID),
	}
}

// OverdueAllocations lists allocations whose lab window has closed by now,
// from StatusIndex: only allocations at least a second old (the shortest
// lab duration) are read.
func (s *Store) OverdueAllocations(ctx context.Context, now int64) ([]Sandbox, error) {
	upper := expression.Key("allocated_at").LessThanEqual(expression.Value(now - 1))
	found, err := s.queryStatus(ctx, StatusAllocated, &upper, 0)
	if err != nil {
		return nil, fmt.Errorf("list overdue allocations: %w", err)
	}
	overdue := found[:0]
	for _, sb := range found {
		if sb.ExpiresAt() <= now {
			overdue = append(overdue, sb)
		}
	}
	return overdue, nil
}

// PendingCleanup returns the pending_deletion sandbox for a cleanup command,
// or the command's recorded outcome: done is true when the command was
// already decided, and then sb and err are what it decided. A sandbox not
// pending deletion is recorded as a *Rejection.
func (s *Store) PendingCleanup(ctx context.Context, cmd Cmd, sandboxID string) (sb Sandbox, done bool, err error) {
	if done, err := s.recorded(ctx, cmd, &sb); done {
		return sb, true, err
	}
	sb, found, err := s.GetSandbox(ctx, sandboxID)
	if err != nil {
		return Sandbox{}, false, fmt.Errorf("clean up %s: %w", sandboxID, err)
	}
	if !found || sb.Status != StatusPendingDeletion {
		reason := messages.ReasonNotFound
		if found {
			reason = messages.ReasonWrongState
		}
		var replayed Sandbox
		return replayed, true, s.recordRejection(ctx, cmd, sandboxEntity(sandboxID), &Rejection{Reason: reason, At: cmd.At}, &replayed)
	}
	return sb, false, nil
}

// Deleted removes a sandbox the provider has deleted. The returned
// snapshot has status StatusDeleted.
func (s *Store) Deleted(ctx context.Context, cmd Cmd, sb Sandbox) (Sandbox, error) {
	return s.afterCleanup(ctx, cmd, sb, machine.SandboxDelete, "")
}

// DeletionFailed counts a failed provider deletion; the sandbox stays
// pending_deletion for the next cleanup.
func (s *Store) DeletionFailed(ctx context.Context, cmd Cmd, sb Sandbox, reason string) (Sandbox, error) {
	return s.afterCleanup(ctx, cmd, sb, machine.SandboxDeletionFailed, reason)
}

// afterCleanup records the provider's answer on the sandbox as it was
// read before the provider was asked. If the sandbox changed meanwhile
// the outcome is the rejection that change gives.
func (s *Store) afterCleanup(ctx context.Context, cmd Cmd, sb Sandbox, transition, providerError string) (Sandbox, error) {
	read, err := rawItem(sb)
	if err != nil {
		return Sandbox{}, err
	}
	var next Sandbox
	st := s.sandboxStep(transition, sb.SandboxID, machine.SandboxInput{Now: cmd.At.Unix(), Error: providerError})
	out, err := write(ctx, s, cmd, st, read, &next)
	if err == nil && !out.Applies() {
		err = s.recordRejection(ctx, cmd, st.entity, &Rejection{Reason: out.Reason, At: cmd.At}, &next)
	}
	if err != nil {
		return Sandbox{}, fmt.Errorf("%s %s: %w", transition, sb.SandboxID, err)
	}
	return next, nil
}

// CleanupNotAttempted records that a cleanup could not ask the provider
// (none is configured). The sandbox is left as it is; the outcome, replayed
// on redelivery, is a failed deletion for reason.
func (s *Store) CleanupNotAttempted(ctx context.Context, cmd Cmd, sb Sandbox, reason string) (Sandbox, error) {
	sb.LastDeletionError = reason
	sb.UpdatedAt = cmd.At.Unix()
	if _, err := s.record(ctx, cmd, sandboxEntity(sb.SandboxID), Applied, reason, sb, &sb); err != nil {
		return Sandbox{}, fmt.Errorf("clean up %s: %w", sb.SandboxID, err)
	}
	return sb, nil
}

// SyncResult is what a sync changed.
type SyncResult struct {
	At     int64     `json:"at"`
	Added  []Sandbox `json:"added"`
	Staled []Sandbox `json:"staled"`
}

// maxSyncChanges keeps a sync in one transaction (100 items, one of them
// the audit item).
const maxSyncChanges = 99

// ErrSyncTooLarge means a sync would change more sandboxes than one
// transaction holds; the pool must be synced in smaller steps.
var ErrSyncTooLarge = errors.New("sync changes more sandboxes than one transaction holds")

// Sync reconciles the pool with the provider's inventory in one
// transaction: sandboxes new to transit become available; available or
// allocated sandboxes the provider no longer lists become stale.
func (s *Store) Sync(ctx context.Context, cmd Cmd, inventory []messages.InventoryItem) (SyncResult, error) {
	now := cmd.At.Unix()
	known := map[string]Sandbox{}
	for _, status := range SandboxStatuses {
		found, err := s.queryStatus(ctx, status, nil, 0)
		if err != nil {
			return SyncResult{}, fmt.Errorf("sync: %w", err)
		}
		for _, sb := range found {
			known[sb.ExternalID] = sb
		}
	}
	listed := make(map[string]bool, len(inventory))
	res := SyncResult{At: now}
	var items []types.TransactWriteItem
	for _, it := range inventory {
		listed[it.ExternalID] = true
		if _, ok := known[it.ExternalID]; ok {
			continue
		}
		in := machine.SandboxInput{Now: now, Listed: it, SandboxID: SandboxIDFor(it.ExternalID)}
		sb, item, err := s.syncStep(machine.SandboxAdd, in, nil)
		if err != nil {
			return SyncResult{}, err
		}
		items = append(items, item)
		res.Added = append(res.Added, sb)
	}
	for _, known := range known {
		if listed[known.ExternalID] || (known.Status != StatusAvailable && known.Status != StatusAllocated) {
			continue
		}
		read, err := rawItem(known)
		if err != nil {
			return SyncResult{}, err
		}
		sb, item, err := s.syncStep(machine.SandboxMarkStale, machine.SandboxInput{Now: now, SandboxID: known.SandboxID}, read)
		if err != nil {
			return SyncResult{}, err
		}
		items = append(items, item)
		res.Staled = append(res.Staled, sb)
	}
	if len(items) > maxSyncChanges {
		return SyncResult{}, fmt.Errorf("sync would change %d sandboxes, at most %d: %w", len(items), maxSyncChanges, ErrSyncTooLarge)
	}
	put, err := s.newAuditPut(cmd, "POOL", Applied, "", res)
	if err != nil {
		return SyncResult{}, err
	}
	if err := s.settle(ctx, cmd, append(items, put), &res); err != nil {
		return SyncResult{}, fmt.Errorf("sync: %w", err)
	}
	return res, nil
}

// syncStep is one sandbox's transition in a sync's transaction, and the
// sandbox after it.
func (s *Store) syncStep(transition string, in machine.SandboxInput, read machine.Item) (Sandbox, types.TransactWriteItem, error) {
	st := s.sandboxStep(transition, in.SandboxID, in)
	out := st.m.Decide(st.t, read, read, in)
	var sb Sandbox
	if !out.Applies() {
		return sb, types.TransactWriteItem{}, fmt.Errorf("sync: %s of %s: %s", transition, in.SandboxID, out.Reason)
	}
	if err := attributevalue.UnmarshalMap(out.Next, &sb); err != nil {
		return sb, types.TransactWriteItem{}, fmt.Errorf("sync: decode %s: %w", in.SandboxID, err)
	}
	item, err := transitionWrite(st, read, out.Next)
	if err != nil {
		return sb, types.TransactWriteItem{}, fmt.Errorf("sync: %w", err)
	}
	return sb, item, nil
}

// GetSandbox reads one sandbox with a strongly consistent read.
func (s *Store) GetSandbox(ctx context.Context, id string) (Sandbox, bool, error) {
	sb, found, err := getItem[Sandbox](ctx, s.db, s.sandboxes, sandboxKey(id))
	if err != nil {
		return Sandbox{}, false, fmt.Errorf("read sandbox %s: %w", id, err)
	}
	return sb, found, nil
}

// Sandboxes lists sandboxes in a status, or in every status when status is
// empty, from StatusIndex.
func (s *Store) Sandboxes(ctx context.Context, status string) ([]Sandbox, error) {
	statuses := SandboxStatuses
	if status != "" {
		statuses = []string{status}
	}
	var all []Sandbox
	for _, st := range statuses {
		found, err := s.queryStatus(ctx, st, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("list %s sandboxes: %w", st, err)
		}
		all = append(all, found...)
	}
	return all, nil
}

// TrackSandboxes lists what a track holds, from TrackIndex.
func (s *Store) TrackSandboxes(ctx context.Context, trackID string) ([]Sandbox, error) {
	return s.query(ctx, "TrackIndex", expression.Key("allocated_to_track").Equal(expression.Value(trackID)), nil, 0)
}

// settle runs a transaction ending in the audit put and, when the command
// turns out to be applied already, replays its recorded outcome into out.
func (s *Store) settle(ctx context.Context, cmd Cmd, items []types.TransactWriteItem, out any) error {
	err := s.transact(ctx, items)
	if errors.Is(err, errAlreadyApplied) {
		return s.replay(ctx, cmd, out)
	}
	return err
}

func (s *Store) queryStatus(ctx context.Context, status string, sortKey *expression.KeyConditionBuilder, limit int32) ([]Sandbox, error) {
	kc := expression.Key("status").Equal(expression.Value(status))
	if sortKey != nil {
		kc = kc.And(*sortKey)
	}
	return s.query(ctx, "StatusIndex", kc, nil, limit)
}

// query reads an index of SandboxPool, every page unless limit is set.
func (s *Store) query(ctx context.Context, index string, kc expression.KeyConditionBuilder, filter *expression.ConditionBuilder, limit int32) ([]Sandbox, error) {
	return query[Sandbox](ctx, s.db, s.sandboxes, index, kc, filter, limit)
}
