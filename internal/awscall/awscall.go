// Package awscall reports every AWS call the clients built from an
// aws.Config make, once each call has finished (retries included): its
// service, operation and error, and for DynamoDB the capacity it
// consumed, which it asks DynamoDB to return, indexes included, on every
// call. transit's metrics and the benchmark's metering both count through
// it.
package awscall

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Call is one finished AWS call.
type Call struct {
	// Service is the SDK's service ID ("DynamoDB", "SQS", "SNS") and
	// Operation the API operation ("TransactWriteItems").
	Service, Operation string
	// Input is the operation's input (a *dynamodb.PutItemInput, say).
	Input any
	// Err is the call's error; nil when it succeeded.
	Err error
	// Capacity is the DynamoDB capacity the call consumed, one entry per
	// table with its indexes' shares, as DynamoDB returned it; empty for
	// other services and for a call that failed.
	Capacity []types.ConsumedCapacity
	// Write says Capacity is write capacity (a put, update, delete or
	// write transaction); otherwise it is read capacity.
	Write bool
}

// Attach makes every client built from cfg afterwards report each call it
// finishes to report, and ask DynamoDB for the consumed capacity of every
// call, by table and index. id names the attachment: each of several
// (the metrics, the benchmark's meter) needs its own.
func Attach(cfg *aws.Config, id string, report func(Call)) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				askCapacity(in.Parameters)
				out, md, err := next.HandleInitialize(ctx, in)
				c := Call{Service: awsmiddleware.GetServiceID(ctx), Operation: awsmiddleware.GetOperationName(ctx), Input: in.Parameters, Err: err}
				c.Capacity, c.Write = consumed(out.Result)
				report(c)
				return out, md, err
			}), middleware.After)
	})
}

// askCapacity asks for the capacity of every DynamoDB operation that can
// return it.
func askCapacity(params any) {
	const all = types.ReturnConsumedCapacityIndexes
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.ScanInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.TransactGetItemsInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = all
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = all
	}
}

// consumed is the capacity a DynamoDB operation's output reports, and
// whether it is write capacity.
func consumed(result any) (capacity []types.ConsumedCapacity, write bool) {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		return one(out.ConsumedCapacity), false
	case *dynamodb.BatchGetItemOutput:
		return out.ConsumedCapacity, false
	case *dynamodb.QueryOutput:
		return one(out.ConsumedCapacity), false
	case *dynamodb.ScanOutput:
		return one(out.ConsumedCapacity), false
	case *dynamodb.TransactGetItemsOutput:
		return out.ConsumedCapacity, false
	case *dynamodb.PutItemOutput:
		return one(out.ConsumedCapacity), true
	case *dynamodb.UpdateItemOutput:
		return one(out.ConsumedCapacity), true
	case *dynamodb.DeleteItemOutput:
		return one(out.ConsumedCapacity), true
	case *dynamodb.BatchWriteItemOutput:
		return out.ConsumedCapacity, true
	case *dynamodb.TransactWriteItemsOutput:
		return out.ConsumedCapacity, true
	}
	return nil, false
}

// Share is a table's own or one of its indexes' part of the capacity a
// call consumed. Index is empty for the table's own.
type Share struct {
	Table, Index string
	Units        float64
}

// Shares splits c's capacity by table and index: each index's share, and
// the table's own (what is left of the total when DynamoDB gives no
// breakdown). Shares of no units are left out.
func (c Call) Shares() []Share {
	var shares []Share
	for _, cc := range c.Capacity {
		table := aws.ToString(cc.TableName)
		own := aws.ToFloat64(cc.CapacityUnits)
		for _, indexes := range []map[string]types.Capacity{cc.GlobalSecondaryIndexes, cc.LocalSecondaryIndexes} {
			for name, ic := range indexes {
				units := aws.ToFloat64(ic.CapacityUnits)
				own -= units
				if units > 0 {
					shares = append(shares, Share{Table: table, Index: name, Units: units})
				}
			}
		}
		if cc.Table != nil {
			own = aws.ToFloat64(cc.Table.CapacityUnits)
		}
		if own > 0 {
			shares = append(shares, Share{Table: table, Units: own})
		}
	}
	return shares
}
