package machine

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Timer and shard record states. Neither item has a state attribute: a
// timer that exists is scheduled (whether a delivery is calling back is
// its firing hold, a guard, not a state), and a shard record that exists
// is recorded (who owns it is its owner and version, guards again).
const (
	TimerScheduled = "scheduled"
	ShardRecorded  = "recorded"
)

// Reasons a timer or shard transition is not taken. None reaches a
// producer: a firing refused as not_due or firing does nothing, a
// settle refused as released changes nothing (its outcome is recorded
// before it), and a refused shard write means the writer's view of the
// shard is stale.
const (
	// ReasonFiring: another delivery of the firing holds it.
	ReasonFiring = "firing"
	// ReasonReleased: the firing no longer holds the timer (it was
	// replaced, deleted, or its hold lapsed and another delivery took it).
	ReasonReleased = "released"
	// ReasonShardMoved: the shard record is no longer at the version (or
	// with the owner) the writer holds.
	ReasonShardMoved = "moved"
)

// TimerInput is what a timer transition decides on besides the item.
type TimerInput struct {
	// Now is the command's decision time, Unix milliseconds.
	Now int64
	// Row is the timer record a creation writes, or the record after a
	// retry or rescheduling, as DynamoDB stores it.
	Row Item
	// UUID and ExecuteAt name the incarnation and due time a firing is
	// for (ExecuteAt as stored); Holder is the timer.due command firing
	// it, holding it until Until (Unix milliseconds).
	UUID, ExecuteAt, Holder string
	Until                   int64
}

// Names of the timer transitions.
const (
	TimerCreate     = "create"
	TimerDelete     = "delete"
	TimerTake       = "take"
	TimerFire       = "fire"
	TimerReschedule = "reschedule"
	TimerRetry      = "retry"
	TimerFail       = "fail"
)

// timerAttrs are the attributes of a timer record as created; the firing
// hold (timer_firing_by, timer_firing_until) is added by its take.
var timerAttrs = []string{
	"shard_id", "sort_key", "row_type", "timer_execute_at", "timer_execute_at_with_uuid", "timer_uuid", "timer_id",
	"timer_group_id", "timer_callback_url", "timer_payload", "timer_retry_policy", "timer_callback_timeout_seconds",
	"timer_created_at", "timer_attempts", "timer_first_execute_at", "timer_correlation_id", "timer_created_by",
}

// timerDue are the attributes a retry or a rescheduling moves.
var timerDue = []string{"timer_execute_at", "timer_execute_at_with_uuid", "timer_uuid", "timer_attempts", "timer_first_execute_at"}

var firingHold = []string{"timer_firing_by", "timer_firing_until"}

// held: the firing finishing is the one holding the timer it took.
var held = []Guard[TimerInput]{
	{Name: "same incarnation", Reason: ReasonReleased, Attr: "timer_uuid", Op: Eq, Value: func(in TimerInput, _ Item) any { return in.UUID }},
	{Name: "held by this firing", Reason: ReasonReleased, Attr: "timer_firing_by", Op: Eq, Value: func(in TimerInput, _ Item) any { return in.Holder }},
}

// Timer is the state machine of a timer record. Creating a timer replaces
// any timer of its ID; a delivery of its timer.due takes the firing (one
// calls back at a time), and the callback's result ends it: deleted once
// fired or failed for good, moved to its next due time otherwise.
var Timer = &Machine[TimerInput]{
	Name:   "timer",
	State:  "timer_state",
	Key:    "sort_key",
	Unset:  TimerScheduled,
	States: []string{TimerScheduled},
	Transitions: []Transition[TimerInput]{
		{
			Name: TimerCreate, Command: messages.TimerCreate, Doc: "new, or replacing the timer of its ID",
			From: []string{Absent, TimerScheduled}, To: TimerScheduled,
			Set:   copyFrom(timerAttrs, func(in TimerInput) Item { return in.Row }),
			Event: messages.TimerCreated,
		},
		{
			// Absent too: deleting a timer that is not there is done.
			Name: TimerDelete, Command: messages.TimerDelete,
			From: []string{Absent, TimerScheduled}, To: Absent,
			Guards: []Guard[TimerInput]{{Name: "incarnation unchanged", Attr: "timer_uuid", Op: Eq, Value: readString("timer_uuid")}},
			Event:  messages.TimerDeleted,
		},
		{
			Name: TimerTake, Command: messages.TimerDue, Doc: "a delivery takes the firing",
			From: []string{TimerScheduled}, To: TimerScheduled,
			Guards: []Guard[TimerInput]{
				{Name: "as scheduled", Reason: ReasonNotDue, Attr: "timer_uuid", Op: Eq, Value: func(in TimerInput, _ Item) any { return in.UUID }},
				{Name: "due then", Reason: ReasonNotDue, Attr: "timer_execute_at", Op: Eq, Value: func(in TimerInput, _ Item) any { return in.ExecuteAt }},
				{Name: "free", Reason: ReasonFiring, Attr: "timer_firing_until", Op: Lt, OrAbsent: true, Value: func(in TimerInput, _ Item) any { return in.Now }},
			},
			Set: []Assign[TimerInput]{
				{"timer_firing_by", func(in TimerInput, _ Item) any { return in.Holder }},
				{"timer_firing_until", func(in TimerInput, _ Item) any { return in.Until }},
			},
		},
		{
			Name: TimerFire, Command: messages.TimerDue, Doc: "called back",
			From: []string{TimerScheduled}, To: Absent, Guards: held,
			Event: messages.TimerFired,
		},
		{
			Name: TimerReschedule, Command: messages.TimerDue, Doc: "called back, answered with a next time",
			From: []string{TimerScheduled}, To: TimerScheduled, Guards: held,
			Set: copyFrom(timerDue, func(in TimerInput) Item { return in.Row }), Remove: firingHold,
			Event: messages.TimerFired,
		},
		{
			Name: TimerRetry, Command: messages.TimerDue, Doc: "the call failed, the retry policy allows another",
			From: []string{TimerScheduled}, To: TimerScheduled, Guards: held,
			Set: copyFrom(timerDue, func(in TimerInput) Item { return in.Row }), Remove: firingHold,
		},
		{
			Name: TimerFail, Command: messages.TimerDue, Doc: "the call failed for the last time",
			From: []string{TimerScheduled}, To: Absent, Guards: held,
			Event: messages.TimerFailed,
		},
	},
}

// ShardInput is what a shard record transition decides on besides the
// item.
type ShardInput struct {
	// Version is the version the writer read or holds (0: no record);
	// Owner the owner it holds the shard as.
	Version int64
	Owner   string
	// Row is the record a claim writes; ClaimedAt the renewal's time, as
	// stored.
	Row       Item
	ClaimedAt string
}

// Names of the shard record transitions.
const (
	ShardClaim         = "claim"
	ShardRenew         = "renew"
	ShardRelease       = "release"
	ShardHold          = "hold"
	ShardHoldUnclaimed = "hold-unclaimed"
)

var shardAttrs = []string{"shard_id", "sort_key", "row_type", "shard_version", "shard_owner_id", "shard_claimed_at", "shard_metadata"}

// atVersion: the record is at the version the writer holds, or absent
// when it holds none.
var atVersion = Guard[ShardInput]{Name: "at version", Reason: ReasonShardMoved, Attr: "shard_version", Op: Eq, Value: func(in ShardInput, _ Item) any {
	if in.Version == 0 {
		return nil
	}
	return in.Version
}}

var ownedBy = Guard[ShardInput]{Name: "owner", Reason: ReasonShardMoved, Attr: "shard_owner_id", Op: Eq, Value: func(in ShardInput, _ Item) any { return in.Owner }}

// Shard is the state machine of a timer shard's ownership record. Every
// claim and release bumps the version, a renewal does not, and every
// timer write in the shard holds it at the writer's version: an owner
// that lost the shard can no longer write there.
var Shard = &Machine[ShardInput]{
	Name:   "timer-shard",
	State:  "shard_state",
	Key:    "shard_id",
	Unset:  ShardRecorded,
	States: []string{ShardRecorded},
	Transitions: []Transition[ShardInput]{
		{
			Name: ShardClaim, Doc: "claimed: free, lapsed or taken over, version + 1",
			From: []string{Absent, ShardRecorded}, To: ShardRecorded, Guards: []Guard[ShardInput]{atVersion},
			Set: copyFrom(shardAttrs, func(in ShardInput) Item { return in.Row }),
		},
		{
			Name: ShardRenew, Doc: "renewed by its owner, same version",
			From: []string{ShardRecorded}, To: ShardRecorded, Guards: []Guard[ShardInput]{atVersion, ownedBy},
			Set: []Assign[ShardInput]{{"shard_claimed_at", func(in ShardInput, _ Item) any { return in.ClaimedAt }}},
		},
		{
			Name: ShardRelease, Doc: "released by its owner, version + 1",
			From: []string{ShardRecorded}, To: ShardRecorded, Guards: []Guard[ShardInput]{atVersion, ownedBy},
			Set: []Assign[ShardInput]{
				{"shard_version", func(in ShardInput, _ Item) any { return in.Version + 1 }},
				{"shard_owner_id", func(ShardInput, Item) any { return "" }},
			},
		},
		{
			Name: ShardHold, Command: messages.TimerCreate, Doc: "or timer.delete, a timer write in the shard",
			From: []string{ShardRecorded}, To: ShardRecorded, Guards: []Guard[ShardInput]{atVersion},
		},
		{
			Name: ShardHoldUnclaimed, Command: messages.TimerCreate, Doc: "or timer.delete before any claim",
			From: []string{Absent}, To: Absent,
		},
	},
}

// readString is the string attr had when the item was read; nil when it
// had none, which an Eq guard takes as "still absent".
func readString(attr string) func(TimerInput, Item) any {
	return func(_ TimerInput, read Item) any {
		if s, ok := read[attr].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
		return nil
	}
}
