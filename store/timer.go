package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
)

// Row types and sort keys of the timers table (docs/timers.md).
const (
	rowShard        = 1
	rowTimer        = 2
	shardSortKey    = "SHARD"
	timerSortPrefix = "TIMER#"
)

// ErrShardMoved means a shard's record is no longer at the version the
// writer holds: another instance claimed it. The writer's view of the
// shard is stale; an owner must stop serving it.
var ErrShardMoved = errors.New("shard claimed by another owner")

// ShardOf is the shard of a timer: FNV-1a of its ID modulo the shard count.
func ShardOf(timerID string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(timerID))
	return int(h.Sum32() % uint32(shards))
}

// Instant is a time stored as a fixed-width UTC string with milliseconds,
// so that the strings sort as the times do (RFC 3339 with trimmed
// fractions does not).
type Instant struct{ time.Time }

const instantLayout = "2006-01-02T15:04:05.000Z"

// At is t as an Instant, to the millisecond.
func At(t time.Time) Instant { return Instant{t.UTC().Truncate(time.Millisecond)} }

func (i Instant) String() string { return i.UTC().Format(instantLayout) }

func (i Instant) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return &types.AttributeValueMemberS{Value: i.String()}, nil
}

func (i *Instant) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return fmt.Errorf("instant: want a string, got %T", av)
	}
	t, err := time.Parse(instantLayout, s.Value)
	if err != nil {
		return fmt.Errorf("instant: %w", err)
	}
	i.Time = t
	return nil
}

// Shard is a shard's ownership record. Every claim bumps Version, and
// every timer write in the shard is conditioned on it; 0 means no record
// was ever written.
type Shard struct {
	// ShardID is the shard's number, from 0 to TRANSIT_TIMER_SHARDS - 1: the
	// partition of its record and of its timers.
	ShardID int `dynamodbav:"shard_id" json:"shard"`
	// SortKey is SHARD for a shard's record.
	SortKey string `dynamodbav:"sort_key" json:"-"`
	// RowType is 1 for a shard's record (2 for a timer's).
	RowType int `dynamodbav:"row_type" json:"-"`
	// Version is bumped by every claim and release, not by a renewal;
	// every timer write in the shard checks it, so an owner that lost the
	// shard can no longer write there.
	Version int64 `dynamodbav:"shard_version" json:"version"`
	// Owner is the instance holding the shard; empty once released.
	Owner string `dynamodbav:"shard_owner_id" json:"owner,omitempty"`
	// ClaimedAt is when the owner last claimed or renewed the shard; the
	// claim lapses TRANSIT_TIMER_LEASE after it.
	ClaimedAt Instant `dynamodbav:"shard_claimed_at" json:"claimed_at"`
	// Metadata describes the owner for operators (host, pid), as JSON.
	Metadata string `dynamodbav:"shard_metadata,omitempty" json:"metadata,omitempty"`
}

// Lapsed says the claim was not renewed within lease of now: any
// instance may take the shard.
func (sh Shard) Lapsed(lease time.Duration, now time.Time) bool {
	return sh.ClaimedAt.Add(lease).Before(now)
}

// Timer is a timer record.
type Timer struct {
	// ShardID is the timer's shard: FNV-1a of its timer_id modulo the
	// shard count.
	ShardID int `dynamodbav:"shard_id" json:"shard"`
	// SortKey is TIMER#<timer_id>.
	SortKey string `dynamodbav:"sort_key" json:"-"`
	// RowType is 2 for a timer's record.
	RowType int `dynamodbav:"row_type" json:"-"`
	// ExecuteAt is when the timer is next due.
	ExecuteAt Instant `dynamodbav:"timer_execute_at" json:"execute_at"`
	// DueKey is the due time and the uuid, joined by "#": the sort key of
	// ExecuteAtIndex, distinct for two timers due in the same millisecond.
	DueKey string `dynamodbav:"timer_execute_at_with_uuid" json:"-"`
	// UUID identifies this incarnation of the timer, new when it is
	// created, re-created or rescheduled by its callback's answer; HTTP
	// callbacks carry it as their Idempotency-Key.
	UUID string `dynamodbav:"timer_uuid" json:"timer_uuid"`
	// ID is the producer's name for the timer.
	ID string `dynamodbav:"timer_id" json:"timer_id"`
	// GroupID is free for the producer, e.g. to find its timers later.
	GroupID string `dynamodbav:"timer_group_id,omitempty" json:"group_id,omitempty"`
	// CallbackURL is where the timer calls: an http(s) URL, sqs://<queue>
	// or sns://<topic>.
	CallbackURL string `dynamodbav:"timer_callback_url" json:"callback"`
	// Payload is the JSON sent to the callback; absent when there is none.
	Payload string `dynamodbav:"timer_payload,omitempty" json:"payload,omitempty"`
	// RetryPolicy is the timer's retry policy as JSON, defaults filled in.
	RetryPolicy string `dynamodbav:"timer_retry_policy" json:"retry_policy"`
	// CallbackTimeout bounds one call, in seconds.
	CallbackTimeout float64 `dynamodbav:"timer_callback_timeout_seconds" json:"callback_timeout_seconds"`
	// CreatedAt is when the timer was created or last replaced.
	CreatedAt Instant `dynamodbav:"timer_created_at" json:"created_at"`
	// Attempts counts failed calls of the current firing.
	Attempts int `dynamodbav:"timer_attempts" json:"attempts"`
	// FirstExecuteAt is when the current firing was first due; the retry
	// policy's total duration counts from it.
	FirstExecuteAt Instant `dynamodbav:"timer_first_execute_at" json:"first_execute_at"`
	// CorrelationID is the correlation of the timer.create that wrote
	// the timer: its timer.due commands join it, so a trace follows a
	// chain through its timers. Absent on timers written before it was
	// recorded, whose firings start chains of their own.
	CorrelationID string `dynamodbav:"timer_correlation_id,omitempty" json:"correlation_id,omitempty"`
	// CreatedBy is the ID of that timer.create: the cause of its
	// timer.due commands.
	CreatedBy string `dynamodbav:"timer_created_by,omitempty" json:"created_by,omitempty"`
	// FiringBy is the ID of the timer.due command calling back now.
	FiringBy string `dynamodbav:"timer_firing_by,omitempty" json:"firing_by,omitempty"`
	// FiringUntil is when that hold ends (Unix milliseconds); another
	// delivery of the firing waits until then.
	FiringUntil int64 `dynamodbav:"timer_firing_until,omitempty" json:"firing_until,omitempty"`
}

// NewTimer is a timer record ready to be written; shard and uuid are
// decided by the caller.
func NewTimer(shard int, id, uuid string, executeAt, createdAt time.Time) Timer {
	t := Timer{ShardID: shard, SortKey: timerSortPrefix + id, RowType: rowTimer, ID: id, UUID: uuid, CreatedAt: At(createdAt)}
	t.schedule(executeAt)
	t.FirstExecuteAt = t.ExecuteAt
	return t
}

// schedule moves the timer's next call to at.
func (t *Timer) schedule(at time.Time) {
	t.ExecuteAt = At(at)
	t.DueKey = dueKey(t.ExecuteAt, t.UUID)
}

func dueKey(at Instant, uuid string) string { return at.String() + "#" + uuid }

// TimerRef names one timer and when it is due: what the timer's events
// say and its recorded outcomes keep.
// Read from a timer record, it takes these attributes alone.
type TimerRef struct {
	ID        string    `dynamodbav:"timer_id" json:"timer_id"`
	UUID      string    `dynamodbav:"timer_uuid" json:"timer_uuid,omitempty"`
	Shard     int       `dynamodbav:"shard_id" json:"shard"`
	GroupID   string    `dynamodbav:"timer_group_id" json:"group_id,omitempty"`
	ExecuteAt time.Time `dynamodbav:"timer_execute_at" json:"execute_at"`
	Callback  string    `dynamodbav:"timer_callback_url" json:"callback,omitempty"`
}

// Ref is the timer's reference.
func (t Timer) Ref() TimerRef {
	return TimerRef{ID: t.ID, UUID: t.UUID, Shard: t.ShardID, GroupID: t.GroupID, ExecuteAt: t.ExecuteAt.Time, Callback: t.CallbackURL}
}

func shardKey(shard int) map[string]types.AttributeValue {
	return timerTableKey(shard, shardSortKey)
}

func timerKey(shard int, id string) map[string]types.AttributeValue {
	return timerTableKey(shard, timerSortPrefix+id)
}

func timerTableKey(shard int, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"shard_id": &types.AttributeValueMemberN{Value: strconv.Itoa(shard)},
		"sort_key": &types.AttributeValueMemberS{Value: sk},
	}
}

func timerEntity(id string) string { return "TIMER#" + id }

func (s *Store) timerStep(name string, shard int, id string, in machine.TimerInput) step[machine.TimerInput] {
	return step[machine.TimerInput]{m: machine.Timer, t: machine.Timer.Transition(name), table: s.timers,
		key: timerKey(shard, id), in: in, entity: timerEntity(id)}
}

func (s *Store) shardStep(name string, shard int, in machine.ShardInput) step[machine.ShardInput] {
	return step[machine.ShardInput]{m: machine.Shard, t: machine.Shard.Transition(name), table: s.timers, key: shardKey(shard), in: in}
}

// shardHeld is the transaction item that holds a timer write to the
// shard's version: the record is still at version (absent for 0). Its
// refusal is no rejection but ErrShardMoved (inShard).
func (s *Store) shardHeld(shard int, version int64) ([]joined, error) {
	name := machine.ShardHold
	if version == 0 {
		name = machine.ShardHoldUnclaimed
	}
	item, err := transitionWrite(s.shardStep(name, shard, machine.ShardInput{Version: version}), nil)
	return []joined{{item: item}}, err
}

func shardMoved(shard int, version int64) error {
	return fmt.Errorf("shard %d is no longer at version %d: %w", shard, version, ErrShardMoved)
}

// Shards reads the records of shards 0 to n-1, strongly consistent; a
// shard without a record has Version 0.
func (s *Store) Shards(ctx context.Context, n int) ([]Shard, error) {
	shards := make([]Shard, n)
	for i := range shards {
		shards[i] = Shard{ShardID: i, SortKey: shardSortKey, RowType: rowShard}
	}
	for start := 0; start < n; start += 100 {
		var keys []map[string]types.AttributeValue
		for i := start; i < min(n, start+100); i++ {
			keys = append(keys, shardKey(i))
		}
		req := map[string]types.KeysAndAttributes{s.timers: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for len(req) > 0 {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read shard records: %w", err)
			}
			var page []Shard
			if err := attributevalue.UnmarshalListOfMaps(out.Responses[s.timers], &page); err != nil {
				return nil, fmt.Errorf("decode shard records: %w", err)
			}
			for _, sh := range page {
				if sh.ShardID >= 0 && sh.ShardID < n {
					shards[sh.ShardID] = sh
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return shards, nil
}

// ShardVersion reads one shard's version (0: no record yet).
func (s *Store) ShardVersion(ctx context.Context, shard int) (int64, error) {
	sh, _, err := getItem[Shard](ctx, s.db, s.timers, shardKey(shard))
	if err != nil {
		return 0, fmt.Errorf("read shard %d: %w", shard, err)
	}
	return sh.Version, nil
}

// ClaimShard makes owner the shard's owner from at, bumping its version:
// a versioned claim. seen is the record as read; the claim fails
// with ErrShardMoved if it changed since.
func (s *Store) ClaimShard(ctx context.Context, seen Shard, owner, metadata string, at time.Time) (Shard, error) {
	next := seen
	next.SortKey, next.RowType = shardSortKey, rowShard
	next.Version, next.Owner, next.ClaimedAt, next.Metadata = seen.Version+1, owner, At(at), metadata
	row, err := rawItem(next)
	if err != nil {
		return Shard{}, err
	}
	err = s.writeShard(ctx, machine.ShardClaim, seen, machine.ShardInput{Version: seen.Version, Row: row})
	if err != nil {
		return Shard{}, fmt.Errorf("claim shard %d: %w", seen.ShardID, err)
	}
	return next, nil
}

// RenewShard extends a held claim to at without changing its version, so
// timer writes made under it stay valid.
func (s *Store) RenewShard(ctx context.Context, held Shard, at time.Time) (Shard, error) {
	next := held
	next.ClaimedAt = At(at)
	err := s.writeShard(ctx, machine.ShardRenew, held, machine.ShardInput{Version: held.Version, Owner: held.Owner, ClaimedAt: next.ClaimedAt.String()})
	if err != nil {
		return Shard{}, fmt.Errorf("renew shard %d: %w", held.ShardID, err)
	}
	return next, nil
}

// ReleaseShard gives up a held claim, bumping the version, so another
// instance may claim it at once instead of waiting for it to lapse.
func (s *Store) ReleaseShard(ctx context.Context, held Shard) error {
	err := s.writeShard(ctx, machine.ShardRelease, held, machine.ShardInput{Version: held.Version, Owner: held.Owner})
	if err != nil {
		return fmt.Errorf("release shard %d: %w", held.ShardID, err)
	}
	return nil
}

// writeShard makes a shard record transition; a refusal is ErrShardMoved.
func (s *Store) writeShard(ctx context.Context, transition string, seen Shard, in machine.ShardInput) error {
	_, out, err := writeAlone(ctx, s.db, s.shardStep(transition, seen.ShardID, in), nil)
	if err == nil && !out.Applies() {
		return shardMoved(seen.ShardID, seen.Version)
	}
	return err
}

// CreateTimer writes t, replacing any timer with its ID, if t's shard is
// still at version; otherwise it returns ErrShardMoved and writes nothing.
func (s *Store) CreateTimer(ctx context.Context, cmd Cmd, version int64, t Timer) (TimerRef, error) {
	row, err := rawItem(t)
	if err != nil {
		return TimerRef{}, err
	}
	st := s.timerStep(machine.TimerCreate, t.ShardID, t.ID, machine.TimerInput{Row: row})
	if st.with, err = s.shardHeld(t.ShardID, version); err != nil {
		return TimerRef{}, err
	}
	var ref TimerRef
	// Nothing to read first: a creation takes any timer it finds.
	err = retrying(ctx, st, func() error {
		_, err := write(ctx, s, cmd, st, nil, &ref)
		return err
	})
	if err != nil {
		return TimerRef{}, fmt.Errorf("create timer %s: %w", t.ID, inShard(err, t.ShardID, version))
	}
	return ref, nil
}

// DeleteTimer deletes the timer id from its shard if the shard is still
// at version, else returns ErrShardMoved. The result's UUID is empty when
// there was no such timer.
func (s *Store) DeleteTimer(ctx context.Context, cmd Cmd, shard int, version int64, id string) (TimerRef, error) {
	st := s.timerStep(machine.TimerDelete, shard, id, machine.TimerInput{})
	var err error
	if st.with, err = s.shardHeld(shard, version); err != nil {
		return TimerRef{}, err
	}
	var ref TimerRef
	if err := apply(ctx, s, cmd, st, &ref); err != nil {
		return TimerRef{}, fmt.Errorf("delete timer %s: %w", id, inShard(err, shard, version))
	}
	ref.ID, ref.Shard = id, shard
	return ref, nil
}

// inShard is err of a timer write held to the shard's version: a refused
// hold is ErrShardMoved.
func inShard(err error, shard int, version int64) error {
	if failedOn(err, 1) {
		return shardMoved(shard, version)
	}
	return err
}

// GetTimer reads one timer, strongly consistent.
func (s *Store) GetTimer(ctx context.Context, shard int, id string) (Timer, bool, error) {
	t, found, err := getItem[Timer](ctx, s.db, s.timers, timerKey(shard, id))
	if err != nil {
		return Timer{}, false, fmt.Errorf("read timer %s: %w", id, err)
	}
	return t, found, nil
}

// DueTimers lists a shard's timers due before the given time, earliest
// first, with the attributes ExecuteAtIndex carries (Timers).
func (s *Store) DueTimers(ctx context.Context, shard int, before time.Time) ([]Timer, error) {
	kc := expression.Key("shard_id").Equal(expression.Value(shard)).
		And(expression.Key("timer_execute_at_with_uuid").LessThan(expression.Value(At(before).String())))
	return query[Timer](ctx, s.db, s.timers, Timers.LocalIndexes[0].Name, kc, nil, 0)
}

// Firing outcomes.
const (
	FiringFired  = "fired"
	FiringRetry  = "retry"
	FiringFailed = "failed"
)

// Firing is what one timer.due did: the callback succeeded (fired,
// possibly rescheduled by its answer), failed and will be called again
// (retry), or failed for the last time (failed).
type Firing struct {
	Result   string    `json:"result"`
	Timer    TimerRef  `json:"timer"`
	At       time.Time `json:"at"`
	Attempts int       `json:"attempts"`
	// Next is when the timer is due again (retry, or a rescheduling
	// answer), under NextUUID.
	Next      *time.Time `json:"next,omitempty"`
	NextUUID  string     `json:"next_uuid,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// Firing refusals: the due timer is not there as scheduled, or another
// delivery of the same firing is calling back now.
var (
	ErrNotDue = errors.New("timer is not due as scheduled: deleted, replaced or already fired")
	ErrFiring = errors.New("another delivery of this firing is calling back")
)

// StartFiring takes the firing of timer id (uuid, due at executeAt) for
// cmd until until, and returns the timer. It returns ErrNotDue when the
// timer was deleted, replaced or moved on, and ErrFiring while another
// delivery of cmd holds the firing: only one delivery calls back at a time.
func (s *Store) StartFiring(ctx context.Context, cmd Cmd, shard int, id, uuid string, executeAt time.Time, until time.Time) (Timer, error) {
	st := s.timerStep(machine.TimerTake, shard, id, machine.TimerInput{
		Now: cmd.At.UnixMilli(), UUID: uuid, ExecuteAt: At(executeAt).String(), Holder: cmd.ID, Until: until.UnixMilli(),
	})
	item, out, err := writeAlone(ctx, s.db, st, nil)
	switch {
	case err != nil:
		return Timer{}, fmt.Errorf("fire timer %s: %w", id, err)
	case out.Reason == machine.ReasonFiring:
		return Timer{}, fmt.Errorf("fire timer %s: %w", id, ErrFiring)
	case !out.Applies():
		return Timer{}, fmt.Errorf("fire timer %s: %w", id, ErrNotDue)
	}
	var t Timer
	if err := attributevalue.UnmarshalMap(item, &t); err != nil {
		return Timer{}, fmt.Errorf("decode timer %s: %w", id, err)
	}
	return t, nil
}

// RecordedFiring returns the recorded outcome of a timer.due command, if
// it has one: a redelivery re-emits it and does not call back again.
func (s *Store) RecordedFiring(ctx context.Context, cmd Cmd) (Firing, bool, error) {
	var f Firing
	found, err := s.recorded(ctx, cmd, &f)
	return f, found, err
}

// FinishFiring records f, the outcome of cmd's firing of t, then makes
// the timer's change (SettleFiring). The outcome comes first, in a plain
// put: once it stands, any delivery of cmd that takes the firing settles
// it instead of calling back again (DECISIONS.md, "Timer firings without
// a transaction"). If a delivery before this one recorded an outcome,
// that one is settled and returned.
func (s *Store) FinishFiring(ctx context.Context, cmd Cmd, t Timer, f Firing) (Firing, error) {
	var recorded Firing
	replayed, err := s.record(ctx, cmd, timerEntity(t.ID), Applied, f.Result, f, &recorded)
	if err != nil {
		return Firing{}, fmt.Errorf("record firing of timer %s: %w", t.ID, err)
	}
	if replayed {
		f = recorded
	}
	return f, s.SettleFiring(ctx, cmd, t, f)
}

// SettleFiring makes the timer's change that f, cmd's recorded firing of
// t, calls for: deleted when fired or failed, moved to f.Next when
// retried or rescheduled. The change applies only while cmd still holds
// the firing, so making it twice changes nothing: a second attempt, or
// one after the timer was replaced or deleted, is refused and ignored.
func (s *Store) SettleFiring(ctx context.Context, cmd Cmd, t Timer, f Firing) error {
	transition := machine.TimerFire
	next := t
	switch {
	case f.Next == nil && f.Result == FiringFailed:
		transition = machine.TimerFail
	case f.NextUUID != "":
		transition = machine.TimerReschedule
		next.UUID, next.Attempts, next.FirstExecuteAt = f.NextUUID, 0, At(*f.Next)
		next.schedule(*f.Next)
	case f.Next != nil:
		transition = machine.TimerRetry
		next.Attempts = f.Attempts
		next.schedule(*f.Next)
	}
	row, err := rawItem(next)
	if err != nil {
		return err
	}
	st := s.timerStep(transition, t.ShardID, t.ID, machine.TimerInput{UUID: t.UUID, Holder: cmd.ID, Row: row})
	if _, _, err := writeAlone(ctx, s.db, st, nil); err != nil {
		return fmt.Errorf("settle firing of timer %s: %w", t.ID, err)
	}
	return nil
}
