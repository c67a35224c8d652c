package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
	"transit/messages"
)

// Items of NucleusAppTable (docs/nucleus.md). Attribute names are the
// design's, snake_case; times are ISO 8601 in UTC with milliseconds.

// Account is a registered AWS account.
type Account struct {
	// PK is ACCOUNT#<account_id>.
	PK string `dynamodbav:"pk" json:"-"`
	// SK is METADATA.
	SK string `dynamodbav:"sk" json:"-"`
	// GSI1PK is TYPE#ACCOUNT: every account in one listing.
	GSI1PK string `dynamodbav:"gsi1pk" json:"-"`
	// GSI1SK is the account's name, so the listing is alphabetical.
	GSI1SK string `dynamodbav:"gsi1sk" json:"-"`
	// AccountID is the AWS account's 12-digit ID.
	AccountID string `dynamodbav:"account_id" json:"account_id"`
	// AccountName is the account's display name.
	AccountName string `dynamodbav:"account_name" json:"account_name"`
	// RoleARN is the IAM role of the account transit assumes to act in it.
	RoleARN string `dynamodbav:"role_arn" json:"role_arn"`
	// Status is PENDING until the role is first assumed, then ACTIVE or
	// FAILED by the last account.tested.
	Status string `dynamodbav:"status" json:"status"`
	// LastTestRunAt is when account.tested last ran.
	LastTestRunAt string `dynamodbav:"last_test_run_at,omitempty" json:"last_test_run_at,omitempty"`
	// LastTestError is the AWS error of a failed last test.
	LastTestError string `dynamodbav:"last_test_error,omitempty" json:"last_test_error,omitempty"`
	// CreatedAt is when account.registered registered it.
	CreatedAt string `dynamodbav:"created_at" json:"created_at"`
	// UpdatedAt is when it was registered or last updated.
	UpdatedAt string `dynamodbav:"updated_at" json:"updated_at"`
}

// Schedule is a schedule's METADATA item.
type Schedule struct {
	// PK is SCHEDULE#<schedule_id>; its resources share the partition.
	PK string `dynamodbav:"pk" json:"-"`
	// SK is METADATA.
	SK string `dynamodbav:"sk" json:"-"`
	// GSI1PK is TYPE#SCHEDULE: every schedule in one listing.
	GSI1PK string `dynamodbav:"gsi1pk" json:"-"`
	// GSI1SK is the schedule's name, so the listing is alphabetical.
	GSI1SK string `dynamodbav:"gsi1sk" json:"-"`
	// ScheduleID is the schedule's ID.
	ScheduleID string `dynamodbav:"schedule_id" json:"schedule_id"`
	// ScheduleName is its display name.
	ScheduleName string `dynamodbav:"schedule_name" json:"schedule_name"`
	// StartCron says when its resources start: a 5-field cron in Timezone.
	StartCron string `dynamodbav:"start_cron" json:"start_cron"`
	// EndCron says when they stop.
	EndCron string `dynamodbav:"end_cron" json:"end_cron"`
	// Timezone is the IANA zone the crons are read in.
	Timezone string `dynamodbav:"timezone" json:"timezone"`
	// Enabled is whether its windows act.
	Enabled bool `dynamodbav:"enabled" json:"enabled"`
	// State is enabled or disabled, as Enabled says: the state machine's
	// attribute.
	State string `dynamodbav:"schedule_state" json:"-"`
	// NextStartAt is the start window armed as a timer while it is
	// enabled; a window that fires acts only if it is still the one armed.
	NextStartAt string `dynamodbav:"next_start_at,omitempty" json:"next_start_at,omitempty"`
	// NextStopAt is the next stop window armed.
	NextStopAt string `dynamodbav:"next_stop_at,omitempty" json:"next_stop_at,omitempty"`
	// ResourceCount is how many resources it targets; every change to
	// its resources advances it, so they are serialised.
	ResourceCount int `dynamodbav:"resource_count" json:"resource_count"`
	// CreatedAt is when it was first upserted.
	CreatedAt string `dynamodbav:"created_at" json:"created_at"`
	// UpdatedAt is when it was last upserted, enabled or disabled.
	UpdatedAt string `dynamodbav:"updated_at" json:"updated_at"`
}

// TargetedResource is a resource a schedule starts and stops.
type TargetedResource struct {
	// PK is SCHEDULE#<schedule_id>, its schedule's partition.
	PK string `dynamodbav:"pk" json:"-"`
	// SK is RESOURCE#<resource_arn>.
	SK string `dynamodbav:"sk" json:"-"`
	// GSI1PK is ACCOUNT#<account_id>: every resource of an account.
	GSI1PK string `dynamodbav:"gsi1pk" json:"-"`
	// GSI1SK is SCHEDULE#<schedule_id>.
	GSI1SK string `dynamodbav:"gsi1sk" json:"-"`
	// ResourceARN is the resource's ARN.
	ResourceARN string `dynamodbav:"resource_arn" json:"resource_arn"`
	// ResourceType is ec2_instance, rds_instance or ecs_service.
	ResourceType string `dynamodbav:"resource_type" json:"resource_type"`
	// Region is the resource's region, from its ARN.
	Region string `dynamodbav:"region" json:"region"`
	// AccountID is the resource's account, from its ARN.
	AccountID string `dynamodbav:"account_id" json:"account_id"`
	// ScheduleID is the schedule that targets it.
	ScheduleID string `dynamodbav:"schedule_id" json:"schedule_id"`
	// AttachedAt is when resource.attached attached it.
	AttachedAt string `dynamodbav:"attached_at" json:"attached_at"`
	// ExecutionState is acting while a window holds it, then running,
	// stopped or failed by what the last window did; absent before any.
	ExecutionState string `dynamodbav:"execution_state,omitempty" json:"execution_state,omitempty"`
	// Window is the window holding it: <edge>@<window_at>.
	Window string `dynamodbav:"window,omitempty" json:"window,omitempty"`
	// ActingUntil is when the hold of Window lapses, should its delivery
	// die.
	ActingUntil string `dynamodbav:"acting_until,omitempty" json:"acting_until,omitempty"`
	// LastWindow is the last window that acted on it: a redelivery of
	// that window does not act again.
	LastWindow string `dynamodbav:"last_window,omitempty" json:"last_window,omitempty"`
	// LastStatus is the last window's result: SUCCESS or FAIL.
	LastStatus string `dynamodbav:"last_status,omitempty" json:"last_status,omitempty"`
	// LastError is the AWS error of the last window's FAIL.
	LastError string `dynamodbav:"last_error,omitempty" json:"last_error,omitempty"`
	// LastExecutedAt is when the last window acted.
	LastExecutedAt string `dynamodbav:"last_executed_at,omitempty" json:"last_executed_at,omitempty"`
	// DesiredCount is an ECS service's desired count when a window last
	// stopped it, which the next start restores.
	DesiredCount int `dynamodbav:"desired_count,omitempty" json:"desired_count,omitempty"`
}

// Audit actions of the Nucleus trail.
const (
	ActionCreate  = "CREATE"
	ActionUpdate  = "UPDATE"
	ActionExecute = "EXECUTE"
)

// nucleusEntry is one entry of NucleusAuditTable.
type nucleusEntry struct {
	// PK is ENTITY#<ACCOUNT#id or SCHEDULE#id>.
	PK string `dynamodbav:"pk"`
	// SK is TIMESTAMP#<time>#<command ID>[#<resource>]: in time order,
	// and unique per command and resource.
	SK string `dynamodbav:"sk"`
	// GSI1PK is AUDIT#GLOBAL#<n>, one of AuditGlobalKeys keys of the
	// global chronological view.
	GSI1PK string `dynamodbav:"gsi1pk"`
	// GSI1SK is SK.
	GSI1SK string `dynamodbav:"gsi1sk"`
	// Action is CREATE, UPDATE or EXECUTE.
	Action string `dynamodbav:"action"`
	// UserID is who acted (system for a window).
	UserID string `dynamodbav:"user_id"`
	// Details is what changed or what was done, as JSON.
	Details string `dynamodbav:"details"`
	// Status is SUCCESS or FAIL.
	Status string `dynamodbav:"status"`
	// CommandID is the ID of the command that made the change.
	CommandID string `dynamodbav:"command_id"`
	// CorrelationID is the command's correlation ID.
	CorrelationID string `dynamodbav:"correlation_id"`
	// ExpireAt is when DynamoDB removes it: 30 days on (Unix seconds).
	ExpireAt int64 `dynamodbav:"expire_at"`
}

// NucleusRetention is how long the Nucleus audit trail is kept.
const NucleusRetention = 30 * 24 * time.Hour

// AuditGlobalKeys is how many partition keys the global chronological
// views spread their writes over (DECISIONS.md).
const AuditGlobalKeys = 8

// auditSortKey orders an audit record: TIMESTAMP#<time to the ms>#<ids>.
func auditSortKey(at time.Time, ids ...string) string {
	return "TIMESTAMP#" + At(at).String() + "#" + strings.Join(ids, "#")
}

// globalKey spreads records over the global view's keys by their sort
// key.
func globalKey(sortKey string) string { return globalPartition(ShardOf(sortKey, AuditGlobalKeys)) }

func globalPartition(n int) string { return fmt.Sprintf("AUDIT#GLOBAL#%d", n) }

// entry is an audit entry's put, in the transaction of the change it
// records; suffix tells apart several entries of one command.
func (s *Store) entry(cmd Cmd, at time.Time, entity, action, status string, details any, suffix ...string) (joined, error) {
	b, err := json.Marshal(details)
	if err != nil {
		return joined{}, fmt.Errorf("encode audit details: %w", err)
	}
	user := cmd.Actor
	if user == "" {
		user = "system"
	}
	sk := auditSortKey(at, append([]string{cmd.ID}, suffix...)...)
	put, err := plainPut(s.nucleusAudit, nucleusEntry{PK: "ENTITY#" + entity, SK: sk, GSI1PK: globalKey(sk), GSI1SK: sk,
		Action: action, UserID: user, Details: string(b), Status: status, CommandID: cmd.ID, CorrelationID: cmd.CorrelationID,
		ExpireAt: at.Add(NucleusRetention).Unix()})
	return joined{item: put}, err
}

func appKey(pk, sk string) machine.Item {
	return machine.Item{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
}

func accountKey(id string) machine.Item       { return appKey("ACCOUNT#"+id, "METADATA") }
func scheduleKey(id string) machine.Item      { return appKey("SCHEDULE#"+id, "METADATA") }
func resourceKey(id, arn string) machine.Item { return appKey("SCHEDULE#"+id, "RESOURCE#"+arn) }

func nucleusStep(m *machine.Machine[machine.NucleusInput], name string, key machine.Item, table, entity string, in machine.NucleusInput) step[machine.NucleusInput] {
	return step[machine.NucleusInput]{m: m, t: m.Transition(name), table: table, key: key, in: in, entity: entity}
}

// RegisterAccount registers an account, pending its first test.
func (s *Store) RegisterAccount(ctx context.Context, cmd Cmd, p messages.AccountRegisterPayload) (Account, error) {
	now := iso(cmd.At)
	a := Account{PK: "ACCOUNT#" + p.AccountID, SK: "METADATA", GSI1PK: "TYPE#ACCOUNT", GSI1SK: p.AccountName,
		AccountID: p.AccountID, AccountName: p.AccountName, RoleARN: p.RoleARN, Status: messages.AccountPending, CreatedAt: now, UpdatedAt: now}
	row, err := rawItem(a)
	if err != nil {
		return Account{}, err
	}
	entity := "ACCOUNT#" + p.AccountID
	st := nucleusStep(machine.Account, machine.AccountRegister, accountKey(p.AccountID), s.nucleusApp, entity, machine.NucleusInput{Row: row})
	audit, err := s.entry(cmd, cmd.At, entity, ActionCreate, messages.ExecSuccess, map[string]string{"account_name": p.AccountName, "role_arn": p.RoleARN})
	if err != nil {
		return Account{}, err
	}
	st.with = []joined{audit}
	err = apply(ctx, s, cmd, st, &a)
	return a, wrap(err, "register account %s", p.AccountID)
}

// UpdateAccount renames an account or gives it a new role, which makes
// it pending a test again.
func (s *Store) UpdateAccount(ctx context.Context, cmd Cmd, p messages.AccountUpdatePayload) (Account, error) {
	transition := machine.AccountRename
	if p.RoleARN != "" {
		transition = machine.AccountRerole
	}
	entity := "ACCOUNT#" + p.AccountID
	st := nucleusStep(machine.Account, transition, accountKey(p.AccountID), s.nucleusApp, entity,
		machine.NucleusInput{Now: iso(cmd.At), Name: p.AccountName, Role: p.RoleARN})
	audit, err := s.entry(cmd, cmd.At, entity, ActionUpdate, messages.ExecSuccess, changed{"account_name": p.AccountName, "role_arn": p.RoleARN})
	if err != nil {
		return Account{}, err
	}
	st.with = []joined{audit}
	var a Account
	err = apply(ctx, s, cmd, st, &a)
	return a, wrap(err, "update account %s", p.AccountID)
}

// changed is an UPDATE's details: the fields a command set, without the
// ones it left out.
type changed map[string]string

func (c changed) MarshalJSON() ([]byte, error) {
	kept := map[string]string{}
	for k, v := range c {
		if v != "" {
			kept[k] = v
		}
	}
	return json.Marshal(kept)
}

// GetAccount reads an account.
func (s *Store) GetAccount(ctx context.Context, id string) (Account, bool, error) {
	return getItem[Account](ctx, s.db, s.nucleusApp, accountKey(id))
}

// AccountTest is the result of an account.tested: its status, and the
// identity STS reported or the error.
type AccountTest struct {
	Account  Account `json:"account"`
	Identity string  `json:"identity,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// RecordedTest is the result an account.tested recorded before, if any.
func (s *Store) RecordedTest(ctx context.Context, cmd Cmd) (AccountTest, bool, error) {
	var t AccountTest
	found, err := s.recorded(ctx, cmd, &t)
	return t, found, err
}

// RecordTest records an account's test of role: passed with the identity
// STS reported, or failed with testErr. A role changed since is a
// *Rejection (role_changed).
func (s *Store) RecordTest(ctx context.Context, cmd Cmd, accountID, role, identity, testErr string) (AccountTest, error) {
	transition, status := machine.AccountPass, messages.ExecSuccess
	if testErr != "" {
		transition, status = machine.AccountFail, messages.ExecFail
	}
	entity := "ACCOUNT#" + accountID
	res := AccountTest{Identity: identity, Error: testErr}
	st := nucleusStep(machine.Account, transition, accountKey(accountID), s.nucleusApp, entity,
		machine.NucleusInput{Now: iso(cmd.At), Role: role, Error: testErr})
	audit, err := s.entry(cmd, cmd.At, entity, ActionUpdate, status, changed{"test": status, "identity": identity, "error": testErr})
	if err != nil {
		return AccountTest{}, err
	}
	st.with, st.details = []joined{audit}, &res
	err = applyJoined(ctx, s, cmd, st, func(read machine.Item, _ *machine.NucleusInput) ([]joined, machine.Outcome, error) {
		if read != nil {
			if err := attributevalue.UnmarshalMap(st.m.Decide(st.t, read, read, st.in).Next, &res.Account); err != nil {
				return nil, machine.Outcome{}, fmt.Errorf("decode account %s: %w", accountID, err)
			}
		}
		return nil, machine.Outcome{}, nil
	}, &res)
	return res, wrap(err, "record test of account %s", accountID)
}

// Windows computes a schedule's next start and stop from its crons and
// zone, as of now: the store keeps no cron of its own.
type Windows func(startCron, endCron, zone string) (nextStart, nextStop string, err error)

// UpsertSchedule creates or replaces a schedule, with its next windows
// when enabled (nextStart, nextStop).
func (s *Store) UpsertSchedule(ctx context.Context, cmd Cmd, p messages.ScheduleUpsertPayload, nextStart, nextStop string) (Schedule, error) {
	now := iso(cmd.At)
	sch := Schedule{PK: "SCHEDULE#" + p.ScheduleID, SK: "METADATA", GSI1PK: "TYPE#SCHEDULE", GSI1SK: p.ScheduleName,
		ScheduleID: p.ScheduleID, ScheduleName: p.ScheduleName, StartCron: p.StartCron, EndCron: p.EndCron, Timezone: p.Timezone,
		Enabled: *p.Enabled, UpdatedAt: now}
	transition := machine.ScheduleUpsertOff
	if sch.Enabled {
		transition, sch.NextStartAt, sch.NextStopAt = machine.ScheduleUpsertOn, nextStart, nextStop
	}
	row, err := rawItem(sch)
	if err != nil {
		return Schedule{}, err
	}
	entity := "SCHEDULE#" + p.ScheduleID
	st := nucleusStep(machine.Schedule, transition, scheduleKey(p.ScheduleID), s.nucleusApp, entity, machine.NucleusInput{Now: now, Row: row})
	err = applyJoined(ctx, s, cmd, st, func(read machine.Item, _ *machine.NucleusInput) ([]joined, machine.Outcome, error) {
		action := ActionUpdate
		if read == nil {
			action = ActionCreate
		}
		audit, err := s.entry(cmd, cmd.At, entity, action, messages.ExecSuccess, map[string]any{"schedule_name": p.ScheduleName,
			"start_cron": p.StartCron, "end_cron": p.EndCron, "timezone": p.Timezone, "enabled": *p.Enabled})
		return []joined{audit}, machine.Outcome{}, err
	}, &sch)
	return sch, wrap(err, "upsert schedule %s", p.ScheduleID)
}

// EnableSchedule enables a schedule with its next windows from now, as
// windows computes them from the schedule as read.
func (s *Store) EnableSchedule(ctx context.Context, cmd Cmd, p messages.ScheduleRefPayload, windows Windows) (Schedule, error) {
	entity := "SCHEDULE#" + p.ScheduleID
	st := nucleusStep(machine.Schedule, machine.ScheduleEnable, scheduleKey(p.ScheduleID), s.nucleusApp, entity, machine.NucleusInput{Now: iso(cmd.At)})
	audit, err := s.entry(cmd, cmd.At, entity, ActionUpdate, messages.ExecSuccess, map[string]bool{"enabled": true})
	if err != nil {
		return Schedule{}, err
	}
	st.with = []joined{audit}
	var sch Schedule
	err = applyJoined(ctx, s, cmd, st, func(read machine.Item, in *machine.NucleusInput) ([]joined, machine.Outcome, error) {
		if read == nil {
			return nil, machine.Outcome{}, nil
		}
		var cur Schedule
		if err := attributevalue.UnmarshalMap(read, &cur); err != nil {
			return nil, machine.Outcome{}, fmt.Errorf("decode schedule %s: %w", p.ScheduleID, err)
		}
		var err error
		in.NextStart, in.NextStop, err = windows(cur.StartCron, cur.EndCron, cur.Timezone)
		return nil, machine.Outcome{}, err
	}, &sch)
	return sch, wrap(err, "enable schedule %s", p.ScheduleID)
}

// DisableSchedule disables a schedule: its armed windows are forgotten,
// so a timer that still fires does nothing.
func (s *Store) DisableSchedule(ctx context.Context, cmd Cmd, p messages.ScheduleRefPayload) (Schedule, error) {
	entity := "SCHEDULE#" + p.ScheduleID
	st := nucleusStep(machine.Schedule, machine.ScheduleDisable, scheduleKey(p.ScheduleID), s.nucleusApp, entity, machine.NucleusInput{Now: iso(cmd.At)})
	audit, err := s.entry(cmd, cmd.At, entity, ActionUpdate, messages.ExecSuccess, map[string]bool{"enabled": false})
	if err != nil {
		return Schedule{}, err
	}
	st.with = []joined{audit}
	var sch Schedule
	err = apply(ctx, s, cmd, st, &sch)
	return sch, wrap(err, "disable schedule %s", p.ScheduleID)
}

// Removed is an item a command deleted, and when: a deletion's outcome
// records both, so a replay reports what the first delivery decided.
type Removed[T any] struct {
	Item T      `json:"item"`
	At   string `json:"at"`
}

// removing applies a transition that deletes its item, joining what joins
// gives, and reports the item as it was.
func removing[T any](ctx context.Context, s *Store, cmd Cmd, st step[machine.NucleusInput], joins func(read machine.Item) ([]joined, machine.Outcome, error)) (Removed[T], error) {
	r := Removed[T]{At: iso(cmd.At)}
	st.details = &r
	err := applyJoined(ctx, s, cmd, st, func(read machine.Item, _ *machine.NucleusInput) ([]joined, machine.Outcome, error) {
		if read == nil {
			return nil, machine.Outcome{}, nil
		}
		if err := attributevalue.UnmarshalMap(read, &r.Item); err != nil {
			return nil, machine.Outcome{}, fmt.Errorf("decode %s: %w", st.m.Name, err)
		}
		return joins(read)
	}, &r)
	return r, err
}

// DeleteSchedule deletes a schedule and every resource it targets, in
// one transaction.
func (s *Store) DeleteSchedule(ctx context.Context, cmd Cmd, p messages.ScheduleRefPayload) (Removed[Schedule], error) {
	entity := "SCHEDULE#" + p.ScheduleID
	st := nucleusStep(machine.Schedule, machine.ScheduleDelete, scheduleKey(p.ScheduleID), s.nucleusApp, entity, machine.NucleusInput{})
	r, err := removing[Schedule](ctx, s, cmd, st, func(machine.Item) ([]joined, machine.Outcome, error) {
		_, resources, _, err := s.GetSchedule(ctx, p.ScheduleID)
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		var js []joined
		for _, r := range resources {
			raw, err := rawItem(r)
			if err != nil {
				return nil, machine.Outcome{}, err
			}
			j, out, err := join(nucleusStep(machine.Resource, machine.ResourceDetach, resourceKey(p.ScheduleID, r.ResourceARN), s.nucleusApp, "", machine.NucleusInput{}), raw)
			if err != nil || !out.Applies() {
				return nil, out, err
			}
			js = append(js, j)
		}
		audit, err := s.entry(cmd, cmd.At, entity, ActionUpdate, messages.ExecSuccess, map[string]any{"deleted": true, "resources": len(resources)})
		return append(js, audit), machine.Outcome{}, err
	})
	return r, wrap(err, "delete schedule %s", p.ScheduleID)
}

// AttachResource attaches a resource of a registered account to a
// schedule.
func (s *Store) AttachResource(ctx context.Context, cmd Cmd, p messages.ResourcePayload, arn messages.ResourceARN) (TargetedResource, error) {
	r := TargetedResource{PK: "SCHEDULE#" + p.ScheduleID, SK: "RESOURCE#" + arn.ARN, GSI1PK: "ACCOUNT#" + arn.AccountID,
		GSI1SK: "SCHEDULE#" + p.ScheduleID, ResourceARN: arn.ARN, ResourceType: arn.Type, Region: arn.Region,
		AccountID: arn.AccountID, ScheduleID: p.ScheduleID, AttachedAt: iso(cmd.At)}
	row, err := rawItem(r)
	if err != nil {
		return TargetedResource{}, err
	}
	st := nucleusStep(machine.Resource, machine.ResourceAttach, resourceKey(p.ScheduleID, arn.ARN), s.nucleusApp,
		"SCHEDULE#"+p.ScheduleID, machine.NucleusInput{Row: row})
	err = applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.NucleusInput) ([]joined, machine.Outcome, error) {
		return s.resourceJoins(ctx, cmd, p, machine.ScheduleAttach, func() ([]joined, machine.Outcome, error) {
			read, err := getRaw(ctx, s.db, s.nucleusApp, accountKey(arn.AccountID))
			if err != nil {
				return nil, machine.Outcome{}, err
			}
			j, out, err := join(nucleusStep(machine.Account, machine.AccountExists, accountKey(arn.AccountID), s.nucleusApp, "", machine.NucleusInput{}), read)
			return []joined{j}, out, err
		})
	}, &r)
	return r, wrap(err, "attach %s to schedule %s", arn.ARN, p.ScheduleID)
}

// DetachResource detaches a resource from its schedule.
func (s *Store) DetachResource(ctx context.Context, cmd Cmd, p messages.ResourcePayload) (Removed[TargetedResource], error) {
	st := nucleusStep(machine.Resource, machine.ResourceDetach, resourceKey(p.ScheduleID, p.ResourceARN), s.nucleusApp,
		"SCHEDULE#"+p.ScheduleID, machine.NucleusInput{})
	r, err := removing[TargetedResource](ctx, s, cmd, st, func(machine.Item) ([]joined, machine.Outcome, error) {
		return s.resourceJoins(ctx, cmd, p, machine.ScheduleDetach)
	})
	return r, wrap(err, "detach %s from schedule %s", p.ResourceARN, p.ScheduleID)
}

// Refuse records a rejection decided before the store is asked (a
// schedule whose cron does not parse), or replays the command's outcome
// if it has one.
func (s *Store) Refuse(ctx context.Context, cmd Cmd, entity, reason string) error {
	return s.recordRejection(ctx, cmd, entity, &Rejection{Reason: reason, At: cmd.At}, nil)
}

// resourceJoins are what a change to a schedule's resources joins: the
// schedule's count, more, and the change's audit entry.
func (s *Store) resourceJoins(ctx context.Context, cmd Cmd, p messages.ResourcePayload, transition string, more ...func() ([]joined, machine.Outcome, error)) ([]joined, machine.Outcome, error) {
	schedule := func() ([]joined, machine.Outcome, error) {
		read, err := getRaw(ctx, s.db, s.nucleusApp, scheduleKey(p.ScheduleID))
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		j, out, err := join(nucleusStep(machine.Schedule, transition, scheduleKey(p.ScheduleID), s.nucleusApp, "", machine.NucleusInput{}), read)
		return []joined{j}, out, err
	}
	audit := func() ([]joined, machine.Outcome, error) {
		j, err := s.entry(cmd, cmd.At, "SCHEDULE#"+p.ScheduleID, ActionUpdate, messages.ExecSuccess, map[string]string{"change": cmd.Type, "resource_arn": p.ResourceARN})
		return []joined{j}, machine.Outcome{}, err
	}
	return joins(append(append([]func() ([]joined, machine.Outcome, error){schedule}, more...), audit)...)
}

// GetSchedule reads a schedule and its resources: one query of its
// partition, strongly consistent.
func (s *Store) GetSchedule(ctx context.Context, id string) (Schedule, []TargetedResource, bool, error) {
	items, err := queryItems(ctx, s.db, s.nucleusApp, "", expression.Key("pk").Equal(expression.Value("SCHEDULE#"+id)), nil, 0)
	if err != nil {
		return Schedule{}, nil, false, err
	}
	var (
		sch       Schedule
		found     bool
		resources []TargetedResource
	)
	for _, item := range items {
		sk, _ := item["sk"].(*types.AttributeValueMemberS)
		switch {
		case sk == nil:
		case sk.Value == "METADATA":
			found = true
			if err := attributevalue.UnmarshalMap(item, &sch); err != nil {
				return Schedule{}, nil, false, fmt.Errorf("decode schedule %s: %w", id, err)
			}
		case strings.HasPrefix(sk.Value, "RESOURCE#"):
			var r TargetedResource
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return Schedule{}, nil, false, fmt.Errorf("decode resource %s of schedule %s: %w", sk.Value, id, err)
			}
			resources = append(resources, r)
		}
	}
	return sch, resources, found, nil
}

// Accounts lists every account by name (GSI1, TYPE#ACCOUNT).
func (s *Store) Accounts(ctx context.Context) ([]Account, error) {
	return query[Account](ctx, s.db, s.nucleusApp, "GSI1", expression.Key("gsi1pk").Equal(expression.Value("TYPE#ACCOUNT")), nil, 0)
}

// Schedules lists every schedule by name (GSI1, TYPE#SCHEDULE).
func (s *Store) Schedules(ctx context.Context) ([]Schedule, error) {
	return query[Schedule](ctx, s.db, s.nucleusApp, "GSI1", expression.Key("gsi1pk").Equal(expression.Value("TYPE#SCHEDULE")), nil, 0)
}

// AccountResources lists every resource of an account, by schedule
// (GSI1, ACCOUNT#<id>).
func (s *Store) AccountResources(ctx context.Context, accountID string) ([]TargetedResource, error) {
	return query[TargetedResource](ctx, s.db, s.nucleusApp, "GSI1", expression.Key("gsi1pk").Equal(expression.Value("ACCOUNT#"+accountID)), nil, 0)
}

// WindowOutcome is what a window did: each resource's result, and the
// schedule's next window of its edge (none when the schedule changed
// while the window acted). Overtaken is a window that acted on nothing:
// the other edge's cron had fired since, and later than its own.
type WindowOutcome struct {
	Results   []messages.ExecutionResult `json:"results"`
	NextAt    string                     `json:"next_at,omitempty"`
	Overtaken bool                       `json:"overtaken,omitempty"`
}

// RecordedWindow is the outcome a schedule.window-due recorded before, if
// any; a window that did nothing replays as its *Rejection.
func (s *Store) RecordedWindow(ctx context.Context, cmd Cmd) (WindowOutcome, bool, error) {
	var w WindowOutcome
	found, err := s.recorded(ctx, cmd, &w)
	return w, found, err
}

func advanceOf(edge string) string {
	if edge == messages.EdgeStart {
		return machine.ScheduleAdvStart
	}
	return machine.ScheduleAdvStop
}

// OpenWindow reads a schedule and its resources for window (its edge and
// time, as armed). A window the schedule does not have armed — the
// schedule deleted, disabled or re-timed since — is a recorded *Rejection
// (not_found, disabled, superseded): it does nothing; unless a delivery of
// it has begun acting on the resources, which then go on (CloseWindow
// records their results). When the window already has an outcome,
// replayed is it.
func (s *Store) OpenWindow(ctx context.Context, cmd Cmd, id, edge, windowAt string) (sch Schedule, resources []TargetedResource, replayed *WindowOutcome, err error) {
	sch, resources, found, err := s.GetSchedule(ctx, id)
	if err != nil {
		return Schedule{}, nil, nil, err
	}
	var read machine.Item
	if found {
		if read, err = rawItem(sch); err != nil {
			return Schedule{}, nil, nil, err
		}
	}
	t := machine.Schedule.Transition(advanceOf(edge))
	out := machine.Schedule.Decide(t, read, read, machine.NucleusInput{WindowAt: windowAt})
	window := WindowName(edge, windowAt)
	begun := slices.ContainsFunc(resources, func(r TargetedResource) bool { return r.Window == window || r.LastWindow == window })
	if out.Applies() || begun {
		return sch, resources, nil, nil
	}
	var w WindowOutcome
	if err := s.recordRejection(ctx, cmd, "SCHEDULE#"+id, &Rejection{Reason: out.Reason, At: cmd.At}, &w); err != nil {
		return Schedule{}, nil, nil, wrap(err, "open %s window of schedule %s", edge, id)
	}
	return Schedule{}, nil, &w, nil
}

// WindowName names a window on the resources it holds and acted on.
func WindowName(edge, windowAt string) string { return edge + "@" + windowAt }

// ErrResourceBusy means another delivery of a window holds a resource.
var ErrResourceBusy = errors.New("resource held by another delivery")

// ClaimResource holds a resource for window until until, so that one
// delivery acts on it, deciding at at. acted is true, with the resource as
// it is, when the window already acted on it (an earlier delivery did):
// its result is on the item.
func (s *Store) ClaimResource(ctx context.Context, cmd Cmd, at time.Time, r TargetedResource, window string, until time.Time) (res TargetedResource, acted bool, err error) {
	st := nucleusStep(machine.Resource, machine.ResourceClaim, resourceKey(r.ScheduleID, r.ResourceARN), s.nucleusApp, "",
		machine.NucleusInput{Now: iso(at), Window: window, ActingUntil: iso(until)})
	err = retrying(ctx, st, func() error {
		written, out, err := writeAlone(ctx, s.db, st, nil)
		switch {
		case err != nil:
			return err
		case out.Reason == machine.ReasonActed:
			acted = true
			res, _, err = getItem[TargetedResource](ctx, s.db, s.nucleusApp, st.key)
			return err
		case out.Reason == machine.ReasonBusy:
			return ErrResourceBusy
		case !out.Applies():
			return &Rejection{Reason: out.Reason, At: at}
		}
		return attributevalue.UnmarshalMap(written, &res)
	})
	return res, acted, wrap(err, "claim %s for %s", r.ResourceARN, window)
}

// FinishResource records what window did to a resource it holds, at at,
// with its EXECUTE audit entry, in one transaction. count is the ECS
// desired count a stop found. It returns the window's result for the
// resource: result, or, when another delivery of the window recorded one
// first, that one. A resource that moved on without this window's result
// (detached, or taken by another window once the hold lapsed) gets the
// entry alone: every call made is audited.
func (s *Store) FinishResource(ctx context.Context, cmd Cmd, at time.Time, r TargetedResource, edge, window string, result messages.ExecutionResult, count int) (messages.ExecutionResult, error) {
	transition := machine.ResourceFail
	switch {
	case result.Status == messages.ExecFail:
	case edge == messages.EdgeStart:
		transition = machine.ResourceStart
	default:
		transition = machine.ResourceStop
	}
	st := nucleusStep(machine.Resource, transition, resourceKey(r.ScheduleID, r.ResourceARN), s.nucleusApp, "",
		machine.NucleusInput{Now: iso(at), Window: window, Status: result.Status, Error: result.Error, Count: count})
	audit, err := s.entry(cmd, at, "SCHEDULE#"+r.ScheduleID, ActionExecute, result.Status, map[string]string{
		"resource_arn": r.ResourceARN, "resource_type": r.ResourceType, "region": r.Region, "edge": edge, "window": window, "error": result.Error,
	}, r.ResourceARN)
	if err != nil {
		return result, err
	}
	st.with = []joined{audit}
	refused := false
	err = retrying(ctx, st, func() error {
		read, err := getRaw(ctx, s.db, s.nucleusApp, st.key)
		if err != nil {
			return err
		}
		out, err := writeJoined(ctx, s, st, read)
		refused = err == nil && !out.Applies()
		return err
	})
	if err != nil || !refused {
		return result, wrap(err, "finish %s for %s", r.ResourceARN, window)
	}
	now, _, err := getItem[TargetedResource](ctx, s.db, s.nucleusApp, st.key)
	if err != nil {
		return result, fmt.Errorf("finish %s for %s: %w", r.ResourceARN, window, err)
	}
	if now.LastWindow == window {
		return messages.ExecutionResult{ResourceARN: r.ResourceARN, ResourceType: r.ResourceType, Status: now.LastStatus, Error: now.LastError}, nil
	}
	put := audit.item.Put
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item}); err != nil {
		return result, fmt.Errorf("audit %s for %s: %w", r.ResourceARN, window, err)
	}
	return result, nil
}

// CloseWindow records a window's outcome and moves the schedule's window
// of that edge on to next. A schedule changed while the window acted
// (disabled, deleted or re-timed) keeps the timers the change left: the
// outcome records the results without a next window, and the reason.
func (s *Store) CloseWindow(ctx context.Context, cmd Cmd, id, edge, windowAt, next string, w WindowOutcome) (WindowOutcome, error) {
	entity := "SCHEDULE#" + id
	st := nucleusStep(machine.Schedule, advanceOf(edge), scheduleKey(id), s.nucleusApp, entity, machine.NucleusInput{WindowAt: windowAt, Next: next})
	var replayed WindowOutcome
	err := retrying(ctx, st, func() error {
		read, err := getRaw(ctx, s.db, s.nucleusApp, st.key)
		if err != nil {
			return err
		}
		out := st.m.Decide(st.t, read, read, st.in)
		if out.Applies() {
			w.NextAt = next
			st.details = &w
			if out, err = write(ctx, s, cmd, st, read, &replayed); err != nil || out.Applies() {
				return err
			}
			if out.Stale {
				return errStale
			}
		}
		w.NextAt = ""
		_, err = s.record(ctx, cmd, entity, Applied, out.Reason, &w, &replayed)
		return err
	})
	if err != nil {
		return WindowOutcome{}, wrap(err, "close %s window of schedule %s", edge, id)
	}
	if replayed.Results != nil {
		return replayed, nil
	}
	return w, nil
}
