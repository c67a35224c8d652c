package streams_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/store"
	"transit/streams"
)

// The emulators start on first use, once for the package, so the unit
// tests run without them; TestMain stops whatever was started. With
// TRANSIT_TEST_ENDPOINT the tests use that emulator instead and start none.
var (
	ddbLocalOnce sync.Once
	ddbLocal     *emulator.DynamoDBLocal
	ddbLocalErr  error
	motoOnce     sync.Once
	motoServer   *emulator.Moto
	motoErr      error
)

// names hands out the prefixes of the tables the tests create.
var names emulator.TestNames

func TestMain(m *testing.M) {
	if url := emulator.Endpoint(); url != "" {
		if _, err := emulator.Probe(context.Background(), url); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", emulator.EndpointVariable, err)
			os.Exit(1)
		}
		emulators = []backend{{Name: "endpoint", URL: func(*testing.T) string { return url }}}
	}
	code := m.Run()
	// Every test deletes the tables it made; one left would stay on a
	// user's emulator.
	var urls []string
	switch {
	case emulator.Endpoint() != "":
		urls = append(urls, emulator.Endpoint())
	default:
		if ddbLocal != nil {
			urls = append(urls, ddbLocal.URL)
		}
		if motoServer != nil {
			urls = append(urls, motoServer.URL)
		}
	}
	for _, url := range urls {
		db, _ := clients(url)
		left, err := names.LeftoverTables(context.Background(), db)
		if err == nil && len(left) > 0 {
			err = fmt.Errorf("the tests left %d tables behind:\n  %s", len(left), strings.Join(left, "\n  "))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "check for leftovers on %s: %v\n", url, err)
			code = max(code, 1)
		}
	}
	if ddbLocal != nil {
		ddbLocal.Stop()
	}
	if motoServer != nil {
		motoServer.Stop()
	}
	os.Exit(code)
}

func dynamoDBLocalURL(t *testing.T) string {
	t.Helper()
	ddbLocalOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir, err := emulator.InstallDynamoDBLocal(ctx, emulator.DefaultCacheDir())
		if err != nil {
			ddbLocalErr = err
			return
		}
		ddbLocal, ddbLocalErr = emulator.StartDynamoDBLocal(ctx, dir, os.Getenv("TRANSIT_TEST_DYNAMODB_LOG"))
	})
	require.NoError(t, ddbLocalErr, "DynamoDB Local")
	return ddbLocal.URL
}

func motoURL(t *testing.T) string {
	t.Helper()
	motoOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		motoServer, motoErr = emulator.StartMoto(ctx, os.Getenv("TRANSIT_TEST_MOTO_LOG"))
	})
	require.NoError(t, motoErr, "moto server")
	return motoServer.URL
}

// backend is one DynamoDB the integration tests run against.
type backend struct {
	Name string
	URL  func(*testing.T) string
}

// emulators are the backends every integration test runs against, in the
// same way (one suite, every implementation): both emulators, or the
// user's own (TRANSIT_TEST_ENDPOINT).
var emulators = []backend{
	{Name: "dynamodb_local", URL: dynamoDBLocalURL},
	{Name: "moto", URL: motoURL},
}

func clients(url string) (*dynamodb.Client, *dynamodbstreams.Client) {
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds})
	st := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds})
	return db, st
}

// itemsTable is a table like transit's own: pk/sk strings and a stream
// with both images.
var itemsTable = store.Table{
	Name:         "Items",
	PartitionKey: store.Attribute{Name: "pk", Type: types.ScalarAttributeTypeS},
	SortKey:      store.Attribute{Name: "sk", Type: types.ScalarAttributeTypeS},
	Stream:       types.StreamViewTypeNewAndOldImages,
}

// provision creates a fresh items table and lease table, named under a
// test prefix, and deletes them when the test ends.
func provision(t *testing.T, db *dynamodb.Client) (table, leases string) {
	t.Helper()
	ctx := context.Background()
	prefix := names.Prefix()
	table, leases = prefix+"-items", prefix+"-leases"
	// Registered before creating, so a table made before a failure goes
	// too; it runs after the test's subscribers have closed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		assert.NoError(t, store.DeprovisionTable(ctx, db, table))
		assert.NoError(t, store.DeprovisionTable(ctx, db, leases))
	})
	require.NoError(t, store.ProvisionTable(ctx, db, table, itemsTable))
	require.NoError(t, store.ProvisionTable(ctx, db, leases, store.StreamLeases))
	return table, leases
}

// emulatorConfig reads through the real clients and lease store, with
// intervals short enough for tests.
func emulatorConfig(db *dynamodb.Client, st *dynamodbstreams.Client, leases, group, owner string) streams.SubscriberConfig {
	return streams.SubscriberConfig{
		Tables:            db,
		Streams:           st,
		Leases:            streams.NewDynamoDBLeaseStore(db, leases),
		ConsumerGroup:     group,
		OwnerID:           owner,
		LeaseDuration:     4 * time.Second,
		RenewInterval:     time.Second,
		DiscoveryInterval: time.Second,
		PollInterval:      20 * time.Millisecond,
		NackBackoff:       20 * time.Millisecond,
		MaxNackBackoff:    100 * time.Millisecond,
		CloseTimeout:      5 * time.Second,
	}
}
