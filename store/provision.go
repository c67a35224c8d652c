package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Provision creates every table of Tables in the stack named by prefix,
// with its indexes, stream and TTL, billed as c says, and waits until each
// is active; provisioned, it registers each table's and global index's
// reads and writes with Application Auto Scaling (ScalingTargets) through
// scaling. Tables that exist already get any missing stream or TTL
// setting, and are switched to c's billing mode if billed the other way;
// running it again changes nothing.
func Provision(ctx context.Context, db *dynamodb.Client, scaling *applicationautoscaling.Client, prefix string, c Capacity) error {
	for _, t := range Tables {
		name := TableName(prefix, t)
		if err := provisionTable(ctx, db, name, t, c); err != nil {
			return fmt.Errorf("provision table %s: %w", name, err)
		}
		if err := switchBilling(ctx, db, scaling, prefix, t, c); err != nil {
			return fmt.Errorf("switch billing of table %s: %w", name, err)
		}
	}
	for _, target := range ScalingTargets(prefix, c) {
		if err := registerScaling(ctx, scaling, target); err != nil {
			return fmt.Errorf("auto-scaling of %s %s: %w", target.ResourceID, target.Dimension, err)
		}
	}
	return nil
}

// switchBilling switches t, if it is billed otherwise, to c's billing
// mode, with the units CreateTable would give it; switched to on demand, it
// loses its auto-scaling first. (AWS allows a table four switches to on
// demand in 24 hours.)
func switchBilling(ctx context.Context, db *dynamodb.Client, scaling *applicationautoscaling.Client, prefix string, t Table, c Capacity) error {
	name := TableName(prefix, t)
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	if onDemand(desc.Table) != c.Provisioned {
		return nil
	}
	want := createTableInput(name, t, c)
	in := &dynamodb.UpdateTableInput{TableName: aws.String(name), BillingMode: want.BillingMode, ProvisionedThroughput: want.ProvisionedThroughput}
	if c.Provisioned {
		for _, ix := range want.GlobalSecondaryIndexes {
			in.GlobalSecondaryIndexUpdates = append(in.GlobalSecondaryIndexUpdates, types.GlobalSecondaryIndexUpdate{
				Update: &types.UpdateGlobalSecondaryIndexAction{IndexName: ix.IndexName, ProvisionedThroughput: ix.ProvisionedThroughput},
			})
		}
	} else {
		var scaled []ScalingTarget
		for _, target := range ScalingTargets(prefix, Capacity{Provisioned: true}) {
			if target.Table == t.Name {
				scaled = append(scaled, target)
			}
		}
		if err := removeScaling(ctx, scaling, scaled); err != nil {
			return fmt.Errorf("remove auto-scaling: %w", err)
		}
	}
	if _, err := db.UpdateTable(ctx, in); err != nil {
		return fmt.Errorf("update billing mode: %w", err)
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 200 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
		return fmt.Errorf("wait for the billing mode switch: %w", err)
	}
	return nil
}

// onDemand says d is billed on demand: such a table says so, while a
// provisioned one may say nothing (DynamoDB Local, and AWS for a table
// never switched).
func onDemand(d *types.TableDescription) bool {
	return d.BillingModeSummary != nil && d.BillingModeSummary.BillingMode == types.BillingModePayPerRequest
}

// registerScaling registers target and its target-tracking policy; both
// calls replace what is registered under the same names, so running it
// again changes nothing.
func registerScaling(ctx context.Context, scaling *applicationautoscaling.Client, target ScalingTarget) error {
	if _, err := scaling.RegisterScalableTarget(ctx, &applicationautoscaling.RegisterScalableTargetInput{
		ServiceNamespace:  aastypes.ServiceNamespaceDynamodb,
		ResourceId:        aws.String(target.ResourceID),
		ScalableDimension: target.Dimension,
		MinCapacity:       aws.Int32(target.Min),
		MaxCapacity:       aws.Int32(target.Max),
	}); err != nil {
		return fmt.Errorf("register scalable target: %w", err)
	}
	if _, err := scaling.PutScalingPolicy(ctx, &applicationautoscaling.PutScalingPolicyInput{
		PolicyName:        aws.String(target.PolicyName()),
		ServiceNamespace:  aastypes.ServiceNamespaceDynamodb,
		ResourceId:        aws.String(target.ResourceID),
		ScalableDimension: target.Dimension,
		PolicyType:        aastypes.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &aastypes.TargetTrackingScalingPolicyConfiguration{
			TargetValue:                   aws.Float64(ScaleUtilization),
			PredefinedMetricSpecification: &aastypes.PredefinedMetricSpecification{PredefinedMetricType: target.Metric},
		},
	}); err != nil {
		return fmt.Errorf("put scaling policy: %w", err)
	}
	return nil
}

func provisionTable(ctx context.Context, db *dynamodb.Client, name string, t Table, c Capacity) error {
	_, err := db.CreateTable(ctx, createTableInput(name, t, c))
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

func createTableInput(name string, t Table, c Capacity) *dynamodb.CreateTableInput {
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
	throughput := func(units Throughput) *types.ProvisionedThroughput {
		if !c.Provisioned {
			return nil
		}
		return &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(units.Read), WriteCapacityUnits: aws.Int64(units.Write)}
	}
	in := &dynamodb.CreateTableInput{
		TableName:             aws.String(name),
		BillingMode:           types.BillingModePayPerRequest,
		KeySchema:             schema(t.PartitionKey, t.SortKey),
		ProvisionedThroughput: throughput(c.table(t)),
	}
	if c.Provisioned {
		in.BillingMode = types.BillingModeProvisioned
	}
	for _, ix := range t.GlobalIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:             aws.String(ix.Name),
			KeySchema:             schema(ix.PartitionKey, ix.SortKey),
			Projection:            ix.Projection(),
			ProvisionedThroughput: throughput(c.index(t, ix)),
		})
	}
	for _, ix := range t.LocalIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(t.PartitionKey, ix.SortKey),
			Projection: ix.Projection(),
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
// until each is gone, after removing the auto-scaling Provision registered
// for those billed by provisioned units: whatever the configured mode, the
// tables' own. What is already missing is skipped, so running it again, or
// after an interrupted Provision, finishes the job.
func Deprovision(ctx context.Context, db *dynamodb.Client, scaling *applicationautoscaling.Client, prefix string) error {
	provisioned := map[string]bool{}
	var errs []error
	var deleted []string
	for _, t := range Tables {
		desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(TableName(prefix, t))})
		var missing *types.ResourceNotFoundException
		switch {
		case errors.As(err, &missing):
		case err != nil:
			// Kept, with its scaling, for a second deprovision; the
			// others go on.
			errs = append(errs, fmt.Errorf("describe table %s: %w", TableName(prefix, t), err))
		default:
			provisioned[t.Name] = !onDemand(desc.Table)
			deleted = append(deleted, TableName(prefix, t))
		}
	}
	var scaled []ScalingTarget
	for _, target := range ScalingTargets(prefix, Capacity{Provisioned: true}) {
		if provisioned[target.Table] {
			scaled = append(scaled, target)
		}
	}
	// A table whose scaling could not be removed is kept, so a second
	// deprovision finds it provisioned and finishes the job.
	if err := removeScaling(ctx, scaling, scaled); err != nil {
		return errors.Join(append(errs, fmt.Errorf("remove auto-scaling: %w", err))...)
	}
	return errors.Join(append(errs, deleteTables(ctx, db, deleted...))...)
}

// removeScaling deletes the policies and scalable targets of targets that
// are registered. Deleting a table leaves its auto-scaling registered.
// Deregistering a target deletes its policies on AWS, but not on moto, so
// they are deleted first. Each kind is listed in full before any is
// deleted, since moto's pages are offsets, which a deletion shifts; and
// only policies asked for are kept, since moto ignores PolicyNames and
// answers every policy of the namespace.
func removeScaling(ctx context.Context, scaling *applicationautoscaling.Client, targets []ScalingTarget) error {
	var policyNames, resourceIDs []string
	for _, target := range targets {
		policyNames = append(policyNames, target.PolicyName())
		if !slices.Contains(resourceIDs, target.ResourceID) {
			resourceIDs = append(resourceIDs, target.ResourceID)
		}
	}
	policies := map[string]aastypes.ScalingPolicy{}
	// Both Describe calls take at most 50 names.
	for names := range slices.Chunk(policyNames, 50) {
		pages := applicationautoscaling.NewDescribeScalingPoliciesPaginator(scaling, &applicationautoscaling.DescribeScalingPoliciesInput{
			ServiceNamespace: aastypes.ServiceNamespaceDynamodb, PolicyNames: names,
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("describe scaling policies: %w", err)
			}
			for _, p := range page.ScalingPolicies {
				if slices.Contains(names, aws.ToString(p.PolicyName)) {
					policies[aws.ToString(p.PolicyName)] = p
				}
			}
		}
	}
	for _, p := range policies {
		if _, err := scaling.DeleteScalingPolicy(ctx, &applicationautoscaling.DeleteScalingPolicyInput{
			PolicyName: p.PolicyName, ServiceNamespace: p.ServiceNamespace, ResourceId: p.ResourceId, ScalableDimension: p.ScalableDimension,
		}); err != nil {
			return fmt.Errorf("delete scaling policy %s: %w", aws.ToString(p.PolicyName), err)
		}
	}
	registered := map[string]aastypes.ScalableTarget{}
	for ids := range slices.Chunk(resourceIDs, 50) {
		pages := applicationautoscaling.NewDescribeScalableTargetsPaginator(scaling, &applicationautoscaling.DescribeScalableTargetsInput{
			ServiceNamespace: aastypes.ServiceNamespaceDynamodb, ResourceIds: ids,
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("describe scalable targets: %w", err)
			}
			for _, st := range page.ScalableTargets {
				if slices.Contains(ids, aws.ToString(st.ResourceId)) {
					registered[aws.ToString(st.ResourceId)+" "+string(st.ScalableDimension)] = st
				}
			}
		}
	}
	for _, st := range registered {
		if _, err := scaling.DeregisterScalableTarget(ctx, &applicationautoscaling.DeregisterScalableTargetInput{
			ServiceNamespace: st.ServiceNamespace, ResourceId: st.ResourceId, ScalableDimension: st.ScalableDimension,
		}); err != nil {
			return fmt.Errorf("deregister %s %s: %w", aws.ToString(st.ResourceId), st.ScalableDimension, err)
		}
	}
	return nil
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
