// Package store holds transit's DynamoDB side: the table definitions that
// provisioning reads, and each domain's transitions as conditional writes
// or transactions that also record the command's outcome.
package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Store runs transitions against one stack's tables.
type Store struct {
	db        *dynamodb.Client
	sandboxes string
	audit     string
	layers    string
	timers    string
	// The agent-task system's tables.
	users, orgs, projects, settings, secrets              string
	agents, tasks, queue, taskEvents, logs, notifications string
	// The Nucleus platform's tables.
	nucleusApp, nucleusAudit string
	auditRetention           time.Duration
	layerRetention           time.Duration
	// expiring are the tables whose items DynamoDB removes by TTL.
	expiring map[string]bool
}

// Retention says how long items live before their TTL removes them.
type Retention struct {
	// Audit is how long a command's outcome is kept (and so deduplicated).
	Audit time.Duration
	// DeprecatedLayers is how long a replaced layer version is kept
	// before it is removed and its Lambda layer version deleted.
	DeprecatedLayers time.Duration
}

// New returns a Store for the stack named by prefix.
func New(db *dynamodb.Client, prefix string, r Retention) *Store {
	if db == nil {
		panic("store: nil DynamoDB client")
	}
	expiring := map[string]bool{}
	for _, t := range Tables {
		if t.TTLAttribute != "" {
			expiring[TableName(prefix, t)] = true
		}
	}
	return &Store{
		expiring:       expiring,
		db:             db,
		sandboxes:      TableName(prefix, SandboxPool),
		audit:          TableName(prefix, Audit),
		layers:         TableName(prefix, Layers),
		timers:         TableName(prefix, Timers),
		users:          TableName(prefix, Users),
		orgs:           TableName(prefix, Orgs),
		projects:       TableName(prefix, Projects),
		settings:       TableName(prefix, Settings),
		secrets:        TableName(prefix, Secrets),
		agents:         TableName(prefix, Agents),
		tasks:          TableName(prefix, Tasks),
		queue:          TableName(prefix, Queue),
		taskEvents:     TableName(prefix, TaskEvents),
		logs:           TableName(prefix, Logs),
		notifications:  TableName(prefix, Notifications),
		nucleusApp:     TableName(prefix, NucleusApp),
		nucleusAudit:   TableName(prefix, NucleusAudit),
		auditRetention: r.Audit,
		layerRetention: r.DeprecatedLayers,
	}
}

// IsPermanent reports whether a DynamoDB error can never succeed on retry:
// the request itself is invalid. Throttling, timeouts and 5xx are not.
func IsPermanent(err error) bool {
	if errors.Is(err, ErrIDReused) || errors.Is(err, ErrSyncTooLarge) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ValidationException", "SerializationException":
			return true
		}
	}
	return false
}

// updateIn is a transaction item updating key in table under cond.
func updateIn(table string, key map[string]types.AttributeValue, update expression.UpdateBuilder, cond expression.ConditionBuilder) (types.TransactWriteItem, error) {
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build update in %s: %w", table, err)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// conditionCheck is a transaction item requiring cond of key in table.
func conditionCheck(table string, key map[string]types.AttributeValue, cond expression.ConditionBuilder) (types.TransactWriteItem, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build condition check in %s: %w", table, err)
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                 aws.String(table),
		Key:                       key,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// deleteIn is a transaction item deleting key from table under cond.
func deleteIn(table string, key map[string]types.AttributeValue, cond expression.ConditionBuilder) (types.TransactWriteItem, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build delete in %s: %w", table, err)
	}
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName:                 aws.String(table),
		Key:                       key,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// putIn is a transaction item putting item (a struct, or an item as
// DynamoDB stores it) into table under cond.
func putIn(table string, item any, cond expression.ConditionBuilder) (types.TransactWriteItem, error) {
	av, raw := item.(map[string]types.AttributeValue)
	if !raw {
		var err error
		if av, err = attributevalue.MarshalMap(item); err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("encode item for %s: %w", table, err)
		}
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build put in %s: %w", table, err)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                 aws.String(table),
		Item:                      av,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// putAlone sends p, a put built as a transaction's item, as one
// PutItem.
func putAlone(ctx context.Context, db *dynamodb.Client, p *types.Put) error {
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
		ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
	})
	return err
}

// getItem reads one item with a strongly consistent read into T.
func getItem[T any](ctx context.Context, db *dynamodb.Client, table string, key map[string]types.AttributeValue) (T, bool, error) {
	var v T
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		return v, false, err
	}
	if err := attributevalue.UnmarshalMap(out.Item, &v); err != nil {
		return v, false, fmt.Errorf("decode item of %s: %w", table, err)
	}
	return v, true, nil
}

// query reads a table, strongly consistent, or one of its indexes (index
// empty for the table), every page unless limit is set.
func query[T any](ctx context.Context, db *dynamodb.Client, table, index string, kc expression.KeyConditionBuilder, filter *expression.ConditionBuilder, limit int32) ([]T, error) {
	items, err := queryItems(ctx, db, table, index, kc, filter, limit)
	if err != nil {
		return nil, err
	}
	var all []T
	if err := attributevalue.UnmarshalListOfMaps(items, &all); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", table, index, err)
	}
	return all, nil
}

// queryItems is query's read, the items as stored: for a partition that
// holds items of several types.
func queryItems(ctx context.Context, db *dynamodb.Client, table, index string, kc expression.KeyConditionBuilder, filter *expression.ConditionBuilder, limit int32) ([]map[string]types.AttributeValue, error) {
	b := expression.NewBuilder().WithKeyCondition(kc)
	if filter != nil {
		b = b.WithFilter(*filter)
	}
	expr, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("build query on %s %s: %w", table, index, err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	if index != "" {
		in.IndexName = aws.String(index)
	} else {
		// The table itself can be read strongly consistent, as every
		// GetItem here is: what a transition just wrote is there.
		in.ConsistentRead = aws.Bool(true)
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	var all []map[string]types.AttributeValue
	for {
		out, err := db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("query %s %s: %w", table, index, err)
		}
		all = append(all, out.Items...)
		if limit > 0 || len(out.LastEvaluatedKey) == 0 {
			return all, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// queryRaw reads one page of at most limit items of a table's index, as
// stored, from start; next is where the following page starts (nil after
// the last).
func queryRaw(ctx context.Context, db *dynamodb.Client, table, index string, kc expression.KeyConditionBuilder, limit int32, start map[string]types.AttributeValue) (page []map[string]types.AttributeValue, next map[string]types.AttributeValue, err error) {
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, nil, fmt.Errorf("build query on %s %s: %w", table, index, err)
	}
	out, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(index), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), Limit: aws.Int32(limit), ExclusiveStartKey: start,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("query %s %s: %w", table, index, err)
	}
	return out.Items, out.LastEvaluatedKey, nil
}

// plainPut is an unconditional put of item (a struct) into table, for
// items no machine declares: a task's events and log lines, which its
// transition's pin and the command's outcome keep written once.
func plainPut(table string, item any) (types.TransactWriteItem, error) {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("encode item for %s: %w", table, err)
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: av}}, nil
}

// Page is one page of a listing, newest first, and the cursor of the
// next page ("" after the last).
type Page[T any] struct {
	Items []T
	Next  string
}

// newestFirst reads one page of at most limit items of a table or one of
// its indexes (index empty for the table), newest first (descending sort key), from cursor (a Page's Next; ""
// for the first page), keeping those filter holds for (nil: all).
func newestFirst[T any](ctx context.Context, db *dynamodb.Client, table, index string, kc expression.KeyConditionBuilder, filter *expression.ConditionBuilder, limit int32, cursor string) (Page[T], error) {
	b := expression.NewBuilder().WithKeyCondition(kc)
	if filter != nil {
		b = b.WithFilter(*filter)
	}
	expr, err := b.Build()
	if err != nil {
		return Page[T]{}, fmt.Errorf("build query on %s %s: %w", table, index, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: expr.KeyCondition(),
		FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(limit),
	}
	if index != "" {
		in.IndexName = aws.String(index)
	}
	if cursor != "" {
		if in.ExclusiveStartKey, err = decodeCursor(cursor); err != nil {
			return Page[T]{}, err
		}
	}
	out, err := db.Query(ctx, in)
	if err != nil {
		return Page[T]{}, fmt.Errorf("query %s %s: %w", table, index, err)
	}
	var page Page[T]
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &page.Items); err != nil {
		return Page[T]{}, fmt.Errorf("decode %s %s page: %w", table, index, err)
	}
	if len(out.LastEvaluatedKey) > 0 {
		if page.Next, err = encodeCursor(out.LastEvaluatedKey); err != nil {
			return Page[T]{}, err
		}
	}
	return page, nil
}

// A cursor is the page's last key, as JSON in base64url: opaque to users,
// and only ever handed back to the query that made it.
func encodeCursor(key map[string]types.AttributeValue) (string, error) {
	var plain map[string]any
	if err := attributevalue.UnmarshalMap(key, &plain); err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	b, err := json.Marshal(plain)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ErrBadCursor means a cursor was not one a listing handed out.
var ErrBadCursor = errors.New("not a cursor of this listing")

func decodeCursor(cursor string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, ErrBadCursor
	}
	var plain map[string]any
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, ErrBadCursor
	}
	key, err := attributevalue.MarshalMap(plain)
	if err != nil {
		return nil, ErrBadCursor
	}
	return key, nil
}
