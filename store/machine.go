package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
)

// This file is the one path by which a declared transition reaches
// DynamoDB together with the command's recorded outcome.

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
	with []types.TransactWriteItem
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
	for round := 0; round < allocateRounds; round++ {
		read, err := getRaw(ctx, s.db, st.table, st.key)
		if err != nil {
			return err
		}
		out, err := write(ctx, s, cmd, st, read, result)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil || out.Applies() {
			return err
		}
		return s.recordRejection(ctx, cmd, st.entity, &Rejection{Reason: out.Reason, At: cmd.At}, result)
	}
	return fmt.Errorf("%s %s: %w", st.m.Name, st.t.Name, errConflict)
}

// write decides the transition on read and, when it applies, writes it
// with the command's outcome in one transaction. It records no rejection:
// it returns the outcome that says why not, decided on read or, when
// DynamoDB refuses the write, on the item DynamoDB returns with its
// refusal. errStale means only a pin failed or another transaction held
// the item.
func write[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], read machine.Item, result any) (machine.Outcome, error) {
	out, item, err := decidedWrite(st, read)
	if err != nil || !out.Applies() {
		return out, err
	}
	snapshot := out.Next
	if snapshot == nil {
		snapshot = deletedSnapshot(st.m, read)
	}
	if err := attributevalue.UnmarshalMap(snapshot, result); err != nil {
		return out, fmt.Errorf("decode %s after %s: %w", st.m.Name, st.t.Name, err)
	}
	put, err := s.newAuditPut(cmd, st.entity, Applied, "", result)
	if err != nil {
		return out, err
	}
	items := append(append([]types.TransactWriteItem{item}, st.with...), put)
	err = s.transact(ctx, items)
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
	case errors.As(err, &ce) && ce.item == 0:
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
	item, err := transitionWrite(st, read, out.Next)
	return out, item, err
}

// transitionWrite is the transaction item of a transition: a put of the
// next item when it creates one, a delete when it ends one, a condition
// check when it changes nothing, else an update; each under the machine's
// condition, asking DynamoDB to return the item if the condition fails.
func transitionWrite[In any](st step[In], read, next machine.Item) (types.TransactWriteItem, error) {
	cond := st.m.Condition(st.t, st.in, read)
	allOld := types.ReturnValuesOnConditionCheckFailureAllOld
	switch {
	case st.t.To == machine.Absent:
		item, err := deleteIn(st.table, st.key, cond)
		if err == nil {
			item.Delete.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	case slices.Contains(st.t.From, machine.Absent):
		item, err := putIn(st.table, next, cond)
		if err == nil {
			item.Put.ReturnValuesOnConditionCheckFailure = allOld
		}
		return item, err
	case len(st.t.Set) == 0 && len(st.t.Remove) == 0 && slices.Contains(st.t.From, st.t.To):
		item, err := conditionCheck(st.table, st.key, cond)
		if err == nil {
			item.ConditionCheck.ReturnValuesOnConditionCheckFailure = allOld
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
