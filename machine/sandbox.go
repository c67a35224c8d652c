package machine

import (
	"math"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Sandbox states: the values of a SandboxPool item's status attribute.
const (
	SandboxAvailable       = "available"
	SandboxAllocated       = "allocated"
	SandboxPendingDeletion = "pending_deletion"
	SandboxStale           = "stale"
)

// ReasonNotDue answers a sandbox.expire whose allocation's lab window is
// still open; it emits no event.
const ReasonNotDue = "not_due"

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
}

// Names of the sandbox transitions.
const (
	SandboxAllocate       = "allocate"
	SandboxMarkDeletion   = "mark-deletion"
	SandboxExpire         = "expire"
	SandboxDelete         = "delete"
	SandboxDeletionFailed = "deletion-failed"
	SandboxAdd            = "add"
	SandboxMarkStale      = "mark-stale"
)

// Sandbox is the sandbox broker's state machine over SandboxPool items.
// Allocation picks its item from StatusIndex and sync walks the whole
// pool; each item they touch takes one of these transitions.
var Sandbox = &Machine[SandboxInput]{
	Name:   "sandbox",
	State:  "status",
	Key:    "PK",
	States: []string{SandboxAvailable, SandboxAllocated, SandboxPendingDeletion, SandboxStale},
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
			Name: SandboxDelete, Command: messages.SandboxCleanup, Doc: "the provider deleted it",
			From: []string{SandboxPendingDeletion}, To: Absent,
			Event: messages.SandboxDeleted,
		},
		{
			Name: SandboxDeletionFailed, Command: messages.SandboxCleanup, Doc: "the provider refused, deletion_retry_count + 1",
			From: []string{SandboxPendingDeletion}, To: SandboxPendingDeletion,
			Guards: []Guard[SandboxInput]{
				{Name: "count unchanged", Attr: "deletion_retry_count", Op: Eq, Value: readValue("deletion_retry_count")},
			},
			Set: []Assign[SandboxInput]{
				{"deletion_retry_count", func(_ SandboxInput, read Item) any { return int64(number(read, "deletion_retry_count")) + 1 }},
				{"last_deletion_error", func(in SandboxInput, _ Item) any { return in.Error }},
				{"updated_at", now},
			},
			Event: messages.SandboxDeletionFailed,
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
			Set:   []Assign[SandboxInput]{{"updated_at", now}},
			Event: messages.SandboxSynced,
		},
	},
}

func now(in SandboxInput, _ Item) any { return in.Now }

// labUnchanged pins the lab duration the window was computed from.
var labUnchanged = Guard[SandboxInput]{Name: "lab duration unchanged", Attr: "lab_duration_hours", Op: Eq, Value: readValue("lab_duration_hours")}

// windowStart is the earliest allocated_at whose lab window is still open
// at in.Now: the window closes allocated_at + lab duration seconds later.
func windowStart(in SandboxInput, read Item) any {
	return in.Now - int64(math.Round(number(read, "lab_duration_hours")*3600))
}

// readValue is the number attr had when the item was read, exactly as
// stored.
func readValue(attr string) func(SandboxInput, Item) any {
	return func(_ SandboxInput, read Item) any {
		if n, ok := read[attr].(*types.AttributeValueMemberN); ok {
			return attributevalue.Number(n.Value)
		}
		return attributevalue.Number("0")
	}
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
