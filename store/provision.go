package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Provision creates every table of Tables in the stack named by prefix,
// with its indexes, stream and TTL, and waits until each is active. Tables
// that exist already get any missing stream or TTL setting; running it
// again changes nothing.
func Provision(ctx context.Context, db *dynamodb.Client, prefix string) error {
	for _, t := range Tables {
		if err := provisionTable(ctx, db, TableName(prefix, t), t); err != nil {
			return fmt.Errorf("provision table %s: %w", TableName(prefix, t), err)
		}
	}
	return nil
}

func provisionTable(ctx context.Context, db *dynamodb.Client, name string, t Table) error {
	_, err := db.CreateTable(ctx, createTableInput(name, t))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return err
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 200 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
		return err
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return err
	}
	if spec := desc.Table.StreamSpecification; t.Stream != "" && (spec == nil || !aws.ToBool(spec.StreamEnabled)) {
		if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:           aws.String(name),
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: t.Stream},
		}); err != nil {
			return fmt.Errorf("enable stream: %w", err)
		}
		// The table is UPDATING until the stream is on; AWS refuses the
		// TTL change meanwhile.
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
			return err
		}
	}
	if t.TTLAttribute == "" {
		return nil
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe TTL: %w", err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == t.TTLAttribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", t.TTLAttribute, err)
	}
	return nil
}

func createTableInput(name string, t Table) *dynamodb.CreateTableInput {
	attrs := map[string]types.ScalarAttributeType{}
	define := func(a Attribute) {
		if a.Name != "" {
			attrs[a.Name] = a.Type
		}
	}
	schema := func(pk, sk Attribute) []types.KeySchemaElement {
		define(pk)
		ks := []types.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: types.KeyTypeHash}}
		if sk.Name != "" {
			define(sk)
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(sk.Name), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   schema(t.PartitionKey, t.SortKey),
	}
	for _, ix := range t.GlobalIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	for _, ix := range t.LocalIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(t.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	if t.Stream != "" {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: t.Stream}
	}
	for n, typ := range attrs {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: typ})
	}
	return in
}

// Deprovision deletes every table of Tables in the stack named by prefix —
// the list Provision reads, so nothing it creates is forgotten — and waits
// until each is gone. A table already missing is skipped, so running it
// again, or after an interrupted Provision, finishes the job.
func Deprovision(ctx context.Context, db *dynamodb.Client, prefix string) error {
	return deleteTables(ctx, db, TableNames(prefix)...)
}

// DeprovisionTable deletes one table and waits until it is gone; the
// counterpart of ProvisionTable.
func DeprovisionTable(ctx context.Context, db *dynamodb.Client, name string) error {
	return deleteTables(ctx, db, name)
}

// deleteTables asks for every deletion first and only then waits, so the
// tables are deleted side by side where deletion takes time (AWS).
func deleteTables(ctx context.Context, db *dynamodb.Client, names ...string) error {
	var errs []error
	var deleting []string
	for _, name := range names {
		_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var missing *types.ResourceNotFoundException
		switch {
		case errors.As(err, &missing):
		case err != nil:
			errs = append(errs, fmt.Errorf("delete table %s: %w", name, err))
		default:
			deleting = append(deleting, name)
		}
	}
	waiter := dynamodb.NewTableNotExistsWaiter(db, func(o *dynamodb.TableNotExistsWaiterOptions) { o.MinDelay = 200 * time.Millisecond })
	for _, name := range deleting {
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
			errs = append(errs, fmt.Errorf("wait for table %s to be deleted: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
