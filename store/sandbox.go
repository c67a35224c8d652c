package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

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
	StatusCleanupStuck    = machine.SandboxCleanupStuck
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
	// pending_deletion, stale or cleanup_stuck (the partitions of
	// StatusIndex).
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
	// UpdatedAt is when the sandbox's state or allocation last changed
	// (Unix seconds); a sync refreshing last_synced leaves it.
	UpdatedAt int64 `dynamodbav:"updated_at" json:"updated_at"`
	// LastSynced is when a sync last listed the sandbox (Unix seconds):
	// the one that added it, then every one that lists it again.
	LastSynced int64 `dynamodbav:"last_synced,omitempty" json:"last_synced,omitempty"`
	// LastDeletionError is the provider's answer to the last failed
	// deletion, for whoever investigates a sandbox stuck in cleanup.
	LastDeletionError string `dynamodbav:"last_deletion_error,omitempty" json:"last_deletion_error,omitempty"`
	// NextCleanupAt is when a sandbox whose deletion failed is tried
	// again (Unix seconds): the cleanup sweep skips it until then, and
	// the wait doubles with each failure (TRANSIT_CLEANUP_BACKOFF).
	NextCleanupAt int64 `dynamodbav:"next_cleanup_at,omitempty" json:"next_cleanup_at,omitempty"`
	// StaleSince is when a sync staled the sandbox (Unix seconds); a
	// stale sandbox listed again since (last_synced) cannot be retired.
	StaleSince int64 `dynamodbav:"stale_since,omitempty" json:"stale_since,omitempty"`
	// LastCommandID is the command that last changed the sandbox without
	// a transaction (an allocation, a release, an expiry:
	// store/outcome.go). It is read with the rest, so a deletion decided
	// on a sandbox read into this struct first confirms that command's
	// outcome.
	LastCommandID string `dynamodbav:"last_command_id,omitempty" json:"-"`
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

// candidatesPerQuery bounds an allocation's first StatusIndex read
// (Limit 15); each round that lost its candidates to concurrent
// allocators reads twice as many, up to maxCandidates, so a crowd of
// allocators spreads over more of the pool instead of colliding on the
// same few items. A read of more candidates costs a fraction of one
// lost write.
const (
	candidatesPerQuery = 15
	maxCandidates      = 120
)

// triesPerRound bounds the candidates one round writes for: candidates
// read at the same moment as one just lost are likely taken too, and a
// fresh, wider read costs less than writes that fail.
const triesPerRound = 3

// allocateRounds bounds how often an allocation re-reads the pool after
// losing every candidate to concurrent allocators (docs/sandbox.md); a
// sync chunk and a layer's row take as many rounds.
const allocateRounds = 8

// Allocate gives the track an available sandbox, or the live allocation
// its idempotency key already names. An empty pool is a *Rejection with
// reason pool_exhausted.
//
// It takes no transaction, but the steps of outcome.go, with the key's
// claim between the outcome and the sandbox: the outcome is put pending
// on a candidate, the claim is made to name that decision, the sandbox is
// updated on its pin, and the outcome is confirmed. Of two commands with
// one key only one allocates: a command that finds the claim naming a
// decision of another that may still be written leaves it to that
// command for takeoverAfter, then fences its sandbox, before it claims
// the key itself (docs/sandbox.md).
func (s *Store) Allocate(ctx context.Context, cmd Cmd, trackID, idempotencyKey string) (Sandbox, error) {
	a := &allocation{s: s, cmd: cmd, limit: candidatesPerQuery,
		in: machine.SandboxInput{Now: cmd.At.Unix(), TrackID: trackID, IdempotencyKey: idempotencyKey}}
	err := retry(ctx, fmt.Sprintf("allocate for %s: candidates or the key's claim taken in %d rounds", trackID, allocateRounds), allocateRounds, func() error {
		return a.round(ctx)
	})
	return a.sb, err
}

// allocation is one delivery of a sandbox.allocate.
type allocation struct {
	s   *Store
	cmd Cmd
	in  machine.SandboxInput
	// limit is how many candidates the next round reads.
	limit int32
	// claim is the key's claim as last read; claimed is false for none.
	claim   IdempotencyClaim
	claimed bool
	// replacing is the nonce of the command's pending outcome, known
	// never written: the next decision replaces it; "" for none known.
	replacing string
	// own is the nonce of the last decision this delivery put: its write
	// is sent by this delivery only, so it is never waited for.
	own string
	// waited is set once this delivery has waited for a decision that
	// may still be written; a delivery waits once at most, then fences.
	waited bool
	sb     Sandbox
}

// round is one round of an allocation on the claim and the pool as read:
// errStale when another command claimed the key, or took every candidate
// tried, since.
func (a *allocation) round(ctx context.Context) error {
	if done, err := a.readClaim(ctx); done || err != nil {
		return err
	}
	candidates, err := a.s.queryStatus(ctx, StatusAvailable, nil, a.limit)
	if err != nil {
		return fmt.Errorf("allocate for %s: %w", a.in.TrackID, err)
	}
	a.limit = min(2*a.limit, maxCandidates)
	if len(candidates) == 0 {
		// An allocation under the same key may have taken the last
		// sandbox since the claim was read: its claim says so now.
		if done, err := a.readClaim(ctx); done || err != nil {
			return err
		}
		rec, err := a.s.outcomeItem(a.cmd, "TRACK#"+a.in.TrackID, Rejected, messages.ReasonPoolExhausted, nil)
		if err != nil {
			return err
		}
		if put, err := a.decide(ctx, rec); !put || err != nil {
			return err
		}
		return &Rejection{Reason: rec.Reason, At: a.cmd.At}
	}
	// Concurrent allocators start at different candidates, so they
	// rarely collide on the same item.
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	for _, c := range candidates[:min(len(candidates), triesPerRound)] {
		if done, err := a.try(ctx, c); done || err != nil {
			return err
		}
	}
	return errStale
}

// readClaim reads the key's claim. done is true when it answered the
// command: the claim names a live allocation, which is the answer (err
// is nil or the command's recorded answer), or a decision of another
// command that may still be written (err is errStale: read again).
func (a *allocation) readClaim(ctx context.Context) (done bool, err error) {
	s := a.s
	a.claim, a.claimed, err = getItem[IdempotencyClaim](ctx, s.db, s.sandboxes, claimKey(a.in.TrackID, a.in.IdempotencyKey))
	if err != nil || !a.claimed {
		return false, err
	}
	// The deciding command's outcome before the sandbox: once it is no
	// longer pending as the claim names it, the sandbox's write either
	// landed before (the sandbox, read next, shows it) or never will.
	inFlight, err := a.claimPending(ctx)
	if err != nil {
		return false, err
	}
	live, isLive, err := s.claimLive(ctx, a.claim, a.in)
	if err != nil || isLive {
		if err == nil {
			err = a.existing(ctx, live)
		}
		return true, err
	}
	if !inFlight {
		return false, nil
	}
	them := Cmd{ID: a.claim.CommandID, Type: string(messages.SandboxAllocate), At: a.cmd.At}
	_, _, unwritten, err := s.pendingOf(ctx, them, "", &a.waited, s.pendingSandbox)
	switch {
	case errors.Is(err, errStale):
		return false, nil // its outcome expired
	case err == nil && unwritten:
		return false, nil // fenced, or moved on: the claim is spent
	case err == nil:
		err = errStale // decided meanwhile: read the claim again
	}
	return true, err
}

// claimPending reports whether the claim names a decision of another
// command that is still pending: its sandbox's write may still land. A
// claim naming this command never is: this command's own outcome, put
// before its claim, is settled first.
func (a *allocation) claimPending(ctx context.Context) (bool, error) {
	c := a.claim
	if c.CommandID == "" || c.CommandID == a.cmd.ID {
		return false, nil
	}
	other, found, err := getItem[auditItem](ctx, a.s.db, a.s.audit, auditKey(c.CommandID))
	return found && other.Status == pending && other.Nonce == c.Nonce, err
}

// try allocates candidate c: the outcome decided on it, the key claimed
// for that decision, the sandbox written. done is false when c was not
// available after all (the index was behind, or another command took it
// since): try the next.
func (a *allocation) try(ctx context.Context, c Sandbox) (done bool, err error) {
	read, err := rawItem(c)
	if err != nil {
		return true, err
	}
	st := a.s.sandboxStep(machine.SandboxAllocate, c.SandboxID, a.in)
	out := st.m.Decide(st.t, read, read, st.in)
	if !out.Applies() {
		return false, nil // the index was behind
	}
	var sb Sandbox
	rec, err := a.s.decision(a.cmd, st.entity, read, out, &sb)
	if err != nil {
		return true, err
	}
	// Ours even if the put's answer is lost and its retry refused.
	a.own = rec.Nonce
	if put, err := a.decide(ctx, rec); !put || err != nil {
		return true, err
	}
	a.replacing = rec.Nonce
	claim := IdempotencyClaim{SandboxID: c.SandboxID, AllocatedAt: a.in.Now, CommandID: a.cmd.ID, Nonce: rec.Nonce}
	if claimed, err := a.s.putClaim(ctx, a.in, claim, a.claim, a.claimed); !claimed || err != nil {
		if err == nil {
			// Claimed since: by another command, or by this put, its
			// answer lost. The next round reads the claim and knows.
			err = errStale
		}
		return true, err
	}
	a.claim, a.claimed = claim, true
	written, err := writeDecided(ctx, a.s, a.cmd, st, read, rec)
	switch {
	case err != nil:
		return true, err
	case written:
		a.sb = sb
		return true, nil
	}
	// Refused: taken since the index was read, or this very write landed
	// and its answer was lost (the SDK's retry is refused). Settle says.
	if err := a.settle(ctx); !errors.Is(err, errStale) {
		return true, err
	}
	return false, nil
}

// decide puts rec as the command's outcome, over the pending one it
// replaces, if any. put is false when another outcome of the command was
// there instead: err is then settle's.
func (a *allocation) decide(ctx context.Context, rec auditItem) (put bool, err error) {
	if put, err = a.s.putOutcome(ctx, rec, a.replacing); put || err != nil {
		return put, err
	}
	return false, a.settle(ctx)
}

// settle finishes the command once an outcome of it is found recorded: a
// final one is its answer, a pending one its sandbox proves written is
// confirmed and is the answer, and one never written is replaced by the
// next decision (errStale).
func (a *allocation) settle(ctx context.Context) error {
	a.replacing, a.sb = "", Sandbox{}
	rec, _, unwritten, err := a.s.pendingOf(ctx, a.cmd, a.own, &a.waited, a.s.pendingSandbox)
	if err != nil || !unwritten {
		if err == nil {
			err = replayOutcome(a.cmd, rec, &a.sb)
		}
		return err
	}
	a.replacing = rec.Nonce
	return errStale
}

// existing answers the command with the live allocation sb its key names,
// recording it (over the pending outcome it replaces, if any) unless the
// command has an outcome already.
func (a *allocation) existing(ctx context.Context, sb Sandbox) error {
	rec, err := a.s.outcomeItem(a.cmd, sandboxEntity(sb.SandboxID), Applied, "", sb)
	if err != nil {
		return err
	}
	put, err := a.s.auditPutOf(rec, outcomeCondition(a.replacing))
	if err != nil {
		return err
	}
	// The condition check keeps the answer true at the moment it is recorded.
	check, err := conditionCheck(a.s.sandboxes, sandboxKey(sb.SandboxID),
		expression.Name("status").Equal(expression.Value(StatusAllocated)).
			And(expression.Name("allocated_to_track").Equal(expression.Value(sb.AllocatedToTrack))).
			And(expression.Name("idempotency_key").Equal(expression.Value(sb.IdempotencyKey))).
			And(expression.Name("allocated_at").Equal(expression.Value(sb.AllocatedAt))))
	if err != nil {
		return err
	}
	err = a.s.transact(ctx, []types.TransactWriteItem{check, {Put: put}})
	switch {
	case errors.Is(err, errAlreadyApplied):
		return a.settle(ctx)
	case errors.Is(err, errConflict):
		return errStale // released meanwhile
	case err != nil:
		return fmt.Errorf("record existing allocation %s: %w", sb.SandboxID, err)
	}
	a.sb = sb
	return nil
}

// pendingSandbox is the sandbox a pending outcome of an allocation was
// decided on.
func (s *Store) pendingSandbox(rec auditItem) (string, machine.Item) {
	return s.sandboxes, sandboxKey(strings.TrimPrefix(rec.PendingEntity, "ENTITY#"+sandboxEntity("")))
}

// MarkDeletion releases a sandbox on its owner's request, within the lab
// window: the seed's owner-and-window condition. A refusal is a *Rejection
// with reason not_found, wrong_state, not_owner or expired.
func (s *Store) MarkDeletion(ctx context.Context, cmd Cmd, sandboxID, trackID string) (Sandbox, error) {
	return s.applySandbox(ctx, cmd, machine.SandboxMarkDeletion, sandboxID, machine.SandboxInput{Now: cmd.At.Unix(), TrackID: trackID})
}

// Expire moves an allocation whose lab window has closed to
// pending_deletion. A sandbox that is not (or no longer) an overdue
// allocation is a *Rejection: nothing to do.
func (s *Store) Expire(ctx context.Context, cmd Cmd, sandboxID string) (Sandbox, error) {
	return s.applySandbox(ctx, cmd, machine.SandboxExpire, sandboxID, machine.SandboxInput{Now: cmd.At.Unix()})
}

// applySandbox reads sandboxID, decides transition on it and writes it
// with the command's outcome (see apply).
func (s *Store) applySandbox(ctx context.Context, cmd Cmd, transition, sandboxID string, in machine.SandboxInput) (Sandbox, error) {
	var next Sandbox
	if err := apply(ctx, s, cmd, s.sandboxStep(transition, sandboxID, in), &next); err != nil {
		return next, fmt.Errorf("%s %s: %w", transition, sandboxID, err)
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
// pending deletion, or whose next attempt is not due yet, is recorded as
// a *Rejection: the provider is not asked.
func (s *Store) PendingCleanup(ctx context.Context, cmd Cmd, sandboxID string) (sb Sandbox, done bool, err error) {
	if done, err := s.recorded(ctx, cmd, &sb); done {
		return sb, true, err
	}
	read, err := getRaw(ctx, s.db, s.sandboxes, sandboxKey(sandboxID))
	if err != nil {
		return Sandbox{}, false, fmt.Errorf("clean up %s: %w", sandboxID, err)
	}
	out := machine.Sandbox.Decide(machine.Sandbox.Transition(machine.SandboxAttempt), read, read, machine.SandboxInput{Now: cmd.At.Unix()})
	if out.Applies() {
		if err := attributevalue.UnmarshalMap(read, &sb); err != nil {
			return Sandbox{}, false, fmt.Errorf("decode sandbox %s: %w", sandboxID, err)
		}
		return sb, false, nil
	}
	var replayed Sandbox
	return replayed, true, s.recordRejection(ctx, cmd, sandboxEntity(sandboxID), &Rejection{Reason: out.Reason, At: cmd.At}, &replayed)
}

// CleanupDue lists the pending deletions whose next attempt is due at
// now, from StatusIndex: one whose deletion failed waits out its backoff
// (next_cleanup_at); one never tried has none.
func (s *Store) CleanupDue(ctx context.Context, now int64) ([]Sandbox, error) {
	kc := expression.Key("status").Equal(expression.Value(StatusPendingDeletion))
	due := machine.Sandbox.Guards(machine.Sandbox.Transition(machine.SandboxAttempt), machine.SandboxInput{Now: now}, nil)
	found, err := s.query(ctx, "StatusIndex", kc, &due, 0)
	if err != nil {
		return nil, fmt.Errorf("list pending deletions due: %w", err)
	}
	return found, nil
}

// Deleted removes a sandbox the provider has deleted. The returned
// snapshot has status StatusDeleted.
func (s *Store) Deleted(ctx context.Context, cmd Cmd, sb Sandbox) (Sandbox, error) {
	return s.afterCleanup(ctx, cmd, sb, machine.SandboxInput{Now: cmd.At.Unix()}, func(machine.Item, machine.SandboxInput) string {
		return machine.SandboxDelete
	})
}

// DeletionFailed counts a failed provider deletion. The sandbox stays
// pending_deletion until its next attempt under policy, or, when that was
// the last attempt the policy allows, becomes cleanup_stuck (the returned
// snapshot's status says which).
func (s *Store) DeletionFailed(ctx context.Context, cmd Cmd, sb Sandbox, reason string, policy machine.CleanupPolicy) (Sandbox, error) {
	return s.afterCleanup(ctx, cmd, sb, machine.SandboxInput{Now: cmd.At.Unix(), Error: reason, Cleanup: policy}, machine.SandboxFailedDeletion)
}

// afterCleanup records the provider's answer on the sandbox as it was
// read before the provider was asked, by the transition pick names. If
// the sandbox changed meanwhile the outcome is the rejection that change
// gives.
func (s *Store) afterCleanup(ctx context.Context, cmd Cmd, sb Sandbox, in machine.SandboxInput, pick func(machine.Item, machine.SandboxInput) string) (Sandbox, error) {
	read, err := rawItem(sb)
	if err != nil {
		return Sandbox{}, err
	}
	var next Sandbox
	transition := pick(read, in)
	st := s.sandboxStep(transition, sb.SandboxID, in)
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

// Reinstate returns a stale sandbox to the pool, free of any allocation.
// Anything but a stale sandbox is a *Rejection: not_found or wrong_state.
func (s *Store) Reinstate(ctx context.Context, cmd Cmd, sandboxID string) (Sandbox, error) {
	return s.applySandbox(ctx, cmd, machine.SandboxReinstate, sandboxID, machine.SandboxInput{Now: cmd.At.Unix()})
}

// Retire deletes a stale sandbox's item; the returned snapshot has status
// StatusDeleted. Anything but a stale sandbox is a *Rejection (not_found,
// wrong_state), and so is one a sync listed since it was staled (listed).
func (s *Store) Retire(ctx context.Context, cmd Cmd, sandboxID string) (Sandbox, error) {
	return s.applySandbox(ctx, cmd, machine.SandboxRetire, sandboxID, machine.SandboxInput{Now: cmd.At.Unix()})
}

// SyncResult is what a sync changed: the IDs of the sandboxes it added
// and of those it staled. The sandboxes whose last_synced it refreshed are
// not listed: that is every other one the inventory names.
type SyncResult struct {
	At     int64      `json:"at"`
	Added  sandboxIDs `json:"added"`
	Staled sandboxIDs `json:"staled"`
}

// sandboxIDs is a list of sandbox IDs as a sync records it. Outcomes
// recorded before syncs recorded IDs alone hold whole sandboxes; those
// still decode, so a sync redelivered (or redriven) across the upgrade
// replays rather than failing.
type sandboxIDs []string

func (ids *sandboxIDs) UnmarshalJSON(b []byte) error {
	var plain []string
	if err := json.Unmarshal(b, &plain); err == nil {
		*ids = plain
		return nil
	}
	var whole []struct {
		SandboxID string `json:"sandbox_id"`
	}
	if err := json.Unmarshal(b, &whole); err != nil {
		return err
	}
	*ids = make(sandboxIDs, len(whole))
	for i, sb := range whole {
		(*ids)[i] = sb.SandboxID
	}
	return nil
}

// transactionItems is how many writes one DynamoDB transaction holds.
const transactionItems = 100

// maxSyncReported bounds the sandboxes one sync adds and stales: their
// IDs make its sandbox.synced event (36 characters and a few of JSON
// each, within SNS's 256 KiB) and its recorded outcome (within
// DynamoDB's 400 KB item). The refreshes of last_synced have no bound.
const maxSyncReported = 5000

// ErrSyncTooLarge means a sync would add and stale more sandboxes than
// its event can list; the pool must be synced in smaller steps.
var ErrSyncTooLarge = errors.New("sync adds and stales more sandboxes than one sandbox.synced event can list")

// syncChange is one sandbox's transition in a sync.
type syncChange struct {
	transition string
	externalID string
	in         machine.SandboxInput
	// read is the item the change was decided on; nil for an addition.
	read machine.Item
}

// Sync reconciles the pool with the provider's inventory: sandboxes new
// to transit become available, available or allocated ones it no longer
// lists become stale, and every other one it lists has its last_synced
// refreshed. The writes go in transactions of at most 100 items, stalings
// first (a sandbox the provider no longer has should leave the pool
// before anything else happens), then additions, then refreshes; the last
// transaction carries the command's outcome, so a sync has one outcome
// however many transactions it takes. A redelivery after a crash between
// two of them finds no outcome, reads the pool again and decides again:
// each write is conditioned on the state it was decided on, so what the
// first attempt applied is found applied (an added sandbox is listed, a
// staled one is stale) and only the rest is written (DECISIONS.md).
func (s *Store) Sync(ctx context.Context, cmd Cmd, inventory []messages.InventoryItem) (SyncResult, error) {
	var res SyncResult
	if done, err := s.recorded(ctx, cmd, &res); done {
		return res, err
	}
	now := cmd.At.Unix()
	listed := make(map[string]messages.InventoryItem, len(inventory))
	for _, it := range inventory {
		listed[it.ExternalID] = it
	}
	known := map[string]machine.Item{}
	for _, status := range SandboxStatuses {
		found, err := s.queryStatus(ctx, status, nil, 0)
		if err != nil {
			return SyncResult{}, fmt.Errorf("sync: %w", err)
		}
		for _, sb := range found {
			item, err := rawItem(sb)
			if err != nil {
				return SyncResult{}, err
			}
			known[sb.ExternalID] = item
		}
	}
	var staled, added, refreshed []syncChange
	for _, it := range inventory {
		if ch, ok := decideSync(it.ExternalID, listed, known[it.ExternalID], now, true); ok && ch.read == nil {
			added = append(added, ch)
		} else if ok {
			refreshed = append(refreshed, ch)
		}
	}
	for ext, item := range known {
		if _, ok := listed[ext]; ok {
			continue
		}
		if ch, ok := decideSync(ext, listed, item, now, false); ok {
			staled = append(staled, ch)
		}
	}
	// The same inventory on the same pool writes the same transactions.
	slices.SortFunc(staled, func(a, b syncChange) int { return cmp.Compare(a.in.SandboxID, b.in.SandboxID) })
	if n := len(added) + len(staled); n > maxSyncReported {
		return SyncResult{}, fmt.Errorf("sync would add %d and stale %d sandboxes, at most %d together: %w", len(added), len(staled), maxSyncReported, ErrSyncTooLarge)
	}
	changes := slices.Concat(staled, added, refreshed)
	res = SyncResult{At: now, Added: sandboxIDs{}, Staled: sandboxIDs{}}
	for len(changes) >= transactionItems {
		if err := s.syncChunk(ctx, cmd, slices.Clone(changes[:transactionItems]), false, listed, &res); err != nil {
			return SyncResult{}, err
		}
		changes = changes[transactionItems:]
	}
	if err := s.syncChunk(ctx, cmd, slices.Clone(changes), true, listed, &res); err != nil {
		return SyncResult{}, err
	}
	return res, nil
}

// SyncOutcome returns the recorded outcome of a sync command, if it has
// one: a sync that pulls its inventory asks first, so a redelivery does
// not ask the provider again.
func (s *Store) SyncOutcome(ctx context.Context, cmd Cmd) (SyncResult, bool, error) {
	var res SyncResult
	done, err := s.recorded(ctx, cmd, &res)
	return res, done, err
}

// decideSync is what a sync does to the sandbox with externalID, as item
// (nil when there is none): add it when listed and unknown, refresh its
// last_synced when listed, stale it when not listed and mark-stale
// applies, else nothing. add says whether an unknown listed sandbox is
// added; a sandbox that vanished while the sync ran (cleaned up, retired)
// is not brought back on the strength of an inventory read before.
func decideSync(externalID string, listed map[string]messages.InventoryItem, item machine.Item, now int64, add bool) (syncChange, bool) {
	it, isListed := listed[externalID]
	ch := syncChange{externalID: externalID, in: machine.SandboxInput{Now: now, Listed: it}, read: item}
	if item == nil {
		ch.transition, ch.in.SandboxID = machine.SandboxAdd, SandboxIDFor(externalID)
		return ch, isListed && add
	}
	if id, ok := item["sandbox_id"].(*types.AttributeValueMemberS); ok {
		ch.in.SandboxID = id.Value
	}
	state, _ := item["status"].(*types.AttributeValueMemberS)
	switch {
	case isListed && state != nil && slices.Contains(SandboxStatuses, state.Value):
		ch.transition = machine.SandboxMarkListed
		return ch, true
	case isListed:
		return ch, false
	}
	ch.transition = machine.SandboxMarkStale
	return ch, machine.Sandbox.Decide(machine.Sandbox.Transition(ch.transition), item, item, ch.in).Applies()
}

// syncChunk writes changes in one transaction, with the command's outcome
// when final, and adds what they added and staled to res once it commits.
// A change whose item changed since it was read is decided again on the
// item as it now is (dropped when nothing is left to do), and the
// transaction tried again.
func (s *Store) syncChunk(ctx context.Context, cmd Cmd, changes []syncChange, final bool, listed map[string]messages.InventoryItem, res *SyncResult) error {
	return retry(ctx, "sync", allocateRounds, func() error {
		next := SyncResult{At: res.At, Added: slices.Clone(res.Added), Staled: slices.Clone(res.Staled)}
		items := make([]types.TransactWriteItem, 0, len(changes)+1)
		for _, ch := range changes {
			item, err := s.syncWrite(ch)
			if err != nil {
				return err
			}
			items = append(items, item)
			switch ch.transition {
			case machine.SandboxAdd:
				next.Added = append(next.Added, ch.in.SandboxID)
			case machine.SandboxMarkStale:
				next.Staled = append(next.Staled, ch.in.SandboxID)
			}
		}
		if final {
			put, err := s.newAuditPut(cmd, "POOL", Applied, "", next)
			if err != nil {
				return err
			}
			items = append(items, put)
		}
		if len(items) == 0 {
			return nil
		}
		err := s.transact(ctx, items)
		var i int
		var current machine.Item
		switch {
		case err == nil:
			*res = next
			return nil
		case errors.Is(err, errAlreadyApplied):
			return s.replay(ctx, cmd, res)
		default:
			var ce *conflictError
			if !errors.As(err, &ce) || ce.item >= len(changes) {
				return fmt.Errorf("sync: %w", err)
			}
			i, current = ce.item, ce.current
		}
		if current == nil {
			// Not returned with the refusal: raced, or gone.
			if current, err = getRaw(ctx, s.db, s.sandboxes, sandboxKey(changes[i].in.SandboxID)); err != nil {
				return fmt.Errorf("sync: %w", err)
			}
		}
		if ch, ok := decideSync(changes[i].externalID, listed, current, res.At, false); ok {
			changes[i] = ch
		} else {
			changes = slices.Delete(changes, i, i+1)
		}
		return errStale // the transaction again, with that change decided afresh
	})
}

// syncWrite is the transaction item of one sync change.
func (s *Store) syncWrite(ch syncChange) (types.TransactWriteItem, error) {
	out, item, err := decidedWrite(s.sandboxStep(ch.transition, ch.in.SandboxID, ch.in), ch.read)
	switch {
	case err != nil:
		return item, fmt.Errorf("sync: %w", err)
	case !out.Applies():
		return item, fmt.Errorf("sync: %s of %s: %s", ch.transition, ch.in.SandboxID, out.Reason)
	}
	return item, nil
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
