package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"transit/machine"
)

// This file is the path of a transition that changes one item and
// nothing else, without a transaction: a transaction bills every item it
// writes twice, indexes included (DECISIONS.md, "Outcomes without a
// transaction"). Effectively-once rests on three plain writes and one
// attribute of the item, last_command_id:
//
//  1. The outcome is put first, pending: decided on the item as read,
//     under attribute_not_exists, in no index yet. Of two deliveries of a
//     command the first to put an outcome decides; a rejection is put
//     final at once.
//  2. The item is updated under the machine's condition and on the
//     last_command_id it had when read (the pin), which the update sets
//     to the command's ID.
//  3. The outcome is confirmed: applied, with its index keys.
//
// The invariant: an item's last_command_id names a command whose outcome
// is recorded, and before anything replaces or removes that ID, the
// command's outcome is confirmed if it is still pending (the item is the
// proof it was written). So a pending outcome whose item names neither
// the command nor the pin was never written and never will be, and is
// decided again. One whose item still names the pin may be being written
// by another delivery right now: it is left to it for takeoverAfter,
// then fenced (the pin replaced, so that write can no longer land) and
// decided again. Any delivery of the command finishes what another left.

// lastCommandAttr is the attribute an item changed alone carries: the ID
// of the command that last changed it so, or a fence.
const lastCommandAttr = "last_command_id"

// fencePrefix starts a last_command_id that names no command: written by
// a delivery taking over a decision another left unfinished, so that
// the other's write, pinned on the ID before it, can no longer land.
const fencePrefix = "fence:"

// takeoverAfter is how long a pending outcome whose item still names its
// pin is left to the delivery that decided it, which writes the item
// within milliseconds unless it stopped. Correctness does not depend on
// it (a fence and the pinned write exclude each other), only wasted
// fences do; a delivery waits it out in full rather than give up and
// come back, which would spend receives towards the DLQ.
const takeoverAfter = 2 * time.Second

// alone reports whether st takes this path: a plain update of one item
// recording the item's snapshot, in a table without a TTL. Creations and
// deletions keep the transaction (they would lose the item's
// last_command_id), and so do items DynamoDB may remove on its own.
func alone[In any](s *Store, st step[In]) bool {
	return len(st.with) == 0 && st.details == nil && !st.t.Checks() &&
		st.t.To != machine.Absent && !slices.Contains(st.t.From, machine.Absent) &&
		!s.expiring[st.table]
}

// applyAlone is apply for a step that changes its item alone.
func applyAlone[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], result any) error {
	return retrying(ctx, st, func() error {
		read, err := getRaw(ctx, s.db, st.table, st.key)
		if err != nil {
			return err
		}
		out := st.m.Decide(st.t, read, read, st.in)
		if out.Stale {
			return errStale
		}
		rec, err := s.decision(cmd, st.entity, read, out, result)
		if err != nil {
			return err
		}
		if created, err := s.putOutcome(ctx, rec, ""); err != nil || !created {
			if err == nil {
				// The outcome found may be this one, put by an attempt
				// whose answer was lost (the SDK retried): its nonce says.
				err = settleAlone(ctx, s, cmd, st, rec.Nonce, result)
			}
			return err
		}
		if rec.Status == Rejected {
			return &Rejection{Reason: rec.Reason, At: cmd.At}
		}
		if written, err := writeDecided(ctx, s, cmd, st, read, rec); err != nil || !written {
			if err == nil {
				err = settleAlone(ctx, s, cmd, st, rec.Nonce, result)
			}
			return err
		}
		return nil
	})
}

// decision is cmd's outcome as out decided it on read: a pending one
// pinned on read's last_command_id, its snapshot decoded into result, or
// a rejection.
func (s *Store) decision(cmd Cmd, entity string, read machine.Item, out machine.Outcome, result any) (auditItem, error) {
	if !out.Applies() {
		return s.outcomeItem(cmd, entity, Rejected, out.Reason, nil)
	}
	if err := attributevalue.UnmarshalMap(out.Next, result); err != nil {
		return auditItem{}, fmt.Errorf("decode %s after %s: %w", entity, cmd.Type, err)
	}
	rec, err := s.outcomeItem(cmd, entity, pending, "", result)
	if err != nil {
		return auditItem{}, err
	}
	rec.PendingEntity, rec.Entity, rec.GSI1PK, rec.Chain = rec.Entity, "", "", ""
	rec.Pin, rec.Nonce = lastCommand(read), uuid.NewString()
	return rec, nil
}

// putOutcome puts rec: over no outcome when replacing is "", else over the
// pending outcome with that nonce. put is false when the condition failed.
func (s *Store) putOutcome(ctx context.Context, rec auditItem, replacing string) (put bool, err error) {
	p, err := s.auditPutOf(rec, outcomeCondition(replacing))
	if err != nil {
		return false, err
	}
	return refused(putAlone(ctx, s.db, p), fmt.Sprintf("record outcome of %s", rec.CommandID))
}

// outcomeCondition is the condition of an outcome's put: no outcome yet
// when replacing is "", else the pending one with that nonce.
func outcomeCondition(replacing string) expression.ConditionBuilder {
	if replacing == "" {
		return expression.AttributeNotExists(expression.Name("pk"))
	}
	return expression.Name("status").Equal(expression.Value(pending)).
		And(expression.Name("nonce").Equal(expression.Value(replacing)))
}

// refused turns a conditional write's answer into done, false when its
// condition failed.
func refused(err error, what string) (done bool, _ error) {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return true, nil
}

// writeDecided writes the item as rec decided it on read, then confirms
// rec. written is false when the item had changed: settle then.
func writeDecided[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], read machine.Item, rec auditItem) (written bool, err error) {
	if err := s.confirmLast(ctx, read, cmd.ID); err != nil {
		return false, err
	}
	update := st.m.Update(st.t, st.in, read).Set(expression.Name(lastCommandAttr), expression.Value(cmd.ID))
	cond := st.m.Condition(st.t, st.in, read).And(pinned(rec.Pin))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return false, err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(st.table), Key: st.key, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if written, err = refused(err, fmt.Sprintf("%s %s", st.m.Name, st.t.Name)); err != nil || !written {
		return false, err
	}
	_, err = s.confirm(ctx, rec)
	return true, err
}

// pinned is the condition that the item's last_command_id is still pin.
func pinned(pin string) expression.ConditionBuilder {
	if pin == "" {
		return expression.AttributeNotExists(expression.Name(lastCommandAttr))
	}
	return expression.Name(lastCommandAttr).Equal(expression.Value(pin))
}

// lastCommand is item's last_command_id; "" when it has none.
func lastCommand(item machine.Item) string {
	if v, ok := item[lastCommandAttr].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// confirm makes the pending rec applied and puts it in the indexes.
// confirmed is false when another delivery confirmed or replaced it
// first.
func (s *Store) confirm(ctx context.Context, rec auditItem) (confirmed bool, err error) {
	update := expression.Set(expression.Name("status"), expression.Value(Applied)).
		Set(expression.Name("entity"), expression.Value(rec.PendingEntity)).
		Set(expression.Name("gsi1pk"), expression.Value(globalKey(rec.GSI1SK))).
		Remove(expression.Name("pending_entity")).Remove(expression.Name("pin")).Remove(expression.Name("nonce"))
	if rec.CorrelationID != rec.CommandID {
		update = update.Set(expression.Name("chain"), expression.Value(rec.CorrelationID))
	}
	cond := expression.Name("status").Equal(expression.Value(pending)).And(expression.Name("nonce").Equal(expression.Value(rec.Nonce)))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return false, err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.audit), Key: auditKey(rec.CommandID), UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	return refused(err, fmt.Sprintf("confirm outcome of %s", rec.CommandID))
}

// confirmLast confirms the outcome of the command item names, if it is
// still pending: the item is the proof it was written, and a write about
// to replace or remove the name would lose that proof. self is the
// command writing now.
func (s *Store) confirmLast(ctx context.Context, item machine.Item, self string) error {
	last := lastCommand(item)
	if last == "" || last == self || strings.HasPrefix(last, fencePrefix) {
		return nil
	}
	rec, found, err := getItem[auditItem](ctx, s.db, s.audit, auditKey(last))
	if err != nil || !found || rec.Status != pending {
		return err
	}
	_, err = s.confirm(ctx, rec)
	return err
}

// settleAlone finishes cmd on st's item once an outcome of cmd is
// recorded: replays a final one, confirms a pending one the item proves
// written, and decides again one that was not and cannot be. own is the
// nonce of the pending outcome this delivery put and failed to write, ""
// for none.
func settleAlone[In any](ctx context.Context, s *Store, cmd Cmd, st step[In], own string, result any) error {
	waited := false
	at := func(auditItem) (string, machine.Item) { return st.table, st.key }
	for round := 1; round <= maxRounds; round++ {
		rec, item, open, err := s.pendingOf(ctx, cmd, own, &waited, at)
		if err != nil || !open {
			if err == nil {
				err = replayOutcome(cmd, rec, result)
			}
			return err
		}
		// rec was never written and never will be: decide again.
		out := st.m.Decide(st.t, item, item, st.in)
		if out.Stale {
			if err := pause(ctx, round); err != nil {
				return err
			}
			continue
		}
		next, err := s.decision(cmd, st.entity, item, out, result)
		if err != nil {
			return err
		}
		// Ours even if the put's answer is lost and its retry refused.
		own = next.Nonce
		if replaced, err := s.putOutcome(ctx, next, rec.Nonce); err != nil || !replaced {
			if err != nil {
				return err
			}
			continue
		}
		if next.Status == Rejected {
			return &Rejection{Reason: next.Reason, At: cmd.At}
		}
		if written, err := writeDecided(ctx, s, cmd, st, item, next); err != nil || written {
			return err
		}
	}
	return fmt.Errorf("settle %s %s: %w", st.m.Name, st.t.Name, errConflict)
}

// pendingOf reads cmd's recorded outcome until it is final or known never
// to be written. A pending one its item proves written is confirmed; one
// whose write may be in flight is left to the delivery that decided it
// for takeoverAfter (once per delivery of cmd: waited), then its item is
// fenced. own is the nonce of a decision this delivery put and knows was
// refused or never sent: not waited for. at names the item a pending
// outcome was decided on. open reports a pending outcome never written:
// decide again on item, the item as it now is, replacing the outcome.
// errStale means cmd has no outcome any more (expired): decide afresh.
func (s *Store) pendingOf(ctx context.Context, cmd Cmd, own string, waited *bool, at func(auditItem) (string, machine.Item)) (rec auditItem, item machine.Item, open bool, err error) {
	for round := 1; round <= maxRounds; round++ {
		first, found, err := getItem[auditItem](ctx, s.db, s.audit, auditKey(cmd.ID))
		switch {
		case err != nil:
			return rec, nil, false, err
		case !found:
			return rec, nil, false, errStale
		case first.Status != pending || first.Action != cmd.Type:
			return first, nil, false, nil
		}
		table, key := at(first)
		if item, err = getRaw(ctx, s.db, table, key); err != nil {
			return rec, nil, false, err
		}
		// The outcome again, after the item: a pending outcome read after
		// an item that names neither the command nor its pin was not
		// written before the item was read (the writer that replaced the
		// name would have confirmed it), and cannot be after.
		rec, found, err = getItem[auditItem](ctx, s.db, s.audit, auditKey(cmd.ID))
		switch {
		case err != nil:
			return rec, nil, false, err
		case !found:
			return rec, nil, false, errStale
		case rec.Status != pending || rec.Action != cmd.Type:
			return rec, nil, false, nil
		case rec.Nonce != first.Nonce:
			continue // decided again meanwhile
		}
		last := lastCommand(item)
		if item != nil && last == cmd.ID {
			if _, err := s.confirm(ctx, rec); err != nil {
				return rec, nil, false, err
			}
			continue // replayed once read confirmed
		}
		if item != nil && last == rec.Pin && rec.Nonce != own {
			if s.awaitTakeover(ctx, cmd, rec, waited) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return rec, nil, false, err
			}
			if err := s.confirmLast(ctx, item, cmd.ID); err != nil {
				return rec, nil, false, err
			}
			if item, err = s.fence(ctx, table, key, rec.Pin); err != nil || item == nil {
				if err == nil {
					continue // the item moved: look again
				}
				return rec, nil, false, err
			}
		}
		return rec, item, true, nil
	}
	return rec, nil, false, fmt.Errorf("settle %s: %w", cmd.ID, errConflict)
}

// awaitTakeover leaves a pending outcome rec, which its own delivery may
// be writing now, to that delivery until it is takeoverAfter old by the
// command's time (the clock every decision here reads), once per
// delivery: waited reports it was. It returns true when it waited (look
// again), false when rec is old enough to take over or ctx ended.
func (s *Store) awaitTakeover(ctx context.Context, cmd Cmd, rec auditItem, waited *bool) bool {
	at, _ := time.Parse(time.RFC3339Nano, rec.At)
	if *waited || cmd.At.Sub(at) >= takeoverAfter {
		return false
	}
	*waited = true
	select {
	case <-ctx.Done():
		return false
	case <-time.After(takeoverAfter - cmd.At.Sub(at)):
		return true
	}
}

// fence replaces the item's last_command_id pin with a fence, so that a
// write pinned on it can no longer land, and returns the item as fenced;
// nil when the item no longer names pin.
func (s *Store) fence(ctx context.Context, table string, key machine.Item, pin string) (machine.Item, error) {
	keyNames := make([]string, 0, len(key))
	for k := range key {
		keyNames = append(keyNames, k)
	}
	cond := pinned(pin).And(expression.AttributeExists(expression.Name(keyNames[0])))
	update := expression.Set(expression.Name(lastCommandAttr), expression.Value(fencePrefix+uuid.NewString()))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ReturnValues: types.ReturnValueAllNew,
	})
	if ok, err := refused(err, "fence "+table); err != nil || !ok {
		return nil, err
	}
	return out.Attributes, nil
}

// confirmReplaced is confirmLast for the items of a transaction that it
// deletes or puts whole, and so strips of their last_command_id: st's
// own, and the joined ones it read.
func confirmReplaced[In any](ctx context.Context, s *Store, st step[In], read machine.Item, self string) error {
	if st.t.To == machine.Absent || slices.Contains(st.t.From, machine.Absent) {
		if err := s.confirmLast(ctx, read, self); err != nil {
			return err
		}
	}
	for _, w := range st.with {
		if w.item.Delete != nil || w.item.Put != nil {
			if err := s.confirmLast(ctx, w.read, self); err != nil {
				return err
			}
		}
	}
	return nil
}
