package messages

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// Nucleus is the platform that starts and stops cloud resources on
// schedules: AWS accounts, schedules and the resources they target, and
// the audit trail of every change and execution (docs/nucleus.md).
const Nucleus Domain = "nucleus"

// Nucleus commands.
var (
	AccountRegister   = command[AccountRegisterPayload](Nucleus, "account.registered")
	AccountUpdate     = command[AccountUpdatePayload](Nucleus, "account.updated")
	AccountTest       = command[AccountTestPayload](Nucleus, "account.tested")
	ScheduleUpsert    = command[ScheduleUpsertPayload](Nucleus, "schedule.upserted")
	ScheduleDisable   = command[ScheduleRefPayload](Nucleus, "schedule.disabled")
	ScheduleEnable    = command[ScheduleRefPayload](Nucleus, "schedule.enabled")
	ScheduleDelete    = command[ScheduleRefPayload](Nucleus, "schedule.deleted")
	ResourceAttach    = command[ResourcePayload](Nucleus, "resource.attached")
	ResourceDetach    = command[ResourcePayload](Nucleus, "resource.detached")
	ScheduleWindowDue = command[ScheduleWindowPayload](Nucleus, "schedule.window-due")
)

// Nucleus events.
var (
	AccountRegistered      = event[AccountPayload](Nucleus, "account.registered")
	AccountUpdated         = event[AccountPayload](Nucleus, "account.updated")
	AccountTested          = event[AccountTestedPayload](Nucleus, "account.tested")
	ScheduleUpserted       = event[SchedulePayload](Nucleus, "schedule.upserted")
	ScheduleEnabled        = event[SchedulePayload](Nucleus, "schedule.enabled")
	ScheduleDisabled       = event[SchedulePayload](Nucleus, "schedule.disabled")
	ScheduleDeleted        = event[ScheduleDeletedPayload](Nucleus, "schedule.deleted")
	ResourceAttached       = event[ResourceEventPayload](Nucleus, "resource.attached")
	ResourceDetached       = event[ResourceEventPayload](Nucleus, "resource.detached")
	ScheduleWindowExecuted = event[WindowExecutedPayload](Nucleus, "schedule.window-executed")
	// NucleusRejected answers any Nucleus command refused, a window
	// skipped included.
	NucleusRejected = event[NucleusRejectedPayload](Nucleus, "nucleus.command-rejected")
)

// Nucleus rejection reasons (with not_found, already_exists, wrong_state).
const (
	// ReasonInvalidCron, ReasonInvalidTimezone: a schedule whose cron or
	// IANA time zone does not parse; the rejection's detail says why.
	ReasonInvalidCron     = "invalid_cron"
	ReasonInvalidTimezone = "invalid_timezone"
	// ReasonAccountNotFound: a resource of an account never registered.
	ReasonAccountNotFound = "account_not_found"
	// ReasonScheduleFull: a schedule already targets MaxScheduleResources.
	ReasonScheduleFull = "schedule_full"
	// ReasonRoleChanged: an account's role changed while it was tested.
	ReasonRoleChanged = "role_changed"
	// ReasonDisabled, ReasonSuperseded: a window that does nothing, its
	// schedule disabled, or re-timed since the window was armed.
	ReasonDisabled   = "disabled"
	ReasonSuperseded = "superseded"
)

// Account statuses: registered and not yet tested (or its role changed
// since), its role last assumed, or its last test failed.
const (
	AccountPending = "PENDING"
	AccountActive  = "ACTIVE"
	AccountFailed  = "FAILED"
)

// Window edges and execution statuses.
const (
	EdgeStart   = "start"
	EdgeStop    = "stop"
	ExecSuccess = "SUCCESS"
	ExecFail    = "FAIL"
)

// MaxScheduleResources bounds a schedule's resources: deleting a schedule
// removes it and all of them in one transaction.
const MaxScheduleResources = 50

const (
	maxCron = 128
	maxZone = 64
	// maxResourceARN keeps a resource's key within DynamoDB's 1024-byte
	// sort key: ParseResourceARN does not bound the region.
	maxResourceARN = 1024
)

var (
	edges            = []string{EdgeStart, EdgeStop}
	accountIDPattern = regexp.MustCompile(`^[0-9]{12}$`)
	// windowAtPattern is the date-time the schema's pattern admits:
	// time.Parse alone also takes a comma fraction and a +24:00 offset.
	windowAtPattern = regexp.MustCompile(dateTimePattern(`[0-9]{4}`))
)

// resourceARNSchemaPattern is ParseResourceARN's grammar, built from its
// own patterns; a DB identifier's length, which it cannot bound, is left
// to resourceARNSchema's not.
var resourceARNSchemaPattern = func() string {
	inner := func(re *regexp.Regexp) string { return strings.TrimSuffix(strings.TrimPrefix(re.String(), "^"), "$") }
	region, account := inner(regionPattern), "[0-9]{12}"
	ecsName := inner(ecsNamePattern)
	return "^arn:(?:" + strings.Join(partitions, "|") + "):(?:" +
		"ec2:" + region + ":" + account + ":instance/" + inner(instanceIDPattern) +
		"|rds:" + region + ":" + account + ":db:" + inner(dbIdentifierPattern) +
		"|ecs:" + region + ":" + account + ":service/(?:" + ecsName + "/)?" + ecsName + ")$"
}()

func checkAccountID(v string) error {
	if !accountIDPattern.MatchString(v) {
		return invalid("account_id", "%q is not a 12-digit AWS account ID", v)
	}
	return nil
}

// checkRole checks a role ARN and that it is a role of account.
func checkRole(role, account string) error {
	owner, err := ParseRoleARN(role)
	if err != nil {
		return invalid("role_arn", "%v", err)
	}
	if owner != account {
		return invalid("role_arn", "role of account %s, not of %s", owner, account)
	}
	return nil
}

// roleSchema mirrors ParseRoleARN; the role's account is left to
// Validate.
func roleSchema(p *jsonschema.Schema) {
	p.MinLength, p.MaxLength = count(1), count(maxRoleARN)
	p.Pattern = roleARNPattern.String()
}

// resourceARNSchema mirrors ParseResourceARN and maxResourceARN.
func resourceARNSchema(p *jsonschema.Schema) {
	p.MinLength, p.MaxLength = count(1), count(maxResourceARN)
	p.Pattern = resourceARNSchemaPattern
	p.Not = &jsonschema.Schema{Pattern: fmt.Sprintf(`^arn:[^:]*:rds:[^:]*:[^:]*:db:.{%d}`, maxDBIdentifier+1),
		Description: fmt.Sprintf("A DB instance identifier is at most %d characters.", maxDBIdentifier)}
}

// AccountRegisterPayload registers an AWS account and the IAM role
// transit assumes in it.
type AccountRegisterPayload struct {
	// AccountID is the AWS account's 12-digit ID.
	AccountID   string `json:"account_id"`
	AccountName string `json:"account_name"`
	// RoleARN is a role of that account transit may assume.
	RoleARN string `json:"role_arn"`
	UserID  string `json:"user_id"`
}

func (AccountRegisterPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	patternSchema(property(s, "account_id"), accountIDPattern, 12)
	requiredTextSchema(property(s, "account_name"), maxName)
	roleSchema(property(s, "role_arn"))
	entityIDSchema(property(s, "user_id"))
	goOnly(s, "role_arn is a role of account_id")
}

func (p *AccountRegisterPayload) Validate() error {
	return first(checkAccountID(p.AccountID), required("account_name", p.AccountName, maxName),
		checkRole(p.RoleARN, p.AccountID), checkEntityID("user_id", p.UserID))
}

// AccountUpdatePayload renames an account or changes its role (which
// makes it untested again); at least one of the two.
type AccountUpdatePayload struct {
	AccountID   string `json:"account_id"`
	AccountName string `json:"account_name,omitempty"`
	RoleARN     string `json:"role_arn,omitempty"`
	UserID      string `json:"user_id"`
}

func (AccountUpdatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	patternSchema(property(s, "account_id"), accountIDPattern, 12)
	textSchema(property(s, "account_name"), maxName)
	nullable(property(s, "account_name"))
	role := property(s, "role_arn")
	role.MaxLength, role.Pattern = count(maxRoleARN), optionalPattern(roleARNPattern)
	nullable(role)
	entityIDSchema(property(s, "user_id"))
	for _, name := range []string{"account_name", "role_arn"} {
		set := &jsonschema.Schema{Properties: jsonschema.NewProperties(), Required: []string{name}}
		set.Properties.Set(name, &jsonschema.Schema{Type: "string", MinLength: count(1)})
		s.AnyOf = append(s.AnyOf, set)
	}
	goOnly(s, "role_arn is a role of account_id")
}

func (p *AccountUpdatePayload) Validate() error {
	if err := first(checkAccountID(p.AccountID), checkText("account_name", p.AccountName, maxName),
		checkEntityID("user_id", p.UserID)); err != nil {
		return err
	}
	if p.AccountName == "" && p.RoleARN == "" {
		return invalid("account_name", "account_name or role_arn, at least one")
	}
	if p.RoleARN != "" {
		return checkRole(p.RoleARN, p.AccountID)
	}
	return nil
}

// AccountTestPayload tests an account: transit assumes its role and asks
// STS who it is.
type AccountTestPayload struct {
	AccountID string `json:"account_id"`
	UserID    string `json:"user_id"`
}

func (AccountTestPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	patternSchema(property(s, "account_id"), accountIDPattern, 12)
	entityIDSchema(property(s, "user_id"))
}

func (p *AccountTestPayload) Validate() error {
	return first(checkAccountID(p.AccountID), checkEntityID("user_id", p.UserID))
}

// ScheduleUpsertPayload creates or replaces a schedule. Its crons are
// standard 5-field crons (or @daily and the like) read in timezone, an
// IANA zone; one that does not parse is rejected (invalid_cron,
// invalid_timezone) with the reason in the rejection's detail.
type ScheduleUpsertPayload struct {
	ScheduleID   string `json:"schedule_id"`
	ScheduleName string `json:"schedule_name"`
	// StartCron says when the resources start, EndCron when they stop.
	StartCron string `json:"start_cron"`
	EndCron   string `json:"end_cron"`
	Timezone  string `json:"timezone"`
	// Enabled is true when absent.
	Enabled *bool  `json:"enabled,omitempty"`
	UserID  string `json:"user_id"`
}

func (ScheduleUpsertPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "schedule_id"))
	requiredTextSchema(property(s, "schedule_name"), maxName)
	requiredTextSchema(property(s, "start_cron"), maxCron)
	requiredTextSchema(property(s, "end_cron"), maxCron)
	requiredTextSchema(property(s, "timezone"), maxZone)
	enabled := property(s, "enabled")
	enabled.Default = true
	nullable(enabled)
	entityIDSchema(property(s, "user_id"))
}

func (p *ScheduleUpsertPayload) Validate() error {
	if p.Enabled == nil {
		enabled := true
		p.Enabled = &enabled
	}
	return first(checkEntityID("schedule_id", p.ScheduleID), required("schedule_name", p.ScheduleName, maxName),
		required("start_cron", p.StartCron, maxCron), required("end_cron", p.EndCron, maxCron),
		required("timezone", p.Timezone, maxZone), checkEntityID("user_id", p.UserID))
}

// ScheduleRefPayload names a schedule to enable, disable or delete.
type ScheduleRefPayload struct {
	ScheduleID string `json:"schedule_id"`
	UserID     string `json:"user_id"`
}

func (ScheduleRefPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "schedule_id"))
	entityIDSchema(property(s, "user_id"))
}

func (p *ScheduleRefPayload) Validate() error {
	return first(checkEntityID("schedule_id", p.ScheduleID), checkEntityID("user_id", p.UserID))
}

// ResourcePayload attaches a resource to a schedule, or detaches it. The
// ARN names an EC2 instance, an RDS DB instance or an ECS service of a
// registered account.
type ResourcePayload struct {
	ScheduleID  string `json:"schedule_id"`
	ResourceARN string `json:"resource_arn"`
	UserID      string `json:"user_id"`
}

func (ResourcePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "schedule_id"))
	resourceARNSchema(property(s, "resource_arn"))
	entityIDSchema(property(s, "user_id"))
}

func (p *ResourcePayload) Validate() error {
	if err := first(checkEntityID("schedule_id", p.ScheduleID), checkEntityID("user_id", p.UserID)); err != nil {
		return err
	}
	if n := len(p.ResourceARN); n > maxResourceARN {
		return invalid("resource_arn", "%d characters, at most %d", n, maxResourceARN)
	}
	if _, err := ParseResourceARN(p.ResourceARN); err != nil {
		return invalid("resource_arn", "%v", err)
	}
	return nil
}

// ScheduleWindowPayload is sent by a schedule's timer when a window is
// due: the schedule's resources start (edge start) or stop.
type ScheduleWindowPayload struct {
	ScheduleID string `json:"schedule_id"`
	Edge       string `json:"edge"`
	// WindowAt is the window's time as armed (RFC 3339, UTC, ms): a
	// window the schedule no longer has armed does nothing.
	WindowAt string `json:"window_at"`
	UserID   string `json:"user_id,omitempty"`
}

func (ScheduleWindowPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "schedule_id"))
	enumSchema(property(s, "edge"), edges)
	at := property(s, "window_at")
	at.Pattern, at.Format = windowAtPattern.String(), "date-time"
	u := property(s, "user_id")
	defaultedEnumSchema(u, []string{"system"}, "system")
	u.Description = "user_id is system, the default: transit sends this command to itself."
}

func (p *ScheduleWindowPayload) Validate() error {
	if p.UserID == "" {
		p.UserID = "system"
	}
	if err := first(checkEntityID("schedule_id", p.ScheduleID), checkOneOf("edge", p.Edge, edges),
		checkOneOf("user_id", p.UserID, []string{"system"})); err != nil {
		return err
	}
	if _, err := time.Parse(time.RFC3339, p.WindowAt); err != nil || !windowAtPattern.MatchString(p.WindowAt) {
		return invalid("window_at", "%q is not an RFC 3339 time", p.WindowAt)
	}
	return nil
}

// AccountPayload is an account registered or updated.
type AccountPayload struct {
	AccountID   string `json:"account_id"`
	AccountName string `json:"account_name"`
	RoleARN     string `json:"role_arn"`
	// Status is PENDING (untested), ACTIVE or FAILED.
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// AccountTestedPayload is an account's test: its role assumed (ACTIVE)
// or not (FAILED, with the AWS error).
type AccountTestedPayload struct {
	AccountID string `json:"account_id"`
	Status    string `json:"status"`
	// Identity is the ARN STS reported for the assumed role.
	Identity string `json:"identity,omitempty"`
	Error    string `json:"error,omitempty"`
	TestedAt string `json:"tested_at"`
}

// SchedulePayload is a schedule upserted, enabled or disabled, with its
// next windows when enabled.
type SchedulePayload struct {
	ScheduleID   string `json:"schedule_id"`
	ScheduleName string `json:"schedule_name"`
	StartCron    string `json:"start_cron"`
	EndCron      string `json:"end_cron"`
	Timezone     string `json:"timezone"`
	Enabled      bool   `json:"enabled"`
	NextStartAt  string `json:"next_start_at,omitempty"`
	NextStopAt   string `json:"next_stop_at,omitempty"`
	UpdatedAt    string `json:"updated_at"`
}

// ScheduleDeletedPayload is a schedule deleted with its resources.
type ScheduleDeletedPayload struct {
	ScheduleID   string `json:"schedule_id"`
	ScheduleName string `json:"schedule_name"`
	// Resources is how many resources it targeted.
	Resources int    `json:"resources"`
	DeletedAt string `json:"deleted_at"`
}

// ResourceEventPayload is a resource attached to a schedule or detached.
type ResourceEventPayload struct {
	ScheduleID   string `json:"schedule_id"`
	ResourceARN  string `json:"resource_arn"`
	ResourceType string `json:"resource_type"`
	Region       string `json:"region"`
	AccountID    string `json:"account_id"`
	At           string `json:"at"`
}

// WindowExecutedPayload is a window that acted on its schedule's
// resources, each result as audited, and the schedule's next window of
// that edge.
type WindowExecutedPayload struct {
	ScheduleID string            `json:"schedule_id"`
	Edge       string            `json:"edge"`
	WindowAt   string            `json:"window_at"`
	Results    []ExecutionResult `json:"results"`
	// NextAt is the edge's next window, armed; absent when the schedule
	// was disabled, deleted or re-timed while this one acted.
	NextAt string `json:"next_at,omitempty"`
	// Overtaken: the window acted on nothing, as the other edge's cron
	// had fired since, and later than its own (transit was down through
	// both).
	Overtaken bool `json:"overtaken,omitempty"`
}

// ExecutionResult is what a window did to one resource.
type ExecutionResult struct {
	ResourceARN  string `json:"resource_arn"`
	ResourceType string `json:"resource_type"`
	// Status is SUCCESS or FAIL.
	Status string `json:"status"`
	// Error is the AWS error of a FAIL.
	Error string `json:"error,omitempty"`
}

// NucleusRejectedPayload is a Nucleus command refused, or a window that
// did nothing.
type NucleusRejectedPayload struct {
	Command Type `json:"command"`
	// ID is what the command named: the account or schedule ID.
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	Reason string `json:"reason"`
	// Detail says more where the reason alone does not: why a cron does
	// not parse, the resource a command named.
	Detail string `json:"detail,omitempty"`
}

// RejectionReason makes it a Rejection.
func (p NucleusRejectedPayload) RejectionReason() string { return p.Reason }
