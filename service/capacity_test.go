package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/service"
	"transit/store"
)

// designUnits are the provisioned units, read/write, of every table and
// global index ("table/index") under TRANSIT_TABLE_CAPACITY=Tasks=50/40:
// the agent-task system's and the sandbox table's design figures, 5/5
// where a design gives none, and Tasks's override on it and its indexes.
// (The timers table's one index is local: it shares the table's units.)
var designUnits = map[string]string{
	"SandboxPool": "10/10", "SandboxPool/StatusIndex": "20/10", "SandboxPool/TrackIndex": "20/10", "SandboxPool/IdempotencyIndex": "20/10",
	"Audit": "5/5", "Audit/GlobalIndex": "5/5", "Audit/EntityIndex": "5/5", "Audit/CorrelationIndex": "5/5",
	"Layers": "5/5", "Layers/PackageStatusIndex": "5/5", "Layers/RegionStatusIndex": "5/5",
	"StreamLeases": "5/5",
	"timers":       "5/5",
	"Users":        "5/5", "Users/email-index": "5/5",
	"Orgs":     "5/5",
	"Projects": "10/5", "Projects/project-lookup": "10/5",
	"Settings": "5/5",
	"Secrets":  "5/5",
	"Agents":   "10/20", "Agents/status-index": "10/20",
	"Tasks": "50/40", "Tasks/project-tasks": "50/40", "Tasks/agent-tasks": "50/40", "Tasks/state-queue": "50/40",
	"Queue": "20/20", "Queue/lease-expiry": "20/20", "Queue/ready-index": "20/20",
	"TaskEvents":    "50/50",
	"Logs":          "100/100",
	"Notifications": "20/20", "Notifications/user-notifications": "20/20",
	"NucleusAppTable": "5/5", "NucleusAppTable/GSI1": "5/5",
	"NucleusAuditTable": "5/5", "NucleusAuditTable/GSI1": "5/5",
}

// TestProvision_provisioned_capacity: with TRANSIT_CAPACITY=provisioned
// every table and global index is created PROVISIONED with its design
// figures (Tasks overridden), each one's reads and writes are registered
// for auto-scaling at 70 % between the figure and ten times it, a second
// provision changes none of it, the CloudFormation export in the same
// mode describes exactly that, and deprovision removes the auto-scaling.
func TestProvision_provisioned_capacity(t *testing.T) {
	ctx := context.Background()
	prefix := names.Prefix()
	cfg := testConfig(prefix, "")
	cfg.Capacity = config.CapacityProvisioned
	cfg.TableCapacity = "Tasks=50/40"
	svc, out := cfnTemplateOf(t, cfg)
	t.Cleanup(func() { removeStack(t, svc) })
	require.NoError(t, svc.Provision(ctx))

	units := provisionedUnits(t, svc.DynamoDB, prefix)
	assert.Equal(t, designUnits, units, "units: design (-) vs DescribeTable (+)")
	targets, policies := autoScaling(t, svc, prefix)
	wantTargets, wantPolicies := designScaling(t)
	assert.Equal(t, wantTargets, targets, "scalable targets: want (-) vs registered (+)")
	assert.Equal(t, wantPolicies, policies, "scaling policies: want (-) vs registered (+)")

	require.NoError(t, svc.Provision(ctx), "a second provision")
	assert.Equal(t, units, provisionedUnits(t, svc.DynamoDB, prefix), "units after a second provision")
	againTargets, againPolicies := autoScaling(t, svc, prefix)
	assert.Equal(t, targets, againTargets, "scalable targets after a second provision")
	assert.Equal(t, policies, againPolicies, "scaling policies after a second provision")

	tmpl := parseTemplate(t, out)
	assert.Equal(t, tmpl.describe(t).tables, describeEmulator(t, svc, prefix).tables, "tables: template (-) vs provisioned (+)")
	tmplTargets, tmplPolicies := tmpl.autoScaling(t)
	assert.Equal(t, targets, tmplTargets, "scalable targets: registered (-) vs template (+)")
	assert.Equal(t, policies, tmplPolicies, "scaling policies: registered (-) vs template (+)")

	// A changed figure on a provisioned table moves its auto-scaling's
	// bounds, not its current units (auto-scaling owns those).
	svc.Config.TableCapacity = "Tasks=80/60"
	require.NoError(t, svc.Provision(ctx), "a provision with a changed figure")
	assert.Equal(t, units, provisionedUnits(t, svc.DynamoDB, prefix), "units after a changed figure")
	changed, _ := autoScaling(t, svc, prefix)
	for _, k := range []string{"Tasks Read", "Tasks/state-queue Read"} {
		assert.Equal(t, "80-800", changed[k], k)
	}
	for _, k := range []string{"Tasks Write", "Tasks/agent-tasks Write"} {
		assert.Equal(t, "60-600", changed[k], k)
	}
	assert.Equal(t, targets["Logs Read"], changed["Logs Read"], "another table's bounds")

	// Deleting a table leaves its auto-scaling registered: deprovision
	// removes it.
	require.NoError(t, svc.Deprovision(ctx))
	targets, policies = autoScaling(t, svc, prefix)
	assert.Empty(t, targets, "scalable targets after deprovision")
	assert.Empty(t, policies, "scaling policies after deprovision")
}

// TestProvision_switches_capacity_mode: provisioning an on-demand stack
// again in provisioned mode switches its tables to their units and
// registers their auto-scaling; back on demand, the tables are
// PAY_PER_REQUEST again and the auto-scaling is gone.
func TestProvision_switches_capacity_mode(t *testing.T) {
	ctx := context.Background()
	prefix := names.Prefix()
	svc, err := service.New(ctx, testConfig(prefix, ""))
	require.NoError(t, err)
	t.Cleanup(func() { removeStack(t, svc) })
	require.NoError(t, svc.Provision(ctx))

	svc.Config.Capacity, svc.Config.TableCapacity = config.CapacityProvisioned, "Tasks=50/40"
	require.NoError(t, svc.Provision(ctx))
	assert.Equal(t, designUnits, provisionedUnits(t, svc.DynamoDB, prefix), "units: design (-) vs DescribeTable (+)")
	wantTargets, wantPolicies := designScaling(t)
	targets, policies := autoScaling(t, svc, prefix)
	assert.Equal(t, wantTargets, targets, "scalable targets: want (-) vs registered (+)")
	assert.Equal(t, wantPolicies, policies, "scaling policies: want (-) vs registered (+)")

	svc.Config.Capacity, svc.Config.TableCapacity = config.CapacityOnDemand, ""
	require.NoError(t, svc.Provision(ctx))
	for _, tb := range store.Tables {
		d, err := svc.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(store.TableName(prefix, tb))})
		require.NoError(t, err)
		require.NotNil(t, d.Table.BillingModeSummary, tb.Name)
		assert.Equal(t, types.BillingModePayPerRequest, d.Table.BillingModeSummary.BillingMode, tb.Name)
	}
	targets, policies = autoScaling(t, svc, prefix)
	assert.Empty(t, targets, "scalable targets on demand")
	assert.Empty(t, policies, "scaling policies on demand")
}

// designScaling is the auto-scaling designUnits call for, as autoScaling
// reads it.
func designScaling(t *testing.T) (targets, policies map[string]string) {
	t.Helper()
	targets, policies = map[string]string{}, map[string]string{}
	for resource, rw := range designUnits {
		var read, write int
		_, err := fmt.Sscanf(rw, "%d/%d", &read, &write)
		require.NoError(t, err)
		for _, x := range []struct {
			dim    string
			units  int
			metric string
		}{{"Read", read, "DynamoDBReadCapacityUtilization"}, {"Write", write, "DynamoDBWriteCapacityUtilization"}} {
			key := resource + " " + x.dim
			targets[key] = fmt.Sprintf("%d-%d", x.units, 10*x.units)
			policies[key] = x.metric + " at 70"
		}
	}
	return targets, policies
}

// TestCloudFormation_on_demand_has_no_units: on demand (the default), the
// template's tables are PAY_PER_REQUEST with no units and no auto-scaling.
func TestCloudFormation_on_demand_has_no_units(t *testing.T) {
	_, out := cfnTemplate(t, "transit")
	tmpl := parseTemplate(t, out)
	for id, r := range tmpl.Resources {
		assert.NotContains(t, r.Type, "ApplicationAutoScaling", id)
		if r.Type != "AWS::DynamoDB::Table" {
			continue
		}
		assert.Equal(t, "PAY_PER_REQUEST", r.Properties["BillingMode"], id)
		assert.NotContains(t, r.Properties, "ProvisionedThroughput", id)
		ixs, _ := r.Properties["GlobalSecondaryIndexes"].([]any)
		for _, ix := range ixs {
			assert.NotContains(t, ix, "ProvisionedThroughput", id)
		}
	}
}

// provisionedUnits reads every table's and global index's units, as
// "read/write" by "table" and "table/index" (names without the prefix),
// failing on a table that is not PROVISIONED.
func provisionedUnits(t *testing.T, db *dynamodb.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	units := func(pt *types.ProvisionedThroughputDescription) string {
		if pt == nil {
			return "none"
		}
		return fmt.Sprintf("%d/%d", aws.ToInt64(pt.ReadCapacityUnits), aws.ToInt64(pt.WriteCapacityUnits))
	}
	tables := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for tables.HasMorePages() {
		page, err := tables.NextPage(ctx)
		require.NoError(t, err)
		for _, name := range page.TableNames {
			short, mine := strings.CutPrefix(name, prefix+"-")
			if !mine {
				continue
			}
			d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			require.NoError(t, err)
			// DynamoDB Local leaves the summary out of a provisioned table.
			if s := d.Table.BillingModeSummary; s != nil {
				assert.Equal(t, types.BillingModeProvisioned, s.BillingMode, name)
			}
			out[short] = units(d.Table.ProvisionedThroughput)
			for _, ix := range d.Table.GlobalSecondaryIndexes {
				out[short+"/"+aws.ToString(ix.IndexName)] = units(ix.ProvisionedThroughput)
			}
		}
	}
	return out
}

// autoScaling reads the stack's scalable targets, as "min-max", and their
// policies, as "metric at target", by "table[/index] Read|Write".
func autoScaling(t *testing.T, svc *service.Service, prefix string) (targets, policies map[string]string) {
	t.Helper()
	ctx := context.Background()
	targets, policies = map[string]string{}, map[string]string{}
	key := func(resourceID string, dim aastypes.ScalableDimension) (string, bool) {
		rest, mine := strings.CutPrefix(resourceID, "table/"+prefix+"-")
		rw := "Read"
		if strings.HasSuffix(string(dim), "WriteCapacityUnits") {
			rw = "Write"
		}
		return strings.Replace(rest, "/index/", "/", 1) + " " + rw, mine
	}
	pages := applicationautoscaling.NewDescribeScalableTargetsPaginator(svc.AutoScaling, &applicationautoscaling.DescribeScalableTargetsInput{ServiceNamespace: aastypes.ServiceNamespaceDynamodb})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		require.NoError(t, err)
		for _, st := range page.ScalableTargets {
			if k, mine := key(aws.ToString(st.ResourceId), st.ScalableDimension); mine {
				targets[k] = fmt.Sprintf("%d-%d", aws.ToInt32(st.MinCapacity), aws.ToInt32(st.MaxCapacity))
			}
		}
	}
	ppages := applicationautoscaling.NewDescribeScalingPoliciesPaginator(svc.AutoScaling, &applicationautoscaling.DescribeScalingPoliciesInput{ServiceNamespace: aastypes.ServiceNamespaceDynamodb})
	for ppages.HasMorePages() {
		page, err := ppages.NextPage(ctx)
		require.NoError(t, err)
		for _, p := range page.ScalingPolicies {
			k, mine := key(aws.ToString(p.ResourceId), p.ScalableDimension)
			if !mine {
				continue
			}
			assert.Equal(t, aastypes.PolicyTypeTargetTrackingScaling, p.PolicyType, k)
			c := p.TargetTrackingScalingPolicyConfiguration
			require.NotNil(t, c, k)
			require.NotNil(t, c.PredefinedMetricSpecification, k)
			policies[k] = fmt.Sprintf("%s at %g", c.PredefinedMetricSpecification.PredefinedMetricType, aws.ToFloat64(c.TargetValue))
		}
	}
	return targets, policies
}

// autoScaling reads the template's scalable targets and policies as the
// function of that name reads the emulator's.
func (tp *template) autoScaling(t *testing.T) (targets, policies map[string]string) {
	t.Helper()
	targets, policies = map[string]string{}, map[string]string{}
	key := func(p map[string]any) string {
		rest, mine := strings.CutPrefix(tp.str(t, p["ResourceId"]), "table/"+tp.prefix+"-")
		require.True(t, mine, "resource %v outside the stack", p["ResourceId"])
		rw := "Read"
		if strings.HasSuffix(p["ScalableDimension"].(string), "WriteCapacityUnits") {
			rw = "Write"
		}
		return strings.Replace(rest, "/index/", "/", 1) + " " + rw
	}
	for _, r := range tp.Resources {
		if r.Type != "AWS::ApplicationAutoScaling::ScalableTarget" {
			continue
		}
		assert.Equal(t, "dynamodb", r.Properties["ServiceNamespace"])
		targets[key(r.Properties)] = fmt.Sprintf("%v-%v", r.Properties["MinCapacity"], r.Properties["MaxCapacity"])
	}
	for id, r := range tp.Resources {
		if r.Type != "AWS::ApplicationAutoScaling::ScalingPolicy" {
			continue
		}
		assert.Equal(t, "TargetTrackingScaling", r.Properties["PolicyType"], id)
		targetID := r.Properties["ScalingTargetId"].(map[string]any)["Ref"].(string)
		target, ok := tp.Resources[targetID]
		require.True(t, ok, "%s: no scalable target %s", id, targetID)
		c := r.Properties["TargetTrackingScalingPolicyConfiguration"].(map[string]any)
		metric := c["PredefinedMetricSpecification"].(map[string]any)["PredefinedMetricType"]
		policies[key(target.Properties)] = fmt.Sprintf("%s at %v", metric, c["TargetValue"])
	}
	return targets, policies
}
