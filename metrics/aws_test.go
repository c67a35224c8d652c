package metrics_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/metrics"
	"transit/store"
)

// DynamoDB Local starts on first use, so the pure tests run without it;
// with TRANSIT_TEST_ENDPOINT the tests use that emulator and start none.
var (
	ddbOnce sync.Once
	ddb     *emulator.DynamoDBLocal
	ddbErr  error
	names   emulator.TestNames
)

func TestMain(m *testing.M) {
	code := m.Run()
	if ddb != nil {
		ddb.Stop()
	}
	os.Exit(code)
}

func dynamoDBURL(t *testing.T) string {
	t.Helper()
	if url := emulator.Endpoint(); url != "" {
		return url
	}
	ddbOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir, err := emulator.InstallDynamoDBLocal(ctx, emulator.DefaultCacheDir())
		if err != nil {
			ddbErr = err
			return
		}
		ddb, ddbErr = emulator.StartDynamoDBLocal(ctx, dir, os.Getenv("TRANSIT_TEST_DYNAMODB_LOG"))
	})
	require.NoError(t, ddbErr, "DynamoDB Local")
	return ddb.URL
}

// metered is a DynamoDB client at url counted by a fresh Calls, and the
// Metrics that serve its counts.
func metered(url string) (*dynamodb.Client, *metrics.Metrics) {
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	calls := metrics.NewCalls()
	calls.Attach(&cfg)
	m := metrics.New()
	m.Register(calls)
	return dynamodb.NewFromConfig(cfg), m
}

// colours is a table with a global and a local index, as transit's tables
// have.
var colours = store.Table{
	Name:          "Colours",
	PartitionKey:  store.Attribute{Name: "pk", Type: types.ScalarAttributeTypeS},
	SortKey:       store.Attribute{Name: "sk", Type: types.ScalarAttributeTypeS},
	GlobalIndexes: []store.Index{{Name: "ByColour", PartitionKey: store.Attribute{Name: "colour", Type: types.ScalarAttributeTypeS}}},
	LocalIndexes:  []store.Index{{Name: "BySize", SortKey: store.Attribute{Name: "size", Type: types.ScalarAttributeTypeS}}},
}

// What an operator reads on /metrics about DynamoDB: requests by outcome,
// the capacity of the table and of each of its indexes, the conditions
// refused (alone and in a transaction) and why a transaction was
// cancelled.
func TestCalls_count_dynamodb_requests_capacity_and_refusals(t *testing.T) {
	ctx := context.Background()
	db, m := metered(dynamoDBURL(t))
	table := names.Prefix() + "-colours"
	require.NoError(t, store.ProvisionTable(ctx, db, table, colours))
	t.Cleanup(func() { assert.NoError(t, store.DeprovisionTable(context.Background(), db, table)) })

	item := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "item"},
			"colour": &types.AttributeValueMemberS{Value: "red"}, "size": &types.AttributeValueMemberS{Value: "L"}}
	}
	absent, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	require.NoError(t, err)
	put := func(pk string) *types.Put {
		return &types.Put{TableName: aws.String(table), Item: item(pk), ConditionExpression: absent.Condition(),
			ExpressionAttributeNames: absent.Names()}
	}

	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a")})
	require.NoError(t, err)
	p := put("a")
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
		ExpressionAttributeNames: p.ExpressionAttributeNames})
	require.Error(t, err, "a is there")
	// The second item's condition fails; the first's is not the reason.
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: put("b")}, {Put: put("a")}}})
	require.Error(t, err, "a is there")
	byColour, err := expression.NewBuilder().WithKeyCondition(expression.Key("colour").Equal(expression.Value("red"))).Build()
	require.NoError(t, err)
	_, err = db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("ByColour"),
		KeyConditionExpression: byColour.KeyCondition(), ExpressionAttributeNames: byColour.Names(), ExpressionAttributeValues: byColour.Values()})
	require.NoError(t, err)

	for series, want := range map[string]float64{
		`transit_aws_requests_total{operation="PutItem",outcome="ok",service="DynamoDB"}`:                                      1,
		`transit_aws_requests_total{operation="PutItem",outcome="ConditionalCheckFailedException",service="DynamoDB"}`:         1,
		`transit_aws_requests_total{operation="TransactWriteItems",outcome="TransactionCanceledException",service="DynamoDB"}`: 1,
		`transit_aws_requests_total{operation="Query",outcome="ok",service="DynamoDB"}`:                                        1,
		`transit_dynamodb_conditional_check_failures_total{operation="PutItem",table="` + table + `"}`:                         1,
		`transit_dynamodb_conditional_check_failures_total{operation="TransactWriteItems",table="` + table + `"}`:              1,
		`transit_dynamodb_transaction_cancellations_total{reason="ConditionalCheckFailed"}`:                                    1,
		`transit_dynamodb_transaction_cancellations_total{reason="None"}`:                                                      0,
		`transit_dynamodb_consumed_capacity_units_total{index="",kind="write",table="` + table + `"}`:                          1,
		`transit_dynamodb_consumed_capacity_units_total{index="ByColour",kind="write",table="` + table + `"}`:                  1,
		`transit_dynamodb_consumed_capacity_units_total{index="BySize",kind="write",table="` + table + `"}`:                    1,
		`transit_dynamodb_consumed_capacity_units_total{index="ByColour",kind="read",table="` + table + `"}`:                   0.5,
		`transit_dynamodb_consumed_capacity_units_total{index="",kind="read",table="` + table + `"}`:                           0,
	} {
		assert.Equal(t, want, gathered(t, m)[series], series)
	}
}

// A call whose caller gave up is "canceled", one that reached nobody
// "transport": neither has an AWS error code.
func TestCalls_outcome_without_an_error_code(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	db, m := metered(nobody)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}

	_, err = db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	require.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	require.Error(t, err)

	got := gathered(t, m)
	assert.Equal(t, 1.0, got[`transit_aws_requests_total{operation="GetItem",outcome="transport",service="DynamoDB"}`])
	assert.Equal(t, 1.0, got[`transit_aws_requests_total{operation="GetItem",outcome="canceled",service="DynamoDB"}`])
}

// gathered is every counter and gauge series m serves, written as
// name{label="value",…} with labels sorted by name.
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			series := f.GetName() + "{"
			for i, l := range s.GetLabel() {
				if i > 0 {
					series += ","
				}
				series += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			series += "}"
			switch {
			case s.GetCounter() != nil:
				out[series] = s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				out[series] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}
