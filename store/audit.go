package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Cmd identifies the command a transition applies. Its ID keys the
// recorded outcome.
type Cmd struct {
	ID            string
	Type          string
	CorrelationID string
	// CausationID is the ID of the message that caused the command; empty
	// when a producer sent it of its own accord.
	CausationID string
	// Actor is who asked, e.g. the track ID; empty for system commands.
	Actor string
	// At is the command's decision time; transitions use it as "now".
	At time.Time
}

// CmdOf is the store's view of a decoded command, decided at time at.
func CmdOf(cmd messages.Command, at time.Time) Cmd {
	return Cmd{ID: cmd.ID, Type: string(cmd.Type), CorrelationID: cmd.CorrelationID, CausationID: cmd.CausationID, At: at}
}

// Outcome statuses recorded in the audit table.
const (
	Applied  = "applied"
	Rejected = "rejected"
	// pending is an outcome decided but not known to be written to its
	// item yet (outcome.go); no reader is ever given one.
	pending = "pending"
)

// Rejection is a business outcome: the command was valid but the state did
// not allow it. It is recorded like a success and never retried.
type Rejection struct {
	Reason string
	// At is when the decision was first made; a replay returns it unchanged.
	At time.Time
}

func (r *Rejection) Error() string { return "rejected: " + r.Reason }

// AsRejection returns the rejection in err's chain, if any.
func AsRejection(err error) (*Rejection, bool) {
	var r *Rejection
	ok := errors.As(err, &r)
	return r, ok
}

// auditItem is one command's recorded outcome.
type auditItem struct {
	// PK is CMD#<command ID>: a redelivered command finds its outcome by
	// its ID.
	PK string `dynamodbav:"pk"`
	// SK is always OUTCOME.
	SK string `dynamodbav:"sk"`
	// GSI1PK is AUDIT#GLOBAL#<n>, one of the AuditGlobalKeys keys
	// GlobalIndex spreads the global chronological view over.
	GSI1PK string `dynamodbav:"gsi1pk,omitempty"`
	// GSI1SK is TIMESTAMP#<decision time, ms>#<command ID>: chronological
	// within a key, an entity or a chain.
	GSI1SK string `dynamodbav:"gsi1sk"`
	// Entity is ENTITY#<what the command acted on>: SANDBOX#<id>,
	// TRACK#<track> (an allocation refused), POOL (a sync),
	// LAYER#<region>.<package>#<version>, BUILD#<package>#<version>,
	// TIMER#<timer ID>, ORG#<org>, USER#<user>, PROJECT#, SETTINGS#,
	// SECRET#, TASK#, AGENT# or NOTIFICATION#<org>/<id>, ACCOUNT#<id>,
	// SCHEDULE#<id>.
	Entity string `dynamodbav:"entity,omitempty"`
	// Action is the command's type, e.g. sandbox.allocate.
	Action string `dynamodbav:"action"`
	// Actor is who asked: the track of a sandbox allocation or release,
	// the actor (user:<id>, agent:<id>, system) of an org or task
	// command, the user_id of a Nucleus command; absent for other
	// commands.
	Actor string `dynamodbav:"user_id,omitempty"`
	// CommandID is the command's ID.
	CommandID string `dynamodbav:"command_id"`
	// CorrelationID is the command's correlation ID.
	CorrelationID string `dynamodbav:"correlation_id"`
	// Chain is the correlation ID again, only when it is not the
	// command's own ID: a command another caused, or one its producer
	// placed in a wider correlation. It keys the sparse CorrelationIndex;
	// a command that starts its own chain is found by its ID instead and
	// costs the index nothing.
	Chain string `dynamodbav:"chain,omitempty"`
	// CausationID is the ID of the message that caused the command: the
	// command whose handler sent it, or the one that armed the timer
	// that did; absent for a command a producer sent of its own accord.
	CausationID string `dynamodbav:"causation_id,omitempty"`
	// Status is applied or rejected; pending while an outcome decided
	// without a transaction is not yet known written (store/outcome.go).
	Status string `dynamodbav:"status"`
	// Reason is a rejection's reason, what a timer firing did (fired,
	// retry or failed), "empty" for a lease that found no task, or why a
	// window that acted armed no next one (disabled, superseded,
	// not_found).
	Reason string `dynamodbav:"reason,omitempty"`
	// Details is the transition's result (JSON), enough to re-emit its events.
	Details string `dynamodbav:"details,omitempty"`
	// At is the decision time (RFC 3339, UTC); a replay reports it
	// unchanged.
	At string `dynamodbav:"at"`
	// ExpireAt is when DynamoDB removes the record (Unix seconds): the
	// decision time plus TRANSIT_AUDIT_RETENTION. A command redelivered
	// later than that is applied again.
	ExpireAt int64 `dynamodbav:"expire_at"`
	// PendingEntity is what entity will be once a pending outcome is
	// confirmed; until then gsi1pk, entity and chain are absent, so no
	// index holds the record (store/outcome.go).
	PendingEntity string `dynamodbav:"pending_entity,omitempty"`
	// Pin is, on a pending outcome, the last_command_id its item had when
	// the outcome was decided (absent for none): the only one the item's
	// write may find.
	Pin string `dynamodbav:"pin,omitempty"`
	// Nonce names a pending outcome's decision: it is confirmed or
	// replaced only as it was read.
	Nonce string `dynamodbav:"nonce,omitempty"`
}

func auditKey(commandID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "CMD#" + commandID},
		"sk": &types.AttributeValueMemberS{Value: "OUTCOME"},
	}
}

// newAuditPut is the audit write that joins a transition's transaction. Its
// condition fails when the command was already applied, which is how a
// redelivery is recognised.
func (s *Store) newAuditPut(cmd Cmd, entity, status, reason string, details any) (types.TransactWriteItem, error) {
	put, err := s.auditPut(cmd, entity, status, reason, details)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: put}, nil
}

func (s *Store) auditPut(cmd Cmd, entity, status, reason string, details any) (*types.Put, error) {
	item, err := s.outcomeItem(cmd, entity, status, reason, details)
	if err != nil {
		return nil, err
	}
	return s.auditPutOf(item, expression.AttributeNotExists(expression.Name("pk")))
}

// auditPutOf is the put of an outcome record under cond.
func (s *Store) auditPutOf(item auditItem, cond expression.ConditionBuilder) (*types.Put, error) {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return nil, fmt.Errorf("encode audit item: %w", err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Put{
		TableName:                 aws.String(s.audit),
		Item:                      av,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, nil
}

// outcomeItem is cmd's outcome record.
func (s *Store) outcomeItem(cmd Cmd, entity, status, reason string, details any) (auditItem, error) {
	at := cmd.At.UTC().Format(time.RFC3339Nano)
	sk := auditSortKey(cmd.At, cmd.ID)
	item := auditItem{
		PK:            "CMD#" + cmd.ID,
		SK:            "OUTCOME",
		GSI1PK:        globalKey(sk),
		GSI1SK:        sk,
		Entity:        "ENTITY#" + entity,
		Action:        cmd.Type,
		Actor:         cmd.Actor,
		CommandID:     cmd.ID,
		CorrelationID: cmd.CorrelationID,
		CausationID:   cmd.CausationID,
		Status:        status,
		Reason:        reason,
		At:            at,
		ExpireAt:      cmd.At.Add(s.auditRetention).Unix(),
	}
	if cmd.CorrelationID != cmd.ID {
		item.Chain = cmd.CorrelationID
	}
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return auditItem{}, fmt.Errorf("encode audit details: %w", err)
		}
		item.Details = string(b)
	}
	return item, nil
}

// recordRejection records a rejection on its own. If the command already
// has an outcome, that outcome is replayed into result instead.
func (s *Store) recordRejection(ctx context.Context, cmd Cmd, entity string, rej *Rejection, result any) error {
	replayed, err := s.record(ctx, cmd, entity, Rejected, rej.Reason, nil, result)
	if replayed || err != nil {
		return err
	}
	return rej
}

// record writes an outcome that changes no other item: a rejection, or a
// side effect outside DynamoDB that succeeded. If the command already has
// an outcome, that outcome is replayed instead (replayed is true, and err
// is what replay returned).
func (s *Store) record(ctx context.Context, cmd Cmd, entity, status, reason string, details, result any) (replayed bool, err error) {
	put, err := s.auditPut(cmd, entity, status, reason, details)
	if err != nil {
		return false, err
	}
	err = putAlone(ctx, s.db, put)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, s.replay(ctx, cmd, result)
	}
	if err != nil {
		return false, fmt.Errorf("record outcome of %s: %w", cmd.ID, err)
	}
	return false, nil
}

// errAlreadyApplied marks a transaction cancelled by its audit condition.
var errAlreadyApplied = errors.New("command already has an outcome")

// transact runs a transition's transaction, usually ending in the audit
// put. It returns errAlreadyApplied when the audit condition failed, and
// errConflict when another item's condition failed or another
// transaction got there first.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return err
	}
	reasons := tce.CancellationReasons
	last := items[len(items)-1]
	audited := last.Put != nil && aws.ToString(last.Put.TableName) == s.audit
	if audited && len(reasons) == len(items) && aws.ToString(reasons[len(items)-1].Code) == "ConditionalCheckFailed" {
		return errAlreadyApplied
	}
	for i, r := range reasons {
		switch code := aws.ToString(r.Code); code {
		case "ConditionalCheckFailed", "TransactionConflict":
			return &conflictError{item: i, raced: code == "TransactionConflict", current: r.Item}
		}
	}
	return err
}

// errConflict means the state changed under the transition: re-read and decide again.
var errConflict = errors.New("state changed concurrently")

// conflictError is an errConflict that says which item's condition
// failed, or which item another transaction held at the same moment
// (raced): its condition was not evaluated.
type conflictError struct {
	item  int
	raced bool
	// current is the item as the failed condition saw it, when the write
	// asked for it (ReturnValuesOnConditionCheckFailure); nil if absent.
	current map[string]types.AttributeValue
}

func (e *conflictError) Error() string        { return fmt.Sprintf("%v (item %d)", errConflict, e.item) }
func (e *conflictError) Is(target error) bool { return target == errConflict }

// failedOn reports whether item i's condition was evaluated and failed,
// rather than the item being held by a concurrent transaction.
func failedOn(err error, i int) bool {
	var ce *conflictError
	return errors.As(err, &ce) && ce.item == i && !ce.raced
}

// replay loads the recorded outcome of cmd, which must exist. An applied
// outcome's details are decoded into result; a rejection is returned as
// *Rejection.
func (s *Store) replay(ctx context.Context, cmd Cmd, result any) error {
	found, err := s.recorded(ctx, cmd, result)
	if err == nil && !found {
		return fmt.Errorf("recorded outcome of %s vanished", cmd.ID)
	}
	return err
}

// recorded reports whether cmd already has an outcome, replaying it as
// replay does when it has. Transitions with a side effect outside DynamoDB
// ask first, so a redelivery does not repeat the side effect.
func (s *Store) recorded(ctx context.Context, cmd Cmd, result any) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.audit),
		Key:            auditKey(cmd.ID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("read recorded outcome of %s: %w", cmd.ID, err)
	}
	if out.Item == nil {
		return false, nil
	}
	var item auditItem
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		return true, fmt.Errorf("decode recorded outcome of %s: %w", cmd.ID, err)
	}
	if item.Status == pending && item.Action == cmd.Type {
		// Decided, not settled: the command's own path settles it.
		return false, nil
	}
	return true, replayOutcome(cmd, item, result)
}

// replayOutcome is what a recorded outcome says: an applied one's details
// decoded into result, a rejection as *Rejection.
func replayOutcome(cmd Cmd, item auditItem, result any) error {
	if item.Action != cmd.Type {
		return fmt.Errorf("command ID %s was first used by a %s: %w", cmd.ID, item.Action, ErrIDReused)
	}
	at, _ := time.Parse(time.RFC3339Nano, item.At)
	if item.Status == Rejected {
		return &Rejection{Reason: item.Reason, At: at}
	}
	if result != nil && item.Details != "" {
		// Decoded over nothing: a result this delivery filled before it
		// found the outcome must not show through where the record is
		// silent.
		if v := reflect.ValueOf(result); v.Kind() == reflect.Pointer && !v.IsNil() {
			v.Elem().SetZero()
		}
		if err := json.Unmarshal([]byte(item.Details), result); err != nil {
			return fmt.Errorf("decode recorded result of %s: %w", cmd.ID, err)
		}
	}
	return nil
}

// ErrIDReused means a command ID arrived again with another type: the
// producer reused an ID, which can never succeed.
var ErrIDReused = errors.New("command ID reused")

// Correlation reads one page of at most limit recorded outcomes of a
// correlation, oldest first, from cursor (a Page's Next; "" for the
// first page). The first page starts with the command that started the
// chain, when the correlation is a command's own ID: it is not in
// CorrelationIndex, and is read by its ID.
func (s *Store) Correlation(ctx context.Context, correlationID string, limit int32, cursor string) (Page[AuditRecord], error) {
	var start map[string]types.AttributeValue
	var page Page[AuditRecord]
	if cursor != "" {
		var err error
		if start, err = decodeCursor(cursor); err != nil {
			return Page[AuditRecord]{}, err
		}
	} else {
		root, found, err := getItem[auditItem](ctx, s.db, s.audit, auditKey(correlationID))
		if err != nil {
			return Page[AuditRecord]{}, fmt.Errorf("read the start of correlation %s: %w", correlationID, err)
		}
		if found && root.CorrelationID == correlationID && root.Status != pending {
			page.Items = append(page.Items, outcomeRecord(root))
		}
	}
	kc := expression.Key("chain").Equal(expression.Value(correlationID))
	items, next, err := queryRaw(ctx, s.db, s.audit, "CorrelationIndex", kc, limit, start)
	if err != nil {
		return Page[AuditRecord]{}, fmt.Errorf("correlation %s: %w", correlationID, err)
	}
	var outcomes []auditItem
	if err := attributevalue.UnmarshalListOfMaps(items, &outcomes); err != nil {
		return Page[AuditRecord]{}, fmt.Errorf("decode correlation %s: %w", correlationID, err)
	}
	for _, o := range outcomes {
		page.Items = append(page.Items, outcomeRecord(o))
	}
	if len(next) > 0 {
		if page.Next, err = encodeCursor(next); err != nil {
			return Page[AuditRecord]{}, err
		}
	}
	return page, nil
}
