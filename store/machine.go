package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
)

// This file is the path by which a declared transition reaches DynamoDB
// together with the command's recorded outcome, in one transaction; a
// transition that updates one item alone takes outcome.go's instead.

// step is one transition of one item, decided on the item as read.
type step[In any] struct {
	m     *machine.Machine[In]
	t     *machine.Transition[In]
	table string
	key   machine.Item
	in    In
	// entity names the item in the command's recorded outcome.
	entity string
	// with are other writes the transition needs in its transaction,
	// between the item's and the outcome's.
	with []joined
	// details, when set, is what the outcome records (with reason)
	// instead of the item's snapshot: what a timer's firing did, say.
	// write then fills its result only when it replays an outcome
	// recorded before, so a zero result means this write decided.
	details any
	reason  string
}

// errStale means the item changed between its read and the write in a
// way the decision depended on: read it again and decide again.
var errStale = errors.New("item changed since it was read")

// apply reads the item, decides the transition on it and writes it with
// the command's outcome, reading again while the item changes under it.
// A rejection is recorded as the outcome and returned as *Rejection.
// result receives the snapshot of the item after the transition, or the
// recorded one when the command already has an outcome.
func apply[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], result any) error {
	return applyJoined(ctx, s, cmd, st, nil, result)
}

// applyJoined is apply with writes of other items joined to the
// transition's transaction (st.with), built by joins from the item as
// read: a user allowed to act, the events a task appends. joins may also
// complete the transition's input from what it read (in). A join that
// does not apply rejects the command with its reason.
func applyJoined[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], joins func(read machine.Item, in *In) ([]joined, machine.Outcome, error), result any) error {
	if joins == nil && alone(s, st) {
		return applyAlone(ctx, s, cmd, st, result)
	}
	with, input := st.with, st.in
	return retrying(ctx, st, func() error {
		read, err := getRaw(ctx, s.db, st.table, st.key)
		if err != nil {
			return err
		}
		st.with, st.in = with, input
		out := machine.Outcome{}
		if joins != nil {
			var more []joined
			if more, out, err = joins(read, &st.in); err != nil {
				return err
			}
			st.with = append(slices.Clip(with), more...)
		}
		if out.Applies() {
			out, err = write(ctx, s, cmd, st, read, result)
		}
		if err != nil || out.Applies() {
			return err
		}
		if out.Stale {
			return errStale
		}
		return s.recordRejection(ctx, cmd, st.entity, &Rejection{Reason: out.Reason, At: cmd.At}, result)
	})
}

// joined is a write of another item in a transition's transaction. When
// refused is set, the write is another machine's transition, and refused
// decides why DynamoDB refused it, from the item it returned.
type joined struct {
	item    types.TransactWriteItem
	refused func(current machine.Item) machine.Outcome
	// read is the item as the join decided on it, when it did.
	read machine.Item
}

// join is transition st of another item decided on read: the write to
// join to a transaction when it applies, else the outcome that says why
// not.
func join[In any](st step[In], read machine.Item) (joined, machine.Outcome, error) {
	out := st.m.Decide(st.t, read, read, st.in)
	if !out.Applies() {
		return joined{}, out, nil
	}
	item, err := transitionWrite(st, read)
	return joined{item: item, read: read, refused: func(current machine.Item) machine.Outcome {
		return st.m.Decide(st.t, current, read, st.in)
	}}, out, err
}

// maxRounds bounds how often a transition is tried again after finding
// its item changed or held by another transaction.
const maxRounds = 20

// retrying is retry for a transition, named by its machine and
// transition, within maxRounds.
func retrying[In any](ctx context.Context, st step[In], try func() error) error {
	return retry(ctx, st.m.Name+" "+st.t.Name, maxRounds, try)
}

// retry is the store's one retry loop: it runs try again while it returns
// errStale (decide again on a fresh read), at most rounds times in all,
// after a short random pause: writers that lost a race for one item (a
// timer shard's record is contended by every write into the shard)
// spread out. Still stale after the last round, it is errConflict, named
// by what, for the caller's caller to retry the whole command later.
func retry(ctx context.Context, what string, rounds int, try func() error) error {
	for round := 1; ; round++ {
		err := try()
		if !errors.Is(err, errStale) {
			return err
		}
		if round >= rounds {
			return fmt.Errorf("%s: %w", what, errConflict)
		}
		if err := pause(ctx, round); err != nil {
			return err
		}
	}
}

// pause waits a short random time, longer in later rounds, so that
// writers that lost a race for one item spread out.
func pause(ctx context.Context, round int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(rand.Int64N(int64(min(round, 5)) * int64(5*time.Millisecond)))):
		return nil
	}
}

// write decides the transition on read and, when it applies, writes it
// with the command's outcome in one transaction. It records no rejection:
// it returns the outcome that says why not, decided on read or, when
// DynamoDB refuses the write, on the item DynamoDB returns with its
// refusal. errStale means only a pin failed or another transaction held
// one of the items; a refused item of st.with is decided by its refused
// (a rejection, or errStale), or without one is a *conflictError.
func write[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], read machine.Item, result any) (machine.Outcome, error) {
	out, item, err := decidedWrite(st, read)
	if err != nil || !out.Applies() {
		return out, err
	}
	if err := confirmReplaced(ctx, s, st, read, cmd.ID); err != nil {
		return out, err
	}
	details := st.details
	if details == nil {
		snapshot := out.Next
		if snapshot == nil {
			snapshot = deletedSnapshot(st.m, read)
		}
		if err := attributevalue.UnmarshalMap(snapshot, result); err != nil {
			return out, fmt.Errorf("decode %s after %s: %w", st.m.Name, st.t.Name, err)
		}
		details = result
	}
	put, err := s.newAuditPut(cmd, st.entity, Applied, st.reason, details)
	if err != nil {
		return out, err
	}
	items := make([]types.TransactWriteItem, 0, len(st.with)+2)
	items = append(items, item)
	for _, w := range st.with {
		items = append(items, w.item)
	}
	err = s.transact(ctx, append(items, put))
	var ce *conflictError
	switch {
	case errors.Is(err, errAlreadyApplied):
		return out, s.replay(ctx, cmd, result)
	case errors.As(err, &ce) && ce.item == 0 && !ce.raced && ce.current != nil:
		refused := st.m.Decide(st.t, ce.current, read, st.in)
		if refused.Applies() || refused.Stale {
			return refused, errStale
		}
		return refused, nil
	case errors.As(err, &ce) && !ce.raced && ce.current != nil && ce.item > 0 && ce.item <= len(st.with) && st.with[ce.item-1].refused != nil:
		refused := st.with[ce.item-1].refused(ce.current)
		if refused.Applies() || refused.Stale {
			return refused, errStale
		}
		return refused, nil
	case errors.As(err, &ce) && (ce.item == 0 || ce.raced):
		return out, errStale
	case err != nil:
		return out, fmt.Errorf("%s %s: %w", st.m.Name, st.t.Name, err)
	}
	return out, nil
}

// writeJoined writes a transition decided on read with the writes of
// st.with in one transaction, recording no command outcome: one part of a
// command that changes several items one by one (a window's result on
// each of its resources). A refusal is decided on the item DynamoDB
// returns with it; errStale means decide again on a fresh read.
func writeJoined[In any](ctx context.Context, s *Store, st step[In], read machine.Item) (machine.Outcome, error) {
	out, item, err := decidedWrite(st, read)
	if err != nil || !out.Applies() {
		return out, err
	}
	if err := confirmReplaced(ctx, s, st, read, ""); err != nil {
		return out, err
	}
	items := []types.TransactWriteItem{item}
	for _, w := range st.with {
		items = append(items, w.item)
	}
	err = s.transact(ctx, items)
	var ce *conflictError
	switch {
	case errors.As(err, &ce) && ce.item == 0 && !ce.raced && ce.current != nil:
		refused := st.m.Decide(st.t, ce.current, read, st.in)
		if refused.Applies() || refused.Stale {
			return refused, errStale
		}
		return refused, nil
	case errors.As(err, &ce):
		return out, errStale
	case err != nil:
		return out, fmt.Errorf("%s %s: %w", st.m.Name, st.t.Name, err)
	}
	return out, nil
}

// decidedWrite decides the transition on read and, when it applies,
// returns its transaction item too.
func decidedWrite[In any](st step[In], read machine.Item) (machine.Outcome, types.TransactWriteItem, error) {
	out := st.m.Decide(st.t, read, read, st.in)
	if !out.Applies() {
		return out, types.TransactWriteItem{}, nil
	}
	item, err := transitionWrite(st, read)
	return out, item, err
}

// transitionWrite is the transaction item of a transition: a condition
// check when it changes nothing, a delete when it ends its item, a put of
// the whole item when it may create one, else an update; each under the
// machine's condition, asking DynamoDB to return the item if the
// condition fails.
func transitionWrite[In any](st step[In], read machine.Item) (types.TransactWriteItem, error) {
	cond := st.m.Condition(st.t, st.in, read)
	allOld := types.ReturnValuesOnConditionCheckFailureAllOld
	switch {
	case st.t.Checks():
		item, err := conditionCheck(st.table, st.key, cond)
		if err == nil {
			item.ConditionCheck.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	case st.t.To == machine.Absent:
		item, err := deleteIn(st.table, st.key, cond)
		if err == nil {
			item.Delete.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	case slices.Contains(st.t.From, machine.Absent):
		item, err := putIn(st.table, st.m.Created(st.t, st.in, read), cond)
		if err == nil {
			item.Put.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	default:
		item, err := updateIn(st.table, st.key, st.m.Update(st.t, st.in, read), cond)
		if err == nil {
			item.Update.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	}
}

// writeAlone makes a transition that records no command outcome (a shard
// claim, a firing taken or settled, a layer's row, pointer or previous
// version) as one conditional write, decided by DynamoDB on the item as
// it is: nothing is read first, and a refusal is decided on the item
// DynamoDB returns with it. It returns the item as written (nil when
// deleted).
func writeAlone[In any](ctx context.Context, db *dynamodb.Client, st step[In], read machine.Item) (machine.Item, machine.Outcome, error) {
	item, err := transitionWrite(st, read)
	if err != nil {
		return nil, machine.Outcome{}, err
	}
	var written machine.Item
	switch {
	case item.Put != nil:
		p := item.Put
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item,
			ConditionExpression: p.ConditionExpression, ExpressionAttributeNames: p.ExpressionAttributeNames,
			ExpressionAttributeValues: p.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		written = p.Item
	case item.Update != nil:
		u := item.Update
		var out *dynamodb.UpdateItemOutput
		out, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
			ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
			ExpressionAttributeValues: u.ExpressionAttributeValues, ReturnValues: types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		if err == nil {
			written = out.Attributes
		}
	case item.Delete != nil:
		d := item.Delete
		_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: d.TableName, Key: d.Key,
			ConditionExpression: d.ConditionExpression, ExpressionAttributeNames: d.ExpressionAttributeNames,
			ExpressionAttributeValues: d.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	default:
		return nil, machine.Outcome{}, fmt.Errorf("%s %s: not a single put, update or delete", st.m.Name, st.t.Name)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		current := ccf.Item
		if current == nil {
			// Not returned with the refusal (an emulator that does not):
			// read it.
			if current, err = getRaw(ctx, db, st.table, st.key); err != nil {
				return nil, machine.Outcome{}, err
			}
		}
		out := st.m.Decide(st.t, current, read, st.in)
		switch {
		case out.Stale:
			return nil, out, errStale
		case out.Applies():
			return nil, out, fmt.Errorf("%s %s: refused, but the item returned with the refusal allows it", st.m.Name, st.t.Name)
		}
		return nil, out, nil
	}
	if err != nil {
		return nil, machine.Outcome{}, fmt.Errorf("%s %s: %w", st.m.Name, st.t.Name, err)
	}
	return written, machine.Outcome{Next: written, Event: st.t.Event}, nil
}

// deletedSnapshot is what a deleted item's outcome reports: the item as it
// was, in the state machine.Deleted.
func deletedSnapshot[In any](m *machine.Machine[In], read machine.Item) machine.Item {
	snap := make(machine.Item, len(read))
	for k, v := range read {
		snap[k] = v
	}
	snap[m.State] = &types.AttributeValueMemberS{Value: machine.Deleted}
	return snap
}

// getRaw reads one item as DynamoDB stores it; nil when there is none.
func getRaw(ctx context.Context, db *dynamodb.Client, table string, key machine.Item) (machine.Item, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	return out.Item, nil
}

// rawItem is v as DynamoDB stores it, for deciding on an item read into a
// struct.
func rawItem(v any) (machine.Item, error) {
	item, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return item, nil
}
