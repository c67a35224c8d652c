package metrics

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"transit/internal/awscall"
)

// Calls counts the AWS calls made by the clients of the aws.Config it is
// attached to: requests by outcome, DynamoDB capacity by table and index,
// the conditions DynamoDB refused and the transactions it cancelled. One
// counts a whole process's calls (service.New attaches it); each Serve's
// Metrics registers it.
type Calls struct {
	requests      *prometheus.CounterVec
	capacity      *prometheus.CounterVec
	conditions    *prometheus.CounterVec
	cancellations *prometheus.CounterVec
}

// NewCalls returns the counters, not yet attached.
func NewCalls() *Calls {
	return &Calls{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_aws_requests_total",
			Help: "AWS calls as each ended, SDK retries included in the one call, by the SDK's service ID, operation and outcome: ok, the AWS error code, canceled (the caller's context ended) or transport (no error code: the network or the SDK failed it)."},
			[]string{"service", "operation", "outcome"}),
		capacity: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_dynamodb_consumed_capacity_units_total",
			Help: `DynamoDB capacity units consumed, as DynamoDB reported them, by table and index (index="" for the table itself) and kind (read or write).`},
			[]string{"table", "index", "kind"}),
		conditions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_dynamodb_conditional_check_failures_total",
			Help: "DynamoDB writes refused by their condition, by table and operation; in a transaction, each item whose condition failed."},
			[]string{"table", "operation"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transit_dynamodb_transaction_cancellations_total",
			Help: "Reasons DynamoDB gave for cancelling write transactions, one per item that was not None (ConditionalCheckFailed, TransactionConflict, …)."},
			[]string{"reason"}),
	}
}

// Attach makes the clients built from cfg afterwards count through c,
// DynamoDB's reporting the capacity of every call.
func (c *Calls) Attach(cfg *aws.Config) { awscall.Attach(cfg, "transit.metrics", c.record) }

// Describe and Collect make c a prometheus.Collector.
func (c *Calls) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
}

func (c *Calls) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
}

func (c *Calls) vecs() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{c.requests, c.capacity, c.conditions, c.cancellations}
}

func (c *Calls) record(call awscall.Call) {
	c.requests.WithLabelValues(call.Service, call.Operation, outcome(call.Err)).Inc()
	kind := "read"
	if call.Write {
		kind = "write"
	}
	for _, sh := range call.Shares() {
		c.capacity.WithLabelValues(sh.Table, sh.Index, kind).Add(sh.Units)
	}
	var (
		refused  *types.ConditionalCheckFailedException
		canceled *types.TransactionCanceledException
	)
	switch {
	case errors.As(call.Err, &refused):
		c.conditions.WithLabelValues(tableOf(call.Input), call.Operation).Inc()
	case errors.As(call.Err, &canceled):
		var items []types.TransactWriteItem
		if in, ok := call.Input.(*dynamodb.TransactWriteItemsInput); ok {
			items = in.TransactItems
		}
		// Reasons are in the order of the transaction's items.
		for i, r := range canceled.CancellationReasons {
			code := aws.ToString(r.Code)
			if code == "" || code == "None" {
				continue
			}
			c.cancellations.WithLabelValues(code).Inc()
			if code == "ConditionalCheckFailed" && i < len(items) {
				c.conditions.WithLabelValues(itemTable(items[i]), call.Operation).Inc()
			}
		}
	}
}

// outcome is a call's outcome label: a bounded set, since AWS's error
// codes are.
func outcome(err error) string {
	var api smithy.APIError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &api) && api.ErrorCode() != "":
		return api.ErrorCode()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "transport"
}

// tableOf is the table a single-item write names.
func tableOf(input any) string {
	switch in := input.(type) {
	case *dynamodb.PutItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.UpdateItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.DeleteItemInput:
		return aws.ToString(in.TableName)
	}
	return ""
}

// itemTable is the table a transaction's item names.
func itemTable(item types.TransactWriteItem) string {
	switch {
	case item.ConditionCheck != nil:
		return aws.ToString(item.ConditionCheck.TableName)
	case item.Put != nil:
		return aws.ToString(item.Put.TableName)
	case item.Update != nil:
		return aws.ToString(item.Update.TableName)
	case item.Delete != nil:
		return aws.ToString(item.Delete.TableName)
	}
	return ""
}
