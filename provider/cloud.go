package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"transit/messages"
)

// sessionName names transit's sessions in the accounts' CloudTrail.
const sessionName = "transit-nucleus"

// credentialsMargin is how long before they expire an assumed role's
// credentials are renewed.
const credentialsMargin = 5 * time.Minute

// RDS DB instance statuses Start and Stop leave as they are.
const (
	dbAvailable = "available"
	dbStarting  = "starting"
	dbStopped   = "stopped"
	dbStopping  = "stopping"
)

// Cloud starts, stops and identifies through an account's IAM role: it
// assumes the role with STS (session name "transit-nucleus"), caching
// credentials per role (aws.NewCredentialsCache over
// stscreds.NewAssumeRoleProvider) and clients per (role, region).
type Cloud struct {
	cfg aws.Config
	sts *sts.Client

	mu          sync.Mutex
	credentials map[string]*aws.CredentialsCache
	clients     map[roleRegion]*roleClients
}

type roleRegion struct{ role, region string }

// roleClients act in one region with one role's credentials.
type roleClients struct {
	sts *sts.Client
	ec2 *ec2.Client
	rds *rds.Client
	ecs *ecs.Client
}

// NewCloud returns a Cloud that assumes roles with transit's own AWS
// config, cfg; the clients acting through a role keep its endpoint and
// partition, and take the region of the resource they act on.
func NewCloud(cfg aws.Config) *Cloud {
	return &Cloud{
		cfg:         cfg,
		sts:         sts.NewFromConfig(cfg),
		credentials: map[string]*aws.CredentialsCache{},
		clients:     map[roleRegion]*roleClients{},
	}
}

// Identity assumes roleARN and returns the ARN sts:GetCallerIdentity
// reports as that role (the account test).
func (c *Cloud) Identity(ctx context.Context, roleARN string) (string, error) {
	if _, err := messages.ParseRoleARN(roleARN); err != nil {
		return "", err
	}
	out, err := c.clientsFor(roleARN, c.cfg.Region).sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("identity through %s: %w", roleARN, err)
	}
	return aws.ToString(out.Arn), nil
}

// Start brings r up: EC2 StartInstances, RDS StartDBInstance, ECS
// UpdateService desiredCount. restore is the ECS desired count a stop
// remembered (0: none remembered, so 1). What is already up or on its way
// up is left as it is, so a redelivered command succeeds: an ECS service
// at a count above 0 keeps it.
func (c *Cloud) Start(ctx context.Context, roleARN string, r messages.ResourceARN, restore int32) error {
	if err := c.start(ctx, roleARN, r, restore); err != nil {
		return fmt.Errorf("start %s: %w", r.ARN, err)
	}
	return nil
}

func (c *Cloud) start(ctx context.Context, roleARN string, r messages.ResourceARN, restore int32) error {
	if restore < 0 {
		return fmt.Errorf("negative ECS desired count %d to restore", restore)
	}
	clients, err := c.resourceClients(roleARN, r)
	if err != nil {
		return err
	}
	switch r.Type {
	case messages.ResourceEC2Instance:
		state, err := instanceState(ctx, clients.ec2, r.ID)
		switch {
		case err != nil:
			return err
		case state == ec2types.InstanceStateNameRunning || state == ec2types.InstanceStateNamePending:
			return nil
		case gone(state):
			return fmt.Errorf("instance %s is %s", r.ID, state)
		}
		_, err = clients.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{r.ID}})
		return err
	case messages.ResourceRDSInstance:
		// RDS refuses to start an instance that is not stopped.
		status, err := dbStatus(ctx, clients.rds, r.ID)
		if err != nil || status == dbAvailable || status == dbStarting {
			return err
		}
		_, err = clients.rds.StartDBInstance(ctx, &rds.StartDBInstanceInput{DBInstanceIdentifier: aws.String(r.ID)})
		return err
	case messages.ResourceECSService:
		desired, err := desiredCount(ctx, clients.ecs, r)
		if err != nil || desired > 0 {
			return err
		}
		return setDesiredCount(ctx, clients.ecs, r, max(restore, 1))
	}
	return fmt.Errorf("unknown resource type %q", r.Type)
}

// Stop brings r down and, for an ECS service, returns the desired count it
// had (0 for EC2/RDS, or when already 0). What is already down or on its
// way down is left as it is, so a redelivered command succeeds.
func (c *Cloud) Stop(ctx context.Context, roleARN string, r messages.ResourceARN) (int32, error) {
	desired, err := c.stop(ctx, roleARN, r)
	if err != nil {
		return 0, fmt.Errorf("stop %s: %w", r.ARN, err)
	}
	return desired, nil
}

func (c *Cloud) stop(ctx context.Context, roleARN string, r messages.ResourceARN) (int32, error) {
	clients, err := c.resourceClients(roleARN, r)
	if err != nil {
		return 0, err
	}
	switch r.Type {
	case messages.ResourceEC2Instance:
		state, err := instanceState(ctx, clients.ec2, r.ID)
		switch {
		case err != nil:
			return 0, err
		case state == ec2types.InstanceStateNameStopped || state == ec2types.InstanceStateNameStopping:
			return 0, nil
		case gone(state):
			return 0, fmt.Errorf("instance %s is %s", r.ID, state)
		}
		_, err = clients.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{r.ID}})
		return 0, err
	case messages.ResourceRDSInstance:
		// RDS refuses to stop an instance that is not available.
		status, err := dbStatus(ctx, clients.rds, r.ID)
		if err != nil || status == dbStopped || status == dbStopping {
			return 0, err
		}
		_, err = clients.rds.StopDBInstance(ctx, &rds.StopDBInstanceInput{DBInstanceIdentifier: aws.String(r.ID)})
		return 0, err
	case messages.ResourceECSService:
		desired, err := desiredCount(ctx, clients.ecs, r)
		if err != nil || desired == 0 {
			return 0, err
		}
		if err := setDesiredCount(ctx, clients.ecs, r, 0); err != nil {
			return 0, err
		}
		return desired, nil
	}
	return 0, fmt.Errorf("unknown resource type %q", r.Type)
}

// gone tells whether an instance in state is terminated or on its way
// there: EC2 refuses to start or stop it (IncorrectInstanceState), and
// moto would start it again, so neither is asked.
func gone(state ec2types.InstanceStateName) bool {
	return state == ec2types.InstanceStateNameTerminated || state == ec2types.InstanceStateNameShuttingDown
}

func instanceState(ctx context.Context, client *ec2.Client, id string) (ec2types.InstanceStateName, error) {
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return "", err
	}
	for _, reservation := range out.Reservations {
		for _, instance := range reservation.Instances {
			if aws.ToString(instance.InstanceId) == id && instance.State != nil {
				return instance.State.Name, nil
			}
		}
	}
	return "", fmt.Errorf("EC2 describes no instance %s", id)
}

func dbStatus(ctx context.Context, client *rds.Client, id string) (string, error) {
	out, err := client.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(id)})
	if err != nil {
		return "", err
	}
	if len(out.DBInstances) != 1 {
		return "", fmt.Errorf("RDS describes %d DB instances %s, want 1", len(out.DBInstances), id)
	}
	return aws.ToString(out.DBInstances[0].DBInstanceStatus), nil
}

// desiredCount returns an active ECS service's desired count. ECS reports
// a service it does not have as a failure, not an error.
func desiredCount(ctx context.Context, client *ecs.Client, r messages.ResourceARN) (int32, error) {
	out, err := client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(r.Cluster), Services: []string{r.ID}})
	if err != nil {
		return 0, err
	}
	if len(out.Failures) > 0 {
		f := out.Failures[0]
		return 0, fmt.Errorf("ECS service %s in cluster %s: %s", r.ID, r.Cluster, strings.TrimSpace(aws.ToString(f.Reason)+" "+aws.ToString(f.Detail)))
	}
	if len(out.Services) != 1 {
		return 0, fmt.Errorf("ECS describes %d services %s in cluster %s, want 1", len(out.Services), r.ID, r.Cluster)
	}
	// A deleted service stays described for a while, as INACTIVE.
	if status := aws.ToString(out.Services[0].Status); status != "ACTIVE" {
		return 0, fmt.Errorf("ECS service %s in cluster %s is %s", r.ID, r.Cluster, status)
	}
	return out.Services[0].DesiredCount, nil
}

func setDesiredCount(ctx context.Context, client *ecs.Client, r messages.ResourceARN, count int32) error {
	_, err := client.UpdateService(ctx, &ecs.UpdateServiceInput{
		Cluster:      aws.String(r.Cluster),
		Service:      aws.String(r.ID),
		DesiredCount: aws.Int32(count),
	})
	return err
}

// resourceClients returns the clients acting on r through roleARN, which
// must be a role of r's account: a role acts in its own account only, so
// another account's resource would only be reported missing.
func (c *Cloud) resourceClients(roleARN string, r messages.ResourceARN) (*roleClients, error) {
	account, err := messages.ParseRoleARN(roleARN)
	if err != nil {
		return nil, err
	}
	if account != r.AccountID {
		return nil, fmt.Errorf("the resource is in account %s, the role %s in %s", r.AccountID, roleARN, account)
	}
	return c.clientsFor(roleARN, r.Region), nil
}

func (c *Cloud) clientsFor(roleARN, region string) *roleClients {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := roleRegion{role: roleARN, region: region}
	if clients, ok := c.clients[key]; ok {
		return clients
	}
	creds, ok := c.credentials[roleARN]
	if !ok {
		creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(c.sts, roleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = sessionName
		}), func(o *aws.CredentialsCacheOptions) {
			// Renewed a while before they expire, so no call is signed
			// with credentials that lapse in flight.
			o.ExpiryWindow = credentialsMargin
		})
		c.credentials[roleARN] = creds
	}
	cfg := c.cfg.Copy()
	cfg.Region, cfg.Credentials = region, creds
	clients := &roleClients{
		sts: sts.NewFromConfig(cfg),
		ec2: ec2.NewFromConfig(cfg),
		rds: rds.NewFromConfig(cfg),
		ecs: ecs.NewFromConfig(cfg),
	}
	c.clients[key] = clients
	return clients
}
