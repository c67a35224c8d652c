package bench

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/config"
	"transit/internal/metering"
	"transit/service"
	"transit/store"
)

// meteredStack is a freshly provisioned stack named prefix, configured
// as transit would be then by modify (if not nil), whose AWS calls meter
// counts.
func meteredStack(ctx context.Context, prefix string, modify func(*config.Config)) (*service.Service, *metering.Meter, error) {
	cfg, err := defaultConfig(prefix)
	if err != nil {
		return nil, nil, err
	}
	if modify != nil {
		modify(&cfg)
	}
	meter := metering.New(prefix)
	svc, err := service.New(ctx, cfg, meter.Attach)
	if err != nil {
		return nil, nil, err
	}
	return svc, meter, svc.Provision(ctx)
}

// minimumRequests is the fewest AWS requests an allocate + mark-deletion
// pair needs, per command: receives and deletes batched by ten, one
// publish each, and the domain's own reads and writes (allocate: the
// IdempotencyIndex and StatusIndex queries and one write; mark-deletion:
// one read and one write).
var minimumRequests = map[string]float64{
	"SQS.ReceiveMessage":          0.1,
	"SQS.DeleteMessageBatch":      0.1,
	"SNS.Publish":                 1,
	"DynamoDB.Query":              1,
	"DynamoDB.GetItem":            0.5,
	"DynamoDB.TransactWriteItems": 1,
}

// measureFloor measures, on the bench's own DynamoDB, the capacity units of
// the domain's access pattern with nothing added: its queries and its two
// single-item conditional writes, without transit's outcome record. That
// is the floor transit's figures are compared with.
func measureFloor(ctx context.Context, prefix string) (perCommand, error) {
	svc, meter, err := meteredStack(ctx, prefix, nil)
	if err != nil {
		return perCommand{}, err
	}
	if err := seed(ctx, svc, prefix, 1); err != nil {
		return perCommand{}, err
	}
	// The allocate's two GSI queries and the mark-deletion's read.
	before := meter.Report()
	table := aws.String(store.TableName(prefix, store.SandboxPool))
	now := time.Now().Unix()
	sbs, err := svc.Store.Sandboxes(ctx, store.StatusAvailable)
	if err != nil || len(sbs) != 1 {
		return perCommand{}, fmt.Errorf("floor: seed: %v", err)
	}
	key := map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: sbs[0].PK}, "SK": &types.AttributeValueMemberS{Value: "META"},
	}
	// A query on another sparse GSI stands in for the IdempotencyIndex read.
	if _, err := svc.Store.TrackSandboxes(ctx, "floor"); err != nil {
		return perCommand{}, err
	}
	allocate := expression.Set(expression.Name("status"), expression.Value(store.StatusAllocated)).
		Set(expression.Name("allocated_to_track"), expression.Value("floor")).
		Set(expression.Name("allocated_at"), expression.Value(now)).
		Set(expression.Name("idempotency_key"), expression.Value("floor")).
		Set(expression.Name("updated_at"), expression.Value(now))
	release := expression.Set(expression.Name("status"), expression.Value(store.StatusPendingDeletion)).
		Set(expression.Name("deletion_requested_at"), expression.Value(now)).
		Set(expression.Name("updated_at"), expression.Value(now))
	for _, u := range []expression.UpdateBuilder{allocate, release} {
		expr, err := expression.NewBuilder().WithUpdate(u).WithCondition(expression.AttributeExists(expression.Name("PK"))).Build()
		if err != nil {
			return perCommand{}, err
		}
		if _, err := svc.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: table, Key: key, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		}); err != nil {
			return perCommand{}, fmt.Errorf("floor: %w", err)
		}
	}
	if _, _, err := svc.Store.GetSandbox(ctx, sbs[0].SandboxID); err != nil {
		return perCommand{}, err
	}
	// Two commands' worth: halve.
	d := meter.Report().Minus(before)
	p := costPerCommand(d, 2, 1)
	p.Requests = minimumRequests
	return p, nil
}

// timerFloorTimers is how many timers the timer floor fires, so one
// query per shard is shared as a poll's is.
const timerFloorTimers = 80

// minimumTimerRequests is the fewest AWS requests a firing needs besides
// the DynamoDB ones measured: transit's queue hop batched by ten (send, receive, delete)
// and its timer.fired event.
var minimumTimerRequests = map[string]float64{
	"SQS.SendMessageBatch":   0.1,
	"SQS.ReceiveMessage":     0.1,
	"SQS.DeleteMessageBatch": 0.1,
	"SNS.Publish":            1,
}

// measureTimerFloor measures a firing's DynamoDB units in the timer
// table's own access pattern: every shard's due timers read from
// ExecuteAtIndex, and each fired timer deleted under a condition on its
// uuid (a plain write, no outcome record), over timerFloorTimers timers.
func measureTimerFloor(ctx context.Context, prefix, callback string) (perCommand, error) {
	svc, meter, err := meteredStack(ctx, prefix, func(c *config.Config) { c.TimerShards = timerShards })
	if err != nil {
		return perCommand{}, err
	}
	due := make([]time.Time, timerFloorTimers)
	for i := range due {
		due[i] = time.Now().Add(-time.Second).Truncate(time.Millisecond)
	}
	if _, err := seedTimers(ctx, svc, "f", callback, due); err != nil {
		return perCommand{}, err
	}
	before := meter.Report()
	table := aws.String(store.TableName(prefix, store.Timers))
	fired := 0
	for shard := range timerShards {
		ts, err := svc.Store.DueTimers(ctx, shard, time.Now())
		if err != nil {
			return perCommand{}, err
		}
		for _, t := range ts {
			expr, err := expression.NewBuilder().WithCondition(expression.Name("timer_uuid").Equal(expression.Value(t.UUID))).Build()
			if err != nil {
				return perCommand{}, err
			}
			if _, err := svc.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName: table, Key: map[string]types.AttributeValue{
					"shard_id": &types.AttributeValueMemberN{Value: strconv.Itoa(t.ShardID)}, "sort_key": &types.AttributeValueMemberS{Value: t.SortKey},
				},
				ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			}); err != nil {
				return perCommand{}, fmt.Errorf("floor: delete timer %s: %w", t.ID, err)
			}
			fired++
		}
	}
	if fired != timerFloorTimers {
		return perCommand{}, fmt.Errorf("floor: %d of %d timers due", fired, timerFloorTimers)
	}
	p := costPerCommand(meter.Report().Minus(before), fired, 1)
	maps.Copy(p.Requests, minimumTimerRequests)
	return p, nil
}
