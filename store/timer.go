package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
type TimerRef struct {
	ID        string    `json:"timer_id"`
	UUID      string    `json:"timer_uuid,omitempty"`
	Shard     int       `json:"shard"`
	GroupID   string    `json:"group_id,omitempty"`
	ExecuteAt time.Time `json:"execute_at"`
	Callback  string    `json:"callback,omitempty"`
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

// atShardVersion is the condition that the shard is at version (0: no
// record yet).
func atShardVersion(version int64) expression.ConditionBuilder {
	if version == 0 {
		return expression.AttributeNotExists(expression.Name("shard_version"))
	}
	return expression.Name("shard_version").Equal(expression.Value(version))
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
	var err error
	if seen.Version == 0 {
		err = s.putShard(ctx, next)
	} else {
		err = s.updateShard(ctx, seen, expression.Set(expression.Name("shard_version"), expression.Value(next.Version)).
			Set(expression.Name("shard_owner_id"), expression.Value(owner)).
			Set(expression.Name("shard_claimed_at"), expression.Value(next.ClaimedAt)).
			Set(expression.Name("shard_metadata"), expression.Value(metadata)),
			atShardVersion(seen.Version))
	}
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
	err := s.updateShard(ctx, held, expression.Set(expression.Name("shard_claimed_at"), expression.Value(next.ClaimedAt)),
		atShardVersion(held.Version).And(expression.Name("shard_owner_id").Equal(expression.Value(held.Owner))))
	if err != nil {
		return Shard{}, fmt.Errorf("renew shard %d: %w", held.ShardID, err)
	}
	return next, nil
}

// ReleaseShard gives up a held claim, bumping the version, so another
// instance may claim it at once instead of waiting for it to lapse.
func (s *Store) ReleaseShard(ctx context.Context, held Shard) error {
	err := s.updateShard(ctx, held, expression.Set(expression.Name("shard_version"), expression.Value(held.Version+1)).
		Set(expression.Name("shard_owner_id"), expression.Value("")),
		atShardVersion(held.Version).And(expression.Name("shard_owner_id").Equal(expression.Value(held.Owner))))
	if err != nil {
		return fmt.Errorf("release shard %d: %w", held.ShardID, err)
	}
	return nil
}

func (s *Store) putShard(ctx context.Context, sh Shard) error {
	item, err := putIn(s.timers, sh, expression.AttributeNotExists(expression.Name("shard_id")))
	if err != nil {
		return err
	}
	p := item.Put
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
		ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues})
	return shardWriteError(sh.ShardID, 0, err)
}

func (s *Store) updateShard(ctx context.Context, seen Shard, update expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	item, err := updateIn(s.timers, shardKey(seen.ShardID), update, cond)
	if err != nil {
		return err
	}
	u := item.Update
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues})
	return shardWriteError(seen.ShardID, seen.Version, err)
}

func shardWriteError(shard int, version int64, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return shardMoved(shard, version)
	}
	return err
}

// CreateTimer writes t, replacing any timer with its ID, if t's shard is
// still at version; otherwise it returns ErrShardMoved and writes nothing.
func (s *Store) CreateTimer(ctx context.Context, cmd Cmd, version int64, t Timer) (TimerRef, error) {
	res := t.Ref()
	check, err := conditionCheck(s.timers, shardKey(t.ShardID), atShardVersion(version))
	if err != nil {
		return TimerRef{}, err
	}
	item, err := attributevalue.MarshalMap(t)
	if err != nil {
		return TimerRef{}, fmt.Errorf("encode timer %s: %w", t.ID, err)
	}
	// Unconditional: re-creating a timer replaces it.
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.timers), Item: item}}
	audit, err := s.newAuditPut(cmd, timerEntity(t.ID), Applied, "", res)
	if err != nil {
		return TimerRef{}, err
	}
	err = s.settleInShard(ctx, cmd, []types.TransactWriteItem{check, put, audit}, &res)
	if failedOn(err, 0) {
		return TimerRef{}, fmt.Errorf("create timer %s: %w", t.ID, shardMoved(t.ShardID, version))
	}
	if err != nil {
		return TimerRef{}, fmt.Errorf("create timer %s: %w", t.ID, err)
	}
	return res, nil
}

// DeleteTimer deletes the timer id from its shard if the shard is still
// at version, else returns ErrShardMoved. The result's UUID is empty when
// there was no such timer.
func (s *Store) DeleteTimer(ctx context.Context, cmd Cmd, shard int, version int64, id string) (TimerRef, error) {
	for round := 0; round < allocateRounds; round++ {
		t, found, err := s.GetTimer(ctx, shard, id)
		if err != nil {
			return TimerRef{}, fmt.Errorf("delete timer %s: %w", id, err)
		}
		res := TimerRef{ID: id, Shard: shard}
		check, err := conditionCheck(s.timers, shardKey(shard), atShardVersion(version))
		if err != nil {
			return TimerRef{}, err
		}
		items := []types.TransactWriteItem{check}
		if found {
			res = t.Ref()
			del, err := deleteIn(s.timers, timerKey(shard, id), expression.Name("timer_uuid").Equal(expression.Value(t.UUID)))
			if err != nil {
				return TimerRef{}, err
			}
			items = append(items, del)
		}
		audit, err := s.newAuditPut(cmd, timerEntity(id), Applied, "", res)
		if err != nil {
			return TimerRef{}, err
		}
		err = s.settleInShard(ctx, cmd, append(items, audit), &res)
		switch {
		case failedOn(err, 0):
			return TimerRef{}, fmt.Errorf("delete timer %s: %w", id, shardMoved(shard, version))
		case errors.Is(err, errConflict):
			continue // replaced meanwhile: delete the replacement
		case err != nil:
			return TimerRef{}, fmt.Errorf("delete timer %s: %w", id, err)
		}
		return res, nil
	}
	return TimerRef{}, fmt.Errorf("delete timer %s: %w", id, errConflict)
}

// maxRaces bounds how often a timer write is retried after losing a race
// to a concurrent transaction on the same item.
const maxRaces = 20

// settleInShard settles a timer transaction. Every timer write in a shard
// checks the shard's record, so concurrent writes to one shard race for
// it and DynamoDB cancels the losers unevaluated (TransactionConflict);
// those are retried after a short random pause.
func (s *Store) settleInShard(ctx context.Context, cmd Cmd, items []types.TransactWriteItem, out any) error {
	for race := 1; ; race++ {
		err := s.settle(ctx, cmd, items, out)
		var ce *conflictError
		if !errors.As(err, &ce) || !ce.raced || race == maxRaces {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(min(race, 5)) * int64(5*time.Millisecond)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
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
// first.
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
	as := expression.Name("timer_uuid").Equal(expression.Value(uuid)).
		And(expression.Name("timer_execute_at").Equal(expression.Value(At(executeAt))))
	free := expression.AttributeNotExists(expression.Name("timer_firing_until")).
		Or(expression.Name("timer_firing_until").LessThan(expression.Value(cmd.At.UnixMilli())))
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name("timer_firing_by"), expression.Value(cmd.ID)).
			Set(expression.Name("timer_firing_until"), expression.Value(until.UnixMilli()))).
		WithCondition(as.And(free)).Build()
	if err != nil {
		return Timer{}, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.timers), Key: timerKey(shard, id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Rare: read why, rather than rely on every emulator returning
		// the old item with the failure.
		t, found, rerr := s.GetTimer(ctx, shard, id)
		switch {
		case rerr != nil:
			return Timer{}, fmt.Errorf("fire timer %s: %w", id, rerr)
		case found && t.UUID == uuid && t.ExecuteAt.Equal(At(executeAt).Time):
			return Timer{}, fmt.Errorf("fire timer %s: %w", id, ErrFiring)
		}
		return Timer{}, fmt.Errorf("fire timer %s: %w", id, ErrNotDue)
	}
	if err != nil {
		return Timer{}, fmt.Errorf("fire timer %s: %w", id, err)
	}
	var t Timer
	if err := attributevalue.UnmarshalMap(out.Attributes, &t); err != nil {
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

// FinishFiring records f, the outcome of cmd's firing of t, in one
// transaction with the timer's change: deleted when fired or failed,
// moved to f.Next when retried or rescheduled. The change applies only
// while cmd still holds the firing; if the timer was replaced or deleted
// meanwhile, the outcome is recorded alone.
func (s *Store) FinishFiring(ctx context.Context, cmd Cmd, t Timer, f Firing) (Firing, error) {
	held := expression.Name("timer_uuid").Equal(expression.Value(t.UUID)).
		And(expression.Name("timer_firing_by").Equal(expression.Value(cmd.ID)))
	var change types.TransactWriteItem
	var err error
	if f.Next == nil {
		change, err = deleteIn(s.timers, timerKey(t.ShardID, t.ID), held)
	} else {
		next := t
		if f.NextUUID != "" {
			next.UUID = f.NextUUID
			next.Attempts = 0
			next.FirstExecuteAt = At(*f.Next)
		} else {
			next.Attempts = f.Attempts
		}
		next.schedule(*f.Next)
		change, err = updateIn(s.timers, timerKey(t.ShardID, t.ID),
			expression.Set(expression.Name("timer_execute_at"), expression.Value(next.ExecuteAt)).
				Set(expression.Name("timer_execute_at_with_uuid"), expression.Value(next.DueKey)).
				Set(expression.Name("timer_uuid"), expression.Value(next.UUID)).
				Set(expression.Name("timer_attempts"), expression.Value(next.Attempts)).
				Set(expression.Name("timer_first_execute_at"), expression.Value(next.FirstExecuteAt)).
				Remove(expression.Name("timer_firing_by")).
				Remove(expression.Name("timer_firing_until")),
			held)
	}
	if err != nil {
		return Firing{}, err
	}
	audit, err := s.newAuditPut(cmd, timerEntity(t.ID), Applied, f.Result, f)
	if err != nil {
		return Firing{}, err
	}
	err = s.settleInShard(ctx, cmd, []types.TransactWriteItem{change, audit}, &f)
	if failedOn(err, 0) {
		if _, err := s.record(ctx, cmd, timerEntity(t.ID), Applied, f.Result, f, &f); err != nil {
			return Firing{}, fmt.Errorf("record firing of timer %s: %w", t.ID, err)
		}
		return f, nil
	}
	if err != nil {
		return Firing{}, fmt.Errorf("record firing of timer %s: %w", t.ID, err)
	}
	return f, nil
}
