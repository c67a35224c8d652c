package machine

import (
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Sandbox states: the values of a SandboxPool item's status attribute.
const (
	SandboxAvailable       = "available"
	SandboxAllocated       = "allocated"
	SandboxPendingDeletion = "pending_deletion"
	SandboxStale           = "stale"
	// SandboxCleanupStuck is a sandbox the provider refused to delete on
	// every attempt the cleanup policy allows: the sweep leaves it, and
	// its own StatusIndex partition lists it for an operator.
	SandboxCleanupStuck = "cleanup_stuck"
)

// ReasonNotDue answers a sandbox.expire whose allocation's lab window is
// still open, and a sandbox.cleanup before the sandbox's next attempt is
// due; neither emits an event.
const ReasonNotDue = "not_due"

// The reasons of the guards that split a failed deletion between
// deletion-failed and cleanup-stuck. The store takes the one whose guard
// holds (SandboxFailedDeletion), so neither reaches a user; they keep the
// model honest about which outcome is legal.
const (
	ReasonAttemptsSpent = "attempts_spent"
	ReasonAttemptsLeft  = "attempts_left"
)

// CleanupPolicy is how a sandbox the provider refuses to delete is tried
// again: after the n-th failure the next attempt waits Backoff·2^(n-1),
// at most BackoffMax, and the MaxAttempts-th failure leaves it
// cleanup_stuck.
type CleanupPolicy struct {
	MaxAttempts         int
	Backoff, BackoffMax time.Duration
}

// DefaultCleanupPolicy is the policy of a zero CleanupPolicy, and the
// configuration's default (TRANSIT_CLEANUP_*): ten attempts over about
// four hours, long enough to ride out a provider's outage, short enough
// that a sandbox it will never delete reaches an operator the same day.
var DefaultCleanupPolicy = CleanupPolicy{MaxAttempts: 10, Backoff: time.Minute, BackoffMax: time.Hour}

func (p CleanupPolicy) orDefault() CleanupPolicy {
	if p.MaxAttempts <= 0 || p.Backoff <= 0 {
		return DefaultCleanupPolicy
	}
	if p.BackoffMax < p.Backoff {
		p.BackoffMax = p.Backoff
	}
	return p
}

// Delay is the wait before the next attempt after the failures-th failed
// deletion, in whole seconds (at least one).
func (p CleanupPolicy) Delay(failures int) int64 {
	p = p.orDefault()
	d := p.Backoff
	// Doubling stops at the cap, so no count of failures overflows it.
	for i := 1; i < failures && d < p.BackoffMax; i++ {
		d *= 2
	}
	return max(int64(min(d, p.BackoffMax)/time.Second), 1)
}

// SandboxInput is what a sandbox transition decides on besides the item.
type SandboxInput struct {
	// Now is the command's decision time, Unix seconds.
	Now int64
	// TrackID and IdempotencyKey are the allocating or releasing track's.
	TrackID, IdempotencyKey string
	// Listed is the provider's entry of a sandbox a sync adds, and
	// SandboxID the ID transit gives it.
	Listed    messages.InventoryItem
	SandboxID string
	// Error is the provider's answer to a failed deletion.
	Error string
	// Cleanup says when a failed deletion is tried again and when it
	// stops; its zero value is DefaultCleanupPolicy.
	Cleanup CleanupPolicy
}

// Names of the sandbox transitions.
const (
	SandboxAllocate       = "allocate"
	SandboxMarkDeletion   = "mark-deletion"
	SandboxExpire         = "expire"
	SandboxAttempt        = "attempt"
	SandboxDelete         = "delete"
	SandboxDeletionFailed = "deletion-failed"
	SandboxStuck          = "stuck"
	SandboxAdd            = "add"
	SandboxMarkStale      = "mark-stale"
	SandboxReinstate      = "reinstate"
	SandboxRetire         = "retire"
	SandboxMarkListed     = "mark-listed"
)

// SandboxFailedDeletion names the transition a deletion the provider
// refused takes from read: deletion-failed while attempts are left,
// cleanup-stuck once the last one is spent. It asks the declaration
// itself, so the choice and the guards cannot disagree.
func SandboxFailedDeletion(read Item, in SandboxInput) string {
	if Sandbox.Decide(Sandbox.Transition(SandboxDeletionFailed), read, read, in).Reason == ReasonAttemptsSpent {
		return SandboxStuck
	}
	return SandboxDeletionFailed
}

// Sandbox is the sandbox broker's state machine over SandboxPool items.
// Allocation picks its item from StatusIndex and sync walks the whole
// pool; each item they touch takes one of these transitions.
var Sandbox = &Machine[SandboxInput]{
	Name:   "sandbox",
	State:  "status",
	Key:    "PK",
	States: []string{SandboxAvailable, SandboxAllocated, SandboxPendingDeletion, SandboxStale, SandboxCleanupStuck},
	Transitions: []Transition[SandboxInput]{
		{
			Name: SandboxAllocate, Command: messages.SandboxAllocate, Doc: "the pool's next available sandbox",
			From: []string{SandboxAvailable}, To: SandboxAllocated,
			Set: []Assign[SandboxInput]{
				{"allocated_to_track", func(in SandboxInput, _ Item) any { return in.TrackID }},
				{"idempotency_key", func(in SandboxInput, _ Item) any { return in.IdempotencyKey }},
				{"allocated_at", now},
				{"updated_at", now},
			},
			Event: messages.SandboxAllocated, Rejected: messages.SandboxAllocationRejected,
		},
		{
			Name: SandboxMarkDeletion, Command: messages.SandboxMarkDeletion, Doc: "its track releases it",
			From: []string{SandboxAllocated}, To: SandboxPendingDeletion,
			Guards: []Guard[SandboxInput]{
				{Name: "owner", Reason: messages.ReasonNotOwner, Attr: "allocated_to_track", Op: Eq,
					Value: func(in SandboxInput, _ Item) any { return in.TrackID }},
				{Name: "window open", Reason: messages.ReasonExpired, Attr: "allocated_at", Op: Gt, Value: windowStart},
				labUnchanged,
			},
			Set:   []Assign[SandboxInput]{{"deletion_requested_at", now}, {"updated_at", now}},
			Event: messages.SandboxDeletionMarked, Rejected: messages.SandboxDeletionRejected,
		},
		{
			Name: SandboxExpire, Command: messages.SandboxExpire, Doc: "the lab window closed",
			From: []string{SandboxAllocated}, To: SandboxPendingDeletion,
			Guards: []Guard[SandboxInput]{
				{Name: "window closed", Reason: ReasonNotDue, Attr: "allocated_at", Op: Le, Value: windowStart},
				{Name: "same allocation", Attr: "allocated_at", Op: Eq, Value: readValue("allocated_at")},
				labUnchanged,
			},
			Set:   []Assign[SandboxInput]{{"deletion_requested_at", now}, {"updated_at", now}},
			Event: messages.SandboxExpired,
		},
		{
			// Decided, not written: it says whether the provider is asked.
			// The backoff holds for a cleanup sent by hand too: it is what
			// spares the provider a sandbox it keeps refusing.
			Name: SandboxAttempt, Command: messages.SandboxCleanup, Doc: "an attempt is due, the provider is asked",
			From: []string{SandboxPendingDeletion}, To: SandboxPendingDeletion,
			Guards: []Guard[SandboxInput]{
				{Name: "due", Reason: ReasonNotDue, Attr: "next_cleanup_at", Op: Le, Value: now, OrAbsent: true},
			},
		},
		{
			Name: SandboxDelete, Command: messages.SandboxCleanup, Doc: "the provider deleted it",
			From: []string{SandboxPendingDeletion}, To: Absent,
			Event: messages.SandboxDeleted,
		},
		{
			Name: SandboxDeletionFailed, Command: messages.SandboxCleanup,
			Doc:  "the provider refused, deletion_retry_count + 1, next attempt after the backoff",
			From: []string{SandboxPendingDeletion}, To: SandboxPendingDeletion,
			Guards: []Guard[SandboxInput]{
				countUnchanged,
				{Name: "attempts left", Reason: ReasonAttemptsSpent, Attr: "deletion_retry_count", Op: Lt, Value: lastAttempt},
			},
			Set: []Assign[SandboxInput]{
				{"deletion_retry_count", failures},
				{"last_deletion_error", func(in SandboxInput, _ Item) any { return in.Error }},
				// The sweep skips the sandbox until then (store.CleanupDue).
				{"next_cleanup_at", func(in SandboxInput, read Item) any {
					return in.Now + in.Cleanup.Delay(int(failures(in, read).(int64)))
				}},
				{"updated_at", now},
			},
			Event: messages.SandboxDeletionFailed,
		},
		{
			Name: SandboxStuck, Command: messages.SandboxCleanup,
			Doc:  "the provider refused the last attempt the cleanup policy allows",
			From: []string{SandboxPendingDeletion}, To: SandboxCleanupStuck,
			Guards: []Guard[SandboxInput]{
				countUnchanged,
				{Name: "attempts spent", Reason: ReasonAttemptsLeft, Attr: "deletion_retry_count", Op: Ge, Value: lastAttempt},
			},
			Set: []Assign[SandboxInput]{
				{"deletion_retry_count", failures},
				{"last_deletion_error", func(in SandboxInput, _ Item) any { return in.Error }},
				{"updated_at", now},
			},
			Remove: []string{"next_cleanup_at"},
			Event:  messages.SandboxCleanupStuck,
		},
		{
			Name: SandboxAdd, Command: messages.SandboxSync, Doc: "the provider lists a new sandbox",
			From: []string{Absent}, To: SandboxAvailable,
			Set: []Assign[SandboxInput]{
				{"PK", func(in SandboxInput, _ Item) any { return "SBX#" + in.SandboxID }},
				{"SK", func(SandboxInput, Item) any { return "META" }},
				{"sandbox_id", func(in SandboxInput, _ Item) any { return in.SandboxID }},
				{"name", func(in SandboxInput, _ Item) any { return in.Listed.Name }},
				{"external_id", func(in SandboxInput, _ Item) any { return in.Listed.ExternalID }},
				{"lab_duration_hours", func(in SandboxInput, _ Item) any { return in.Listed.LabDurationHours }},
				{"deletion_retry_count", func(SandboxInput, Item) any { return 0 }},
				// Every index sorts by allocated_at, so it is stored from the start.
				{"allocated_at", func(SandboxInput, Item) any { return 0 }},
				{"created_at", now},
				{"updated_at", now},
				{"last_synced", now},
			},
			Event: messages.SandboxSynced,
		},
		{
			Name: SandboxMarkStale, Command: messages.SandboxSync, Doc: "the provider no longer lists it",
			From: []string{SandboxAvailable, SandboxAllocated}, To: SandboxStale,
			// A stale sandbox is allocated to no one: its track loses it,
			// its key is free for the track's next allocation, and it
			// sorts with the unallocated in every index.
			Set: []Assign[SandboxInput]{
				{"allocated_at", func(SandboxInput, Item) any { return 0 }},
				{"stale_since", now},
				{"updated_at", now},
			},
			Remove: []string{"allocated_to_track", "idempotency_key"},
			Event:  messages.SandboxSynced,
		},
		{
			// updated_at stays the time of the sandbox's last change of
			// state or allocation.
			Name: SandboxMarkListed, Command: messages.SandboxSync, Doc: "the provider still lists it, last_synced = now",
			From: []string{SandboxAvailable, SandboxAllocated, SandboxPendingDeletion, SandboxStale, SandboxCleanupStuck}, To: Same,
			Set:   []Assign[SandboxInput]{{"last_synced", now}},
			Event: messages.SandboxSynced,
		},
		{
			Name: SandboxReinstate, Command: messages.SandboxReinstate, Doc: "an operator returns it to the pool",
			From: []string{SandboxStale}, To: SandboxAvailable,
			// A sandbox staled before stale ones dropped their allocation
			// still carries it; reinstated, it is free either way.
			Set:      []Assign[SandboxInput]{{"allocated_at", func(SandboxInput, Item) any { return 0 }}, {"updated_at", now}},
			Remove:   []string{"allocated_to_track", "idempotency_key", "stale_since"},
			Event:    messages.SandboxReinstated,
			Rejected: messages.SandboxReinstateRejected,
		},
		{
			Name: SandboxRetire, Command: messages.SandboxRetire, Doc: "an operator removes it for good",
			From: []string{SandboxStale}, To: Absent,
			Guards: []Guard[SandboxInput]{
				// A sandbox the provider lists again would come back as a
				// new available one at the next sync: it is reinstated,
				// or deleted at the provider first, never retired.
				{Name: "unlisted since staled", Reason: messages.ReasonListed, Attr: "last_synced", Op: Lt, Value: staleSince},
			},
			Event:    messages.SandboxRetired,
			Rejected: messages.SandboxRetireRejected,
		},
	},
}

func now(in SandboxInput, _ Item) any { return in.Now }

// labUnchanged pins the lab duration the window was computed from.
var labUnchanged = Guard[SandboxInput]{Name: "lab duration unchanged", Attr: "lab_duration_hours", Op: Eq, Value: readValue("lab_duration_hours")}

// countUnchanged pins the failure count a failed deletion's outcome (and
// its backoff) was computed from.
var countUnchanged = Guard[SandboxInput]{Name: "count unchanged", Attr: "deletion_retry_count", Op: Eq, Value: readValue("deletion_retry_count")}

// failures is the failure count after one more failed deletion.
func failures(_ SandboxInput, read Item) any { return int64(number(read, "deletion_retry_count")) + 1 }

// lastAttempt is the failure count as read at which the attempt being
// recorded is the last the policy allows.
func lastAttempt(in SandboxInput, _ Item) any { return int64(in.Cleanup.orDefault().MaxAttempts - 1) }

// staleSince is when the sandbox was staled: stale_since, or for one
// staled before that attribute existed, updated_at, which nothing but
// the staling changed since.
func staleSince(_ SandboxInput, read Item) any {
	if _, ok := read["stale_since"]; ok {
		return readValue("stale_since")(SandboxInput{}, read)
	}
	return readValue("updated_at")(SandboxInput{}, read)
}

// windowStart is the earliest allocated_at whose lab window is still open
// at in.Now: the window closes allocated_at + lab duration seconds later.
func windowStart(in SandboxInput, read Item) any {
	return in.Now - int64(math.Round(number(read, "lab_duration_hours")*3600))
}

// readValue is the number attr had when the item was read, exactly as
// stored.
func readValue(attr string) func(SandboxInput, Item) any {
	return func(_ SandboxInput, read Item) any { return readNumber(read, attr) }
}

// number is a numeric attribute of item, 0 when absent.
func number(item Item, attr string) float64 {
	n, ok := item[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	f, _ := strconv.ParseFloat(n.Value, 64)
	return f
}
