package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/handlers"
	"transit/messages"
	"transit/provider"
	"transit/service"
	"transit/store"
)

// The Nucleus tests act on resources moto runs in its default account,
// through a role of that account.
const (
	nucleusAccount = "123456789012"
	nucleusRole    = "arn:aws:iam::123456789012:role/nucleus-scheduler"
)

// cloud creates the resources a schedule targets, on moto, and reads
// their state back.
type cloud struct {
	t   *testing.T
	ec2 *ec2.Client
	rds *rds.Client
	ecs *ecs.Client
}

func (s *stack) cloud() *cloud {
	return &cloud{t: s.t, ec2: ec2.NewFromConfig(s.svc.AWS), rds: rds.NewFromConfig(s.svc.AWS), ecs: ecs.NewFromConfig(s.svc.AWS)}
}

func (c *cloud) instances(n int) []string {
	ctx := context.Background()
	out, err := c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(int32(n)), MaxCount: aws.Int32(int32(n))})
	require.NoError(c.t, err)
	var arns []string
	for _, i := range out.Instances {
		id := aws.ToString(i.InstanceId)
		arns = append(arns, "arn:aws:ec2:us-east-1:"+nucleusAccount+":instance/"+id)
		c.t.Cleanup(func() {
			_, _ = c.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		})
	}
	return arns
}

func (c *cloud) instanceState(arn string) ec2types.InstanceStateName {
	id := arn[strings.LastIndex(arn, "/")+1:]
	out, err := c.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(c.t, err)
	return out.Reservations[0].Instances[0].State.Name
}

func (c *cloud) database(name string) string {
	ctx := context.Background()
	_, err := c.rds.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{
		DBInstanceIdentifier: aws.String(name), DBInstanceClass: aws.String("db.t3.micro"), Engine: aws.String("postgres"),
		AllocatedStorage: aws.Int32(20), MasterUsername: aws.String("transit"), MasterUserPassword: aws.String("not-a-secret-1"),
	})
	require.NoError(c.t, err)
	c.t.Cleanup(func() {
		_, _ = c.rds.DeleteDBInstance(context.Background(), &rds.DeleteDBInstanceInput{DBInstanceIdentifier: aws.String(name), SkipFinalSnapshot: aws.Bool(true)})
	})
	return "arn:aws:rds:us-east-1:" + nucleusAccount + ":db:" + name
}

func (c *cloud) databaseStatus(name string) string {
	out, err := c.rds.DescribeDBInstances(context.Background(), &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(name)})
	require.NoError(c.t, err)
	return aws.ToString(out.DBInstances[0].DBInstanceStatus)
}

func (c *cloud) service(cluster, name string, desired int32) string {
	ctx := context.Background()
	_, err := c.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)})
	require.NoError(c.t, err)
	task, err := c.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family:               aws.String(name),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("nginx"), Memory: aws.Int32(128)}},
	})
	require.NoError(c.t, err)
	_, err = c.ecs.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String(cluster), ServiceName: aws.String(name),
		TaskDefinition: task.TaskDefinition.TaskDefinitionArn, DesiredCount: aws.Int32(desired)})
	require.NoError(c.t, err)
	c.t.Cleanup(func() {
		ctx := context.Background()
		_, _ = c.ecs.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String(cluster), Service: aws.String(name), Force: aws.Bool(true)})
		_, _ = c.ecs.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(cluster)})
	})
	return "arn:aws:ecs:us-east-1:" + nucleusAccount + ":service/" + cluster + "/" + name
}

func (c *cloud) desiredCount(cluster, name string) int32 {
	out, err := c.ecs.DescribeServices(context.Background(), &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: []string{name}})
	require.NoError(c.t, err)
	return out.Services[0].DesiredCount
}

// nucleusRejected sends a Nucleus command and returns its rejection.
func (s *stack) nucleusRejected(t messages.Type, payload any) messages.NucleusRejectedPayload {
	s.t.Helper()
	rej := payloadOf[messages.NucleusRejectedPayload](s.t, s.apply(t, payload, messages.NucleusRejected))
	assert.Equal(s.t, t, rej.Command)
	return rej
}

// account registers the moto account and tests it.
func (s *stack) account(name string) {
	s.t.Helper()
	s.apply(messages.AccountRegister, messages.AccountRegisterPayload{AccountID: nucleusAccount, AccountName: name,
		RoleARN: nucleusRole, UserID: "u-ops"}, messages.AccountRegistered)
	tested := payloadOf[messages.AccountTestedPayload](s.t, s.apply(messages.AccountTest,
		messages.AccountTestPayload{AccountID: nucleusAccount, UserID: "u-ops"}, messages.AccountTested))
	require.Equal(s.t, messages.AccountActive, tested.Status, tested.Error)
	assert.Contains(s.t, tested.Identity, "nucleus-scheduler", "the identity is the assumed role")
}

// schedule upserts an enabled weekday schedule and attaches resources.
func (s *stack) schedule(id string, arns ...string) store.Schedule {
	s.t.Helper()
	s.apply(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: id, ScheduleName: "Dev " + id,
		StartCron: "0 8 * * 1-5", EndCron: "0 19 * * 1-5", Timezone: "Europe/Berlin", UserID: "u-ops"}, messages.ScheduleUpserted)
	for _, arn := range arns {
		s.apply(messages.ResourceAttach, messages.ResourcePayload{ScheduleID: id, ResourceARN: arn, UserID: "u-ops"}, messages.ResourceAttached)
	}
	sch, resources, found, err := s.svc.Store.GetSchedule(context.Background(), id)
	require.NoError(s.t, err)
	require.True(s.t, found)
	require.Len(s.t, resources, len(arns))
	return sch
}

// window delivers a schedule's armed window as its timer would, n times
// under one command ID, and returns the window's event.
func (s *stack) window(id, edge, at string, n int) messages.WindowExecutedPayload {
	s.t.Helper()
	cmd := uuid.NewString()
	for range n {
		s.send(cmd, messages.ScheduleWindowDue, messages.ScheduleWindowPayload{ScheduleID: id, Edge: edge, WindowAt: at})
	}
	events := s.collect(60*time.Second, func(evs []service.TapEvent) bool {
		return countType(causedBy(evs, cmd), messages.ScheduleWindowExecuted) >= n
	})
	var first messages.WindowExecutedPayload
	for i, ev := range causedBy(events, cmd) {
		if ev.Envelope.Type != messages.ScheduleWindowExecuted {
			continue
		}
		p := payloadOf[messages.WindowExecutedPayload](s.t, ev)
		if i == 0 {
			first = p
		}
		assert.Equal(s.t, first, p, "every delivery reports the same window")
		assert.Equal(s.t, messages.DerivedID(cmd, messages.ScheduleWindowExecuted, ""), ev.MessageID)
	}
	return first
}

func countType(events []service.TapEvent, t messages.Type) int {
	n := 0
	for _, e := range events {
		if e.Envelope.Type == t {
			n++
		}
	}
	return n
}

// executions are the EXECUTE entries of a schedule's audit trail, by
// resource ARN.
func (s *stack) executions(id string) map[string][]store.AuditRecord {
	s.t.Helper()
	page, err := s.svc.Store.EntityHistory(context.Background(), "SCHEDULE#"+id, 1000, "")
	require.NoError(s.t, err)
	byARN := map[string][]store.AuditRecord{}
	for _, r := range page.Items {
		if r.Action != store.ActionExecute {
			continue
		}
		var d map[string]string
		require.NoError(s.t, json.Unmarshal([]byte(r.Details), &d))
		byARN[d["resource_arn"]] = append(byARN[d["resource_arn"]], r)
	}
	return byARN
}

func byResource(results []messages.ExecutionResult) map[string]messages.ExecutionResult {
	m := map[string]messages.ExecutionResult{}
	for _, r := range results {
		m[r.ResourceARN] = r
	}
	return m
}

// TestNucleus_windows_stop_and_start_every_resource_once: a schedule
// with two EC2 instances, an RDS instance and an ECS service stops them
// all at its stop window and starts them at its start window, each
// action audited once with SUCCESS although every window is delivered
// three times; the ECS service's count is remembered and restored, and
// each window arms the next.
func TestNucleus_windows_stop_and_start_every_resource_once(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	c := s.cloud()
	ec2s := c.instances(2)
	db := s.cfg.Prefix + "-db"
	cluster, svcName := s.cfg.Prefix+"-cluster", "web"
	arns := append(slices.Clone(ec2s), c.database(db), c.service(cluster, svcName, 2))
	s.account("Sandbox account")
	sch := s.schedule("sch-dev", arns...)
	require.NotEmpty(t, sch.NextStopAt)

	stopped := s.window("sch-dev", messages.EdgeStop, sch.NextStopAt, 3)
	require.Len(t, stopped.Results, 4)
	for _, r := range stopped.Results {
		assert.Equal(t, messages.ExecSuccess, r.Status, "%s: %s", r.ResourceARN, r.Error)
	}
	for _, arn := range ec2s {
		assert.Equal(t, ec2types.InstanceStateNameStopped, c.instanceState(arn))
	}
	assert.Equal(t, "stopped", c.databaseStatus(db))
	assert.Equal(t, int32(0), c.desiredCount(cluster, svcName))
	next, err := time.Parse(time.RFC3339, stopped.NextAt)
	require.NoError(t, err)
	assert.True(t, next.After(mustTime(t, sch.NextStopAt)), "the next stop is armed after this one")

	after, resources, _, err := s.svc.Store.GetSchedule(context.Background(), "sch-dev")
	require.NoError(t, err)
	assert.Equal(t, stopped.NextAt, after.NextStopAt)
	for _, r := range resources {
		assert.Equal(t, "stopped", r.ExecutionState, r.ResourceARN)
		if r.ResourceType == messages.ResourceECSService {
			assert.Equal(t, 2, r.DesiredCount, "the stop remembers the running count")
		}
	}

	started := s.window("sch-dev", messages.EdgeStart, sch.NextStartAt, 3)
	require.Len(t, started.Results, 4)
	for _, r := range started.Results {
		assert.Equal(t, messages.ExecSuccess, r.Status, "%s: %s", r.ResourceARN, r.Error)
	}
	for _, arn := range ec2s {
		assert.Equal(t, ec2types.InstanceStateNameRunning, c.instanceState(arn))
	}
	assert.Equal(t, "available", c.databaseStatus(db))
	assert.Equal(t, int32(2), c.desiredCount(cluster, svcName), "the start restores the count")

	executions := s.executions("sch-dev")
	require.Len(t, executions, 4)
	for arn, entries := range executions {
		require.Len(t, entries, 2, "%s: one stop, one start", arn)
		for _, e := range entries {
			assert.Equal(t, messages.ExecSuccess, e.Status)
			assert.Equal(t, "system", e.UserID)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// TestNucleus_a_failing_resource_is_audited_and_the_others_act: a
// terminated instance fails its start with the AWS error, audited FAIL;
// the schedule's other instance starts.
func TestNucleus_a_failing_resource_is_audited_and_the_others_act(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	c := s.cloud()
	arns := c.instances(2)
	healthy, gone := arns[0], arns[1]
	ctx := context.Background()
	_, err := c.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{healthy[strings.LastIndex(healthy, "/")+1:]}})
	require.NoError(t, err)
	_, err = c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{gone[strings.LastIndex(gone, "/")+1:]}})
	require.NoError(t, err)
	s.account("Sandbox account")
	sch := s.schedule("sch-mixed", arns...)

	started := byResource(s.window("sch-mixed", messages.EdgeStart, sch.NextStartAt, 1).Results)
	assert.Equal(t, messages.ExecSuccess, started[healthy].Status, started[healthy].Error)
	assert.Equal(t, messages.ExecFail, started[gone].Status)
	assert.Contains(t, started[gone].Error, "terminated", "the AWS error or state")
	assert.Equal(t, ec2types.InstanceStateNameRunning, c.instanceState(healthy))

	executions := s.executions("sch-mixed")
	require.Len(t, executions[gone], 1)
	assert.Equal(t, messages.ExecFail, executions[gone][0].Status)
	assert.Contains(t, executions[gone][0].Details, "terminated")
	require.Len(t, executions[healthy], 1)
	assert.Equal(t, messages.ExecSuccess, executions[healthy][0].Status)
}

// TestNucleus_a_disabled_or_deleted_schedules_window_does_nothing: the
// window armed before a disable is refused (disabled) and acts on
// nothing; after a delete, not_found; a window re-timed by an upsert is
// superseded.
func TestNucleus_a_disabled_or_deleted_schedules_window_does_nothing(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	c := s.cloud()
	arns := c.instances(1)
	s.account("Sandbox account")
	sch := s.schedule("sch-off", arns...)

	disabled := payloadOf[messages.SchedulePayload](t, s.apply(messages.ScheduleDisable,
		messages.ScheduleRefPayload{ScheduleID: "sch-off", UserID: "u-ops"}, messages.ScheduleDisabled))
	assert.False(t, disabled.Enabled)
	assert.Empty(t, disabled.NextStopAt)
	rej := s.nucleusRejected(messages.ScheduleWindowDue, messages.ScheduleWindowPayload{ScheduleID: "sch-off", Edge: messages.EdgeStop, WindowAt: sch.NextStopAt})
	assert.Equal(t, messages.ReasonDisabled, rej.Reason)
	assert.Equal(t, ec2types.InstanceStateNameRunning, c.instanceState(arns[0]), "nothing stopped")
	assert.Empty(t, s.executions("sch-off"))

	enabled := payloadOf[messages.SchedulePayload](t, s.apply(messages.ScheduleEnable,
		messages.ScheduleRefPayload{ScheduleID: "sch-off", UserID: "u-ops"}, messages.ScheduleEnabled))
	assert.Equal(t, sch.NextStopAt, enabled.NextStopAt, "the same window, armed again")
	s.apply(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: "sch-off", ScheduleName: "Dev nights",
		StartCron: "0 7 * * 1-5", EndCron: "30 20 * * 1-5", Timezone: "America/New_York", UserID: "u-ops"}, messages.ScheduleUpserted)
	rej = s.nucleusRejected(messages.ScheduleWindowDue, messages.ScheduleWindowPayload{ScheduleID: "sch-off", Edge: messages.EdgeStop, WindowAt: sch.NextStopAt})
	assert.Equal(t, messages.ReasonSuperseded, rej.Reason)

	deleted := payloadOf[messages.ScheduleDeletedPayload](t, s.apply(messages.ScheduleDelete,
		messages.ScheduleRefPayload{ScheduleID: "sch-off", UserID: "u-ops"}, messages.ScheduleDeleted))
	assert.Equal(t, 1, deleted.Resources)
	_, resources, found, err := s.svc.Store.GetSchedule(context.Background(), "sch-off")
	require.NoError(t, err)
	assert.False(t, found)
	assert.Empty(t, resources, "its resources went with it")
	rej = s.nucleusRejected(messages.ScheduleWindowDue, messages.ScheduleWindowPayload{ScheduleID: "sch-off", Edge: messages.EdgeStart, WindowAt: sch.NextStartAt})
	assert.Equal(t, messages.ReasonNotFound, rej.Reason)
	assert.Equal(t, ec2types.InstanceStateNameRunning, c.instanceState(arns[0]))
}

// TestNucleus_listings_come_from_one_query_each: accounts and schedules
// by name, a schedule with its resources, an account's resources; and
// the refusals a producer can cause.
func TestNucleus_listings_come_from_one_query_each(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	for i, name := range []string{"Zulu", "alpha", "Mike"} {
		id := fmt.Sprintf("%012d", 111111111110+i)
		s.apply(messages.AccountRegister, messages.AccountRegisterPayload{AccountID: id, AccountName: name,
			RoleARN: "arn:aws:iam::" + id + ":role/nucleus", UserID: "u-ops"}, messages.AccountRegistered)
	}
	ec2a := "arn:aws:ec2:eu-central-1:111111111110:instance/i-0123456789abcdef0"
	ec2b := "arn:aws:ec2:eu-central-1:111111111110:instance/i-0123456789abcdef1"
	dbc := "arn:aws:rds:eu-west-1:111111111112:db:orders"
	for _, id := range []string{"sch-b", "sch-a"} {
		s.apply(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: id, ScheduleName: "Nights " + strings.ToUpper(id[4:]),
			StartCron: "0 8 * * *", EndCron: "0 20 * * *", Timezone: "UTC", UserID: "u-ops"}, messages.ScheduleUpserted)
	}
	for _, r := range []struct{ sch, arn string }{{"sch-a", ec2a}, {"sch-a", dbc}, {"sch-b", ec2b}} {
		s.apply(messages.ResourceAttach, messages.ResourcePayload{ScheduleID: r.sch, ResourceARN: r.arn, UserID: "u-ops"}, messages.ResourceAttached)
	}
	ctx := context.Background()
	st := s.svc.Store

	accounts, err := st.Accounts(ctx)
	require.NoError(t, err)
	var names []string
	for _, a := range accounts {
		names = append(names, a.AccountName)
		assert.Equal(t, messages.AccountPending, a.Status)
	}
	assert.Equal(t, []string{"Mike", "Zulu", "alpha"}, names, "by name, as DynamoDB orders strings")
	schedules, err := st.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, schedules, 2)
	assert.Equal(t, []string{"sch-a", "sch-b"}, []string{schedules[0].ScheduleID, schedules[1].ScheduleID})
	assert.Equal(t, 2, schedules[0].ResourceCount)

	sch, resources, found, err := st.GetSchedule(ctx, "sch-a")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "Nights A", sch.ScheduleName)
	require.Len(t, resources, 2)
	assert.Equal(t, ec2a, resources[0].ResourceARN, "by ARN, the sort key")
	assert.Equal(t, messages.ResourceEC2Instance, resources[0].ResourceType)
	assert.Equal(t, "eu-central-1", resources[0].Region)
	assert.Equal(t, messages.ResourceRDSInstance, resources[1].ResourceType)

	of110, err := st.AccountResources(ctx, "111111111110")
	require.NoError(t, err)
	require.Len(t, of110, 2)
	assert.Equal(t, []string{"sch-a", "sch-b"}, []string{of110[0].ScheduleID, of110[1].ScheduleID})

	// Refusals: an unregistered account, an attached twice, a bad cron
	// or zone with the reason's detail, a schedule unknown.
	unknown := "arn:aws:ec2:eu-central-1:999999999999:instance/i-0123456789abcdef0"
	assert.Equal(t, messages.ReasonAccountNotFound, s.nucleusRejected(messages.ResourceAttach,
		messages.ResourcePayload{ScheduleID: "sch-a", ResourceARN: unknown, UserID: "u-ops"}).Reason)
	assert.Equal(t, messages.ReasonAlreadyExists, s.nucleusRejected(messages.ResourceAttach,
		messages.ResourcePayload{ScheduleID: "sch-a", ResourceARN: ec2a, UserID: "u-ops"}).Reason)
	assert.Equal(t, messages.ReasonNotFound, s.nucleusRejected(messages.ResourceAttach,
		messages.ResourcePayload{ScheduleID: "sch-none", ResourceARN: ec2a, UserID: "u-ops"}).Reason)
	badCron := s.nucleusRejected(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: "sch-a", ScheduleName: "x",
		StartCron: "61 * * * *", EndCron: "0 20 * * *", Timezone: "UTC", UserID: "u-ops"})
	assert.Equal(t, messages.ReasonInvalidCron, badCron.Reason)
	assert.Contains(t, badCron.Detail, "61")
	badZone := s.nucleusRejected(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: "sch-a", ScheduleName: "x",
		StartCron: "0 8 * * *", EndCron: "0 20 * * *", Timezone: "Mars/Olympus", UserID: "u-ops"})
	assert.Equal(t, messages.ReasonInvalidTimezone, badZone.Reason)
	sch, _, _, err = st.GetSchedule(ctx, "sch-a")
	require.NoError(t, err)
	assert.Equal(t, "0 8 * * *", sch.StartCron, "a refused upsert changes nothing")

	s.apply(messages.ResourceDetach, messages.ResourcePayload{ScheduleID: "sch-a", ResourceARN: dbc, UserID: "u-ops"}, messages.ResourceDetached)
	of112, err := st.AccountResources(ctx, "111111111112")
	require.NoError(t, err)
	assert.Empty(t, of112)

	// Each change is audited with its acting user.
	history, err := st.EntityHistory(ctx, "SCHEDULE#sch-a", 100, "")
	require.NoError(t, err)
	var actions []string
	for _, r := range history.Items {
		actions = append(actions, r.Action)
		if r.Action == store.ActionCreate || r.Action == store.ActionUpdate {
			assert.Equal(t, "u-ops", r.UserID)
		}
	}
	assert.Equal(t, store.ActionCreate, actions[len(actions)-1], "oldest last: the creation")
	assert.Equal(t, 3, countOf(actions, store.ActionUpdate), "two attaches and a detach; nothing for the refusals")
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestAudit_recent_merges_every_global_key: commands of several domains
// write records until every key of both global views holds some; the
// recent view returns all of them, newest first, with none missing.
func TestAudit_recent_merges_every_global_key(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	start := time.Now().Add(-time.Minute)
	for i := 0; ; i++ {
		id := fmt.Sprintf("%012d", 222222222200+i)
		s.apply(messages.AccountRegister, messages.AccountRegisterPayload{AccountID: id, AccountName: "acct " + id,
			RoleARN: "arn:aws:iam::" + id + ":role/r", UserID: "u-ops"}, messages.AccountRegistered)
		s.sync(fmt.Sprintf("ext-%d", i))
		if s.globalKeysUsed(store.NucleusAudit) == store.AuditGlobalKeys && s.globalKeysUsed(store.Audit) == store.AuditGlobalKeys {
			break
		}
		require.Less(t, i, 100, "every global key used within 100 commands")
	}
	total := s.itemCount(store.NucleusAudit) + s.itemCount(store.Audit)
	records, err := s.svc.Store.RecentAudit(context.Background(), start, 1000)
	require.NoError(t, err)
	assert.Len(t, records, total-s.twins(), "every record once; a Nucleus command's outcome folds into its entry")
	for i := 1; i < len(records); i++ {
		assert.GreaterOrEqual(t, records[i-1].At, records[i].At, "newest first")
	}
	assert.Contains(t, actionsOf(records), "sandbox.sync")
	assert.Contains(t, actionsOf(records), store.ActionCreate)
}

func actionsOf(records []store.AuditRecord) []string {
	var a []string
	for _, r := range records {
		a = append(a, r.Action)
	}
	return a
}

func (s *stack) scanAll(t store.Table) []map[string]types.AttributeValue {
	out, err := s.svc.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(store.TableName(s.cfg.Prefix, t))})
	require.NoError(s.t, err)
	return out.Items
}

func (s *stack) itemCount(t store.Table) int { return len(s.scanAll(t)) }

// globalKeysUsed counts the distinct global-view keys of a trail's table.
func (s *stack) globalKeysUsed(t store.Table) int {
	keys := map[string]bool{}
	for _, item := range s.scanAll(t) {
		if k, ok := item["gsi1pk"].(*types.AttributeValueMemberS); ok {
			keys[k.Value] = true
		}
	}
	return len(keys)
}

// twins counts the outcomes that share their command's Nucleus entry.
func (s *stack) twins() int {
	entries := map[string]bool{}
	for _, item := range s.scanAll(store.NucleusAudit) {
		entries[item["gsi1sk"].(*types.AttributeValueMemberS).Value] = true
	}
	n := 0
	for _, item := range s.scanAll(store.Audit) {
		if entries[item["gsi1sk"].(*types.AttributeValueMemberS).Value] {
			n++
		}
	}
	return n
}

// TestNucleus_windows_fire_from_their_timers: an upserted schedule arms
// its windows as durable timers; its start window, due every minute,
// fires through them and starts a stopped instance.
func TestNucleus_windows_fire_from_their_timers(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	c := s.cloud()
	arns := c.instances(1)
	_, err := c.ec2.StopInstances(context.Background(), &ec2.StopInstancesInput{InstanceIds: []string{arns[0][strings.LastIndex(arns[0], "/")+1:]}})
	require.NoError(t, err)
	s.account("Sandbox account")
	// Decide as if it were just before the last whole minute: the first
	// start window is then already due, and its timer fires at once.
	now := time.Now()
	s.clock.Shift(now.Truncate(time.Minute).Add(-5 * time.Second).Sub(now))
	upserted := payloadOf[messages.SchedulePayload](t, s.apply(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: "sch-timer",
		ScheduleName: "Every minute", StartCron: "* * * * *", EndCron: "0 0 1 1 *", Timezone: "UTC", UserID: "u-ops"}, messages.ScheduleUpserted))
	assert.Equal(t, now.Truncate(time.Minute).UTC().Format("2006-01-02T15:04:05.000Z"), upserted.NextStartAt)
	s.apply(messages.ResourceAttach, messages.ResourcePayload{ScheduleID: "sch-timer", ResourceARN: arns[0], UserID: "u-ops"}, messages.ResourceAttached)

	events := s.collect(60*time.Second, func(evs []service.TapEvent) bool {
		return slices.ContainsFunc(evs, func(e service.TapEvent) bool { return e.Envelope.Type == messages.ScheduleWindowExecuted })
	})
	i := slices.IndexFunc(events, func(e service.TapEvent) bool { return e.Envelope.Type == messages.ScheduleWindowExecuted })
	fired := payloadOf[messages.WindowExecutedPayload](t, events[i])
	assert.Equal(t, upserted.NextStartAt, fired.WindowAt)
	require.Len(t, fired.Results, 1)
	assert.Equal(t, messages.ExecSuccess, fired.Results[0].Status, fired.Results[0].Error)
	assert.Equal(t, ec2types.InstanceStateNameRunning, c.instanceState(arns[0]))
	assert.Equal(t, mustTime(t, upserted.NextStartAt).Add(time.Minute), mustTime(t, fired.NextAt), "the next minute is armed")
	s.apply(messages.ScheduleDisable, messages.ScheduleRefPayload{ScheduleID: "sch-timer", UserID: "u-ops"}, messages.ScheduleDisabled)
}

// dyingCloud is the real cloud, except that its first stop of one
// resource does the stop and then hangs until its command's context
// ends: a delivery that dies between the AWS call and its record.
type dyingCloud struct {
	handlers.Cloud
	arn   string
	stops atomic.Int32
}

func (d *dyingCloud) Stop(ctx context.Context, role string, r messages.ResourceARN) (int32, error) {
	n, err := d.Cloud.Stop(ctx, role, r)
	if r.ARN == d.arn && d.stops.Add(1) == 1 {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return n, err
}

// TestNucleus_a_window_that_dies_after_acting_is_acted_on_once: the
// first delivery stops an instance and dies before recording it; the
// hold lapses, a later delivery stops it again (a stopped instance stays
// stopped) and records it: one EXECUTE entry, SUCCESS, and the window's
// other resource acted on once.
func TestNucleus_a_window_that_dies_after_acting_is_acted_on_once(t *testing.T) {
	s := newStack(t)
	c := s.cloud()
	arns := c.instances(2)
	cloud := &dyingCloud{Cloud: provider.NewCloud(s.svc.AWS), arn: arns[0]}
	s.serve(service.ServeOptions{Cloud: cloud})
	s.account("Sandbox account")
	sch := s.schedule("sch-dies", arns...)

	stopped := byResource(s.window("sch-dies", messages.EdgeStop, sch.NextStopAt, 1).Results)
	for _, arn := range arns {
		assert.Equal(t, messages.ExecSuccess, stopped[arn].Status, stopped[arn].Error)
		assert.Equal(t, ec2types.InstanceStateNameStopped, c.instanceState(arn))
	}
	assert.Equal(t, int32(2), cloud.stops.Load(), "the dead delivery's stop, then the one recorded")
	executions := s.executions("sch-dies")
	for _, arn := range arns {
		assert.Len(t, executions[arn], 1, "%s audited once", arn)
	}
}

// TestNucleus_after_an_outage_only_the_last_edge_acts: transit was down
// through both edges' windows; when they arrive, in either order, the
// window of the edge whose cron fired last acts and the other is
// overtaken (acts on nothing, arms its next window), so the instance ends
// as the schedule says now.
func TestNucleus_after_an_outage_only_the_last_edge_acts(t *testing.T) {
	for _, stopFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop_first_%t", stopFirst), func(t *testing.T) {
			// No timer domain: the test delivers the windows itself, in
			// the order an outage's backlog might.
			s := newStack(t, func(c *config.Config) { c.Domains = "nucleus" })
			s.serve(service.ServeOptions{})
			c := s.cloud()
			arns := c.instances(1)
			s.account("Sandbox account")
			// Armed two days ago: both windows are long due.
			s.clock.Shift(-48 * time.Hour)
			s.apply(messages.ScheduleUpsert, messages.ScheduleUpsertPayload{ScheduleID: "sch-late", ScheduleName: "Late",
				StartCron: "0 8 * * *", EndCron: "0 19 * * *", Timezone: "UTC", UserID: "u-ops"}, messages.ScheduleUpserted)
			s.apply(messages.ResourceAttach, messages.ResourcePayload{ScheduleID: "sch-late", ResourceARN: arns[0], UserID: "u-ops"}, messages.ResourceAttached)
			s.clock.Shift(0)
			sch, _, _, err := s.svc.Store.GetSchedule(context.Background(), "sch-late")
			require.NoError(t, err)
			// The edge whose cron fired last: start between 08:00 and
			// 19:00 UTC, else stop.
			now := time.Now().UTC()
			last, want := messages.EdgeStop, ec2types.InstanceStateNameStopped
			if now.Hour() >= 8 && now.Hour() < 19 {
				last, want = messages.EdgeStart, ec2types.InstanceStateNameRunning
			}
			windows := []struct{ edge, at string }{{messages.EdgeStart, sch.NextStartAt}, {messages.EdgeStop, sch.NextStopAt}}
			if stopFirst {
				slices.Reverse(windows)
			}
			for _, w := range windows {
				got := s.window("sch-late", w.edge, w.at, 1)
				assert.Greater(t, got.NextAt, now.Format(time.RFC3339), "%s: its next window is armed, in the future", w.edge)
				if w.edge != last {
					assert.True(t, got.Overtaken, w.edge)
					assert.Empty(t, got.Results)
					continue
				}
				assert.False(t, got.Overtaken, w.edge)
				require.Len(t, got.Results, 1)
				assert.Equal(t, messages.ExecSuccess, got.Results[0].Status, got.Results[0].Error)
			}
			assert.Equal(t, want, c.instanceState(arns[0]))
			assert.Len(t, s.executions("sch-late")[arns[0]], 1, "only the last edge's window acted")
		})
	}
}

// disablingCloud disables the schedule while the window stops its
// resource: a change that lands mid-window.
type disablingCloud struct {
	handlers.Cloud
	disable func()
}

func (d *disablingCloud) Stop(ctx context.Context, role string, r messages.ResourceARN) (int32, error) {
	d.disable()
	return d.Cloud.Stop(ctx, role, r)
}

// TestNucleus_a_schedule_disabled_mid_window_keeps_the_results: the
// window's resource stopped and audited, the window reports it, and arms
// no next window: the schedule is disabled.
func TestNucleus_a_schedule_disabled_mid_window_keeps_the_results(t *testing.T) {
	s := newStack(t)
	c := s.cloud()
	arns := c.instances(1)
	cloud := &disablingCloud{Cloud: provider.NewCloud(s.svc.AWS)}
	cloud.disable = func() {
		cmd := store.Cmd{ID: uuid.NewString(), Type: string(messages.ScheduleDisable), Actor: "u-ops", At: time.Now()}
		_, err := s.svc.Store.DisableSchedule(context.Background(), cmd, messages.ScheduleRefPayload{ScheduleID: "sch-mid", UserID: "u-ops"})
		assert.NoError(t, err)
	}
	s.serve(service.ServeOptions{Cloud: cloud})
	s.account("Sandbox account")
	sch := s.schedule("sch-mid", arns...)

	w := s.window("sch-mid", messages.EdgeStop, sch.NextStopAt, 1)
	require.Len(t, w.Results, 1)
	assert.Equal(t, messages.ExecSuccess, w.Results[0].Status, w.Results[0].Error)
	assert.Empty(t, w.NextAt, "no next window for a disabled schedule")
	assert.Equal(t, ec2types.InstanceStateNameStopped, c.instanceState(arns[0]))
	assert.Len(t, s.executions("sch-mid")[arns[0]], 1)
	after, _, _, err := s.svc.Store.GetSchedule(context.Background(), "sch-mid")
	require.NoError(t, err)
	assert.False(t, after.Enabled)
	assert.Empty(t, after.NextStopAt)
}
