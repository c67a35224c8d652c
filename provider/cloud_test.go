package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/messages"
	"transit/provider"
)

// motoURL returns the endpoint of the emulator the provider tests share,
// started the way the KMS tests start it (once; TestMain stops it).
func motoURL(t *testing.T) string {
	t.Helper()
	kmsClient(t, "us-east-1", nil)
	return kmsEndpoint.url
}

// transitConfig is transit's own AWS config on the shared emulator, its
// requests sent through httpClient when that is not nil.
func transitConfig(t *testing.T, httpClient aws.HTTPClient) aws.Config {
	t.Helper()
	return aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(motoURL(t)),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   httpClient,
	}
}

// testRole returns the ARN of a role in account named under the test
// prefix. moto assumes any role ARN: the role need not exist.
func testRole(account string) (arn, name string) {
	name = emulator.TestPrefix + uuid.NewString()[:8]
	return "arn:aws:iam::" + account + ":role/" + name, name
}

// testAccount creates, inspects and removes resources in a role's account,
// as a session of its own: moto gives an assumed role's credentials the
// role's account, as AWS does, and nothing else reaches that account.
type testAccount struct {
	id, region, prefix string
	ec2                *ec2.Client
	rds                *rds.Client
	ecs                *ecs.Client
}

func newTestAccount(t *testing.T, cfg aws.Config, roleARN, region string) *testAccount {
	t.Helper()
	account, err := messages.ParseRoleARN(roleARN)
	require.NoError(t, err)
	cfg = cfg.Copy()
	cfg.Region, cfg.HTTPClient = region, nil
	cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), roleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = "transit-test-setup"
	}))
	return &testAccount{
		id:     account,
		region: region,
		prefix: emulator.TestPrefix + uuid.NewString()[:8],
		ec2:    ec2.NewFromConfig(cfg),
		rds:    rds.NewFromConfig(cfg),
		ecs:    ecs.NewFromConfig(cfg),
	}
}

// instances runs n instances, terminated when the test ends.
func (a *testAccount) instances(t *testing.T, n int32) []messages.ResourceARN {
	t.Helper()
	ctx := context.Background()
	// moto's example AMI.
	out, err := a.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(n), MaxCount: aws.Int32(n)})
	require.NoError(t, err)
	var ids []string
	var arns []messages.ResourceARN
	for _, instance := range out.Instances {
		id := aws.ToString(instance.InstanceId)
		ids = append(ids, id)
		arns = append(arns, parseARN(t, fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", a.region, a.id, id)))
	}
	t.Cleanup(func() {
		_, err := a.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids})
		assert.NoError(t, err, "terminate %v", ids)
	})
	return arns
}

// dbInstance creates a DB instance, deleted when the test ends.
func (a *testAccount) dbInstance(t *testing.T) messages.ResourceARN {
	t.Helper()
	id := a.prefix + "-db"
	out, err := a.rds.CreateDBInstance(context.Background(), &rds.CreateDBInstanceInput{
		DBInstanceIdentifier: aws.String(id),
		DBInstanceClass:      aws.String("db.t3.micro"),
		Engine:               aws.String("postgres"),
		AllocatedStorage:     aws.Int32(20),
		MasterUsername:       aws.String("transit"),
		MasterUserPassword:   aws.String("not-a-secret-" + a.prefix),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := a.rds.DeleteDBInstance(context.Background(), &rds.DeleteDBInstanceInput{DBInstanceIdentifier: aws.String(id), SkipFinalSnapshot: aws.Bool(true)})
		assert.NoError(t, err, "delete DB instance %s", id)
	})
	return parseARN(t, aws.ToString(out.DBInstance.DBInstanceArn))
}

// service creates a cluster, a task definition and a service of desired
// tasks on it, all removed when the test ends.
func (a *testAccount) service(t *testing.T, desired int32) messages.ResourceARN {
	t.Helper()
	ctx := context.Background()
	cluster, family, name := a.prefix+"-cluster", a.prefix+"-task", a.prefix+"-service"
	_, err := a.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)})
	require.NoError(t, err)
	task, err := a.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family:               aws.String(family),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("nginx"), Memory: aws.Int32(128)}},
	})
	require.NoError(t, err)
	taskARN := task.TaskDefinition.TaskDefinitionArn
	out, err := a.ecs.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster:        aws.String(cluster),
		ServiceName:    aws.String(name),
		TaskDefinition: taskARN,
		DesiredCount:   aws.Int32(desired),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		_, err := a.ecs.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String(cluster), Service: aws.String(name), Force: aws.Bool(true)})
		assert.NoError(t, err, "delete service %s", name)
		_, err = a.ecs.DeregisterTaskDefinition(ctx, &ecs.DeregisterTaskDefinitionInput{TaskDefinition: taskARN})
		assert.NoError(t, err, "deregister %s", aws.ToString(taskARN))
		_, err = a.ecs.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(cluster)})
		assert.NoError(t, err, "delete cluster %s", cluster)
	})
	r := parseARN(t, aws.ToString(out.Service.ServiceArn))
	require.Equal(t, cluster, r.Cluster, "moto's service ARN names the cluster")
	return r
}

func parseARN(t *testing.T, arn string) messages.ResourceARN {
	t.Helper()
	r, err := messages.ParseResourceARN(arn)
	require.NoError(t, err)
	return r
}

// state is what r is at: the EC2 instance state, the RDS DB instance
// status, or the ECS service's desired count.
func (a *testAccount) state(t *testing.T, r messages.ResourceARN) string {
	t.Helper()
	ctx := context.Background()
	switch r.Type {
	case messages.ResourceEC2Instance:
		out, err := a.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{r.ID}})
		require.NoError(t, err)
		require.Len(t, out.Reservations, 1)
		require.Len(t, out.Reservations[0].Instances, 1)
		return string(out.Reservations[0].Instances[0].State.Name)
	case messages.ResourceRDSInstance:
		out, err := a.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(r.ID)})
		require.NoError(t, err)
		require.Len(t, out.DBInstances, 1)
		return aws.ToString(out.DBInstances[0].DBInstanceStatus)
	case messages.ResourceECSService:
		out, err := a.ecs.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(r.Cluster), Services: []string{r.ID}})
		require.NoError(t, err)
		require.Len(t, out.Services, 1)
		return fmt.Sprint(out.Services[0].DesiredCount)
	}
	t.Fatalf("no state for %s", r.Type)
	return ""
}

// assumeRoles counts the sts:AssumeRole requests sent through it, by role.
type assumeRoles struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *assumeRoles) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if form, err := url.ParseQuery(string(raw)); err == nil && form.Get("Action") == "AssumeRole" {
			a.mu.Lock()
			if a.n == nil {
				a.n = map[string]int{}
			}
			a.n[form.Get("RoleArn")]++
			a.mu.Unlock()
		}
	}
	return http.DefaultClient.Do(r)
}

func (a *assumeRoles) count(role string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[role]
}

func TestCloud_Identity_is_the_assumed_role(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	assumed := &assumeRoles{}
	cloud := provider.NewCloud(transitConfig(t, assumed))

	own, ownName := testRole("123456789012")
	other, otherName := testRole("111122223333")
	pathed := "arn:aws:iam::111122223333:role/ops/scheduling/" + otherName + "-pathed"
	for role, want := range map[string]string{
		own:    "arn:aws:sts::123456789012:assumed-role/" + ownName + "/transit-nucleus",
		other:  "arn:aws:sts::111122223333:assumed-role/" + otherName + "/transit-nucleus",
		pathed: "arn:aws:sts::111122223333:assumed-role/" + otherName + "-pathed/transit-nucleus",
	} {
		for range 2 {
			got, err := cloud.Identity(ctx, role)
			require.NoError(t, err, role)
			assert.Equal(t, want, got)
		}
		assert.Equal(t, 1, assumed.count(role), "the second call uses the cached credentials of %s", role)
	}

	_, err := cloud.Identity(ctx, "arn:aws:iam::123456789012:user/ada")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not an IAM role ARN")
	assert.Zero(t, assumed.count("arn:aws:iam::123456789012:user/ada"), "refused without asking STS")
}

func TestCloud_stops_and_starts_instances_DB_and_service(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	assumed := &assumeRoles{}
	cfg := transitConfig(t, assumed)
	// Another account than the emulator's default, in another region
	// than transit's own.
	role, _ := testRole("111122223333")
	account := newTestAccount(t, cfg, role, "eu-west-1")
	instances := account.instances(t, 2)
	db := account.dbInstance(t)
	service := account.service(t, 2)
	all := append(slices.Clone(instances), db, service)
	cloud := provider.NewCloud(cfg)

	for round, name := range []string{"stop", "redelivered stop"} {
		for _, r := range all {
			desired, err := cloud.Stop(ctx, role, r)
			require.NoError(t, err, "%s %s", name, r.ARN)
			want := int32(0)
			if r == service && round == 0 {
				want = 2
			}
			assert.Equal(t, want, desired, "%s %s: the desired count it had", name, r.ARN)
		}
		for _, r := range instances {
			assert.Equal(t, "stopped", account.state(t, r), "%s %s", name, r.ID)
		}
		assert.Equal(t, "stopped", account.state(t, db), name)
		assert.Equal(t, "0", account.state(t, service), name)
	}

	for _, name := range []string{"start", "redelivered start"} {
		for _, r := range all {
			require.NoError(t, cloud.Start(ctx, role, r, 2), "%s %s", name, r.ARN)
		}
		for _, r := range instances {
			assert.Equal(t, "running", account.state(t, r), "%s %s", name, r.ID)
		}
		assert.Equal(t, "available", account.state(t, db), name)
		assert.Equal(t, "2", account.state(t, service), name)
	}

	t.Run("a start with no count remembered starts one task", func(t *testing.T) {
		desired, err := cloud.Stop(ctx, role, service)
		require.NoError(t, err)
		assert.Equal(t, int32(2), desired)
		require.NoError(t, cloud.Start(ctx, role, service, 0))
		assert.Equal(t, "1", account.state(t, service))
	})

	t.Run("a running service keeps its count", func(t *testing.T) {
		require.NoError(t, cloud.Start(ctx, role, service, 3))
		assert.Equal(t, "1", account.state(t, service))
	})

	assert.Equal(t, 1, assumed.count(role), "one AssumeRole for every call through the role")
}

func TestCloud_terminated_instance_is_an_error(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := transitConfig(t, nil)
	role, _ := testRole("123456789012")
	account := newTestAccount(t, cfg, role, "us-east-1")
	instances := account.instances(t, 2)
	dead, healthy := instances[0], instances[1]
	_, err := account.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{dead.ID}})
	require.NoError(t, err)
	require.Equal(t, string(ec2types.InstanceStateNameTerminated), account.state(t, dead))
	cloud := provider.NewCloud(cfg)

	desired, err := cloud.Stop(ctx, role, dead)
	require.Error(t, err)
	assert.Zero(t, desired)
	assert.Equal(t, "stop "+dead.ARN+": instance "+dead.ID+" is terminated", err.Error())
	desired, err = cloud.Stop(ctx, role, healthy)
	require.NoError(t, err)
	assert.Zero(t, desired)
	assert.Equal(t, "stopped", account.state(t, healthy))

	err = cloud.Start(ctx, role, dead, 0)
	require.Error(t, err)
	assert.Equal(t, "start "+dead.ARN+": instance "+dead.ID+" is terminated", err.Error())
	// moto would have started it again.
	assert.Equal(t, "terminated", account.state(t, dead))
	require.NoError(t, cloud.Start(ctx, role, healthy, 0))
	assert.Equal(t, "running", account.state(t, healthy))
}

func TestCloud_missing_resources_are_errors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := transitConfig(t, nil)
	role, _ := testRole("123456789012")
	account := newTestAccount(t, cfg, role, "us-east-1")
	service := account.service(t, 1)
	cloud := provider.NewCloud(cfg)

	// code is the AWS error code the error wraps, if any; want, text it holds.
	tests := map[string]struct {
		arn, role, code, want string
	}{
		"instance": {arn: "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0", code: "InvalidInstanceID.NotFound",
			want: "The instance ID 'i-0123456789abcdef0' does not exist"},
		"DB": {arn: "arn:aws:rds:us-east-1:123456789012:db:" + account.prefix + "-none", code: "DBInstanceNotFound",
			want: "DBInstance " + account.prefix + "-none not found"},
		"service": {arn: "arn:aws:ecs:us-east-1:123456789012:service/" + service.Cluster + "/none",
			want: "ECS service none in cluster " + service.Cluster + ": MISSING"},
		"cluster": {arn: "arn:aws:ecs:us-east-1:123456789012:service/" + account.prefix + "-none/" + service.ID, code: "ClusterNotFoundException",
			want: "Cluster not found"},
		"another account's resource": {arn: "arn:aws:ec2:us-east-1:111122223333:instance/i-0123456789abcdef0",
			want: "the resource is in account 111122223333, the role " + role + " in 123456789012"},
		"not a role": {arn: service.ARN, role: "arn:aws:iam::123456789012:user/ada", want: "is not an IAM role ARN"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := parseARN(t, tc.arn)
			role := role
			if tc.role != "" {
				role = tc.role
			}
			check := func(t *testing.T, verb string, err error) {
				t.Helper()
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), verb+" "+r.ARN+": "), err.Error())
				assert.Contains(t, err.Error(), tc.want)
				if tc.code != "" {
					assert.Contains(t, err.Error(), tc.code+": ")
					var apiErr smithy.APIError
					require.ErrorAs(t, err, &apiErr)
					assert.Equal(t, tc.code, apiErr.ErrorCode())
				}
			}
			check(t, "start", cloud.Start(ctx, role, r, 1))
			_, err := cloud.Stop(ctx, role, r)
			check(t, "stop", err)
		})
	}
	assert.Equal(t, "1", account.state(t, service), "the service beside them untouched")
}
