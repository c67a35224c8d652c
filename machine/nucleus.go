package machine

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// States of the Nucleus items. An account's status is the seed's; a
// schedule's state mirrors its enabled flag (a machine's state is a
// string); a resource's state is its last execution, or acting while a
// window holds it.
const (
	ScheduleEnabled  = "enabled"
	ScheduleDisabled = "disabled"
	ResourceAttached = "attached"
	ResourceActing   = "acting"
	ResourceRunning  = "running"
	ResourceStopped  = "stopped"
	ResourceFailed   = "failed"
)

// Reasons a window's claim of a resource is refused, which never reach a
// producer: the window already acted on it (an earlier delivery), or
// another delivery is acting on it now.
const (
	ReasonActed = "acted"
	ReasonBusy  = "busy"
)

// NucleusInput is what a Nucleus transition decides on besides the item.
type NucleusInput struct {
	// Now is the command's decision time as stored (ISO 8601, UTC, ms).
	Now string
	// Row is the item a creation or replacement writes, as stored.
	Row Item
	// Name and Role are an account's new name and role (empty: kept);
	// Role is also the role an account test assumed.
	Name, Role string
	// NextStart and NextStop are a schedule's next windows; Next the
	// next window of the edge a window advances.
	NextStart, NextStop, Next string
	// Window is the window acting on a resource ("start@<window_at>"),
	// WindowAt its time as armed; ActingUntil when its hold lapses.
	Window, WindowAt, ActingUntil string
	// Status and Error are a resource's execution (or an account test's)
	// result; Count the ECS desired count a stop found.
	Status, Error string
	Count         int
}

// Names of the Nucleus transitions.
const (
	AccountRegister   = "register"
	AccountRename     = "rename"
	AccountRerole     = "rerole"
	AccountPass       = "pass"
	AccountFail       = "fail"
	AccountExists     = "exists"
	ScheduleUpsertOn  = "upsert-enabled"
	ScheduleUpsertOff = "upsert-disabled"
	ScheduleEnable    = "enable"
	ScheduleDisable   = "disable"
	ScheduleDelete    = "delete"
	ScheduleAttach    = "attach"
	ScheduleDetach    = "detach"
	ScheduleAdvStart  = "advance-start"
	ScheduleAdvStop   = "advance-stop"
	ResourceAttach    = "attach"
	ResourceDetach    = "detach"
	ResourceClaim     = "claim"
	ResourceStart     = "started"
	ResourceStop      = "stopped"
	ResourceFail      = "failed"
)

var accountStates = []string{messages.AccountPending, messages.AccountActive, messages.AccountFailed}

func nucleusNow(in NucleusInput, _ Item) any { return in.Now }

func nucleusText(f func(NucleusInput) string) func(NucleusInput, Item) any {
	return func(in NucleusInput, _ Item) any {
		if v := f(in); v != "" {
			return v
		}
		return nil
	}
}

func nucleusRow(attrs ...string) []Assign[NucleusInput] {
	return copyFrom(attrs, func(in NucleusInput) Item { return in.Row })
}

// Account is the machine of a registered AWS account: pending until its
// role is assumed once (a test), then active or failed by its last test;
// a new role makes it pending again.
var Account = &Machine[NucleusInput]{
	Name: "account", State: "status", Key: "pk", States: accountStates,
	Transitions: []Transition[NucleusInput]{
		{
			Name: AccountRegister, Command: messages.AccountRegister, From: []string{Absent}, To: messages.AccountPending,
			Set:   nucleusRow("pk", "sk", "gsi1pk", "gsi1sk", "account_id", "account_name", "role_arn", "created_at", "updated_at"),
			Event: messages.AccountRegistered, Rejected: messages.NucleusRejected,
			Refuse: map[string]string{messages.AccountPending: messages.ReasonAlreadyExists,
				messages.AccountActive: messages.ReasonAlreadyExists, messages.AccountFailed: messages.ReasonAlreadyExists},
		},
		{
			Name: AccountRename, Command: messages.AccountUpdate, Doc: "its name alone", From: accountStates, To: Same,
			Set: []Assign[NucleusInput]{
				{"account_name", nucleusText(func(in NucleusInput) string { return in.Name })},
				{"gsi1sk", nucleusText(func(in NucleusInput) string { return in.Name })},
				{"updated_at", nucleusNow},
			},
			Event: messages.AccountUpdated, Rejected: messages.NucleusRejected,
		},
		{
			Name: AccountRerole, Command: messages.AccountUpdate, Doc: "a new role, untested", From: accountStates, To: messages.AccountPending,
			Set: []Assign[NucleusInput]{
				{"role_arn", nucleusText(func(in NucleusInput) string { return in.Role })},
				{"account_name", nucleusText(func(in NucleusInput) string { return in.Name })},
				{"gsi1sk", nucleusText(func(in NucleusInput) string { return in.Name })},
				{"updated_at", nucleusNow},
			},
			Remove: []string{"last_test_error"},
			Event:  messages.AccountUpdated, Rejected: messages.NucleusRejected,
		},
		accountTest(AccountPass, "its role assumed", messages.AccountActive, nil, []string{"last_test_error"}),
		accountTest(AccountFail, "its role not assumed", messages.AccountFailed,
			[]Assign[NucleusInput]{{"last_test_error", nucleusText(func(in NucleusInput) string { return in.Error })}}, nil),
		{
			Name: AccountExists, Command: messages.ResourceAttach, Doc: "a resource of an account registered",
			From: accountStates, To: Same, Rejected: messages.NucleusRejected,
			Refuse: map[string]string{Absent: messages.ReasonAccountNotFound},
		},
	},
}

// accountTest records a test's result, if the role tested is still the
// account's.
func accountTest(name, doc, to string, set []Assign[NucleusInput], remove []string) Transition[NucleusInput] {
	return Transition[NucleusInput]{
		Name: name, Command: messages.AccountTest, Doc: doc, From: accountStates, To: to,
		Guards: []Guard[NucleusInput]{{Name: "role tested", Reason: messages.ReasonRoleChanged, Attr: "role_arn", Op: Eq,
			Value: func(in NucleusInput, _ Item) any { return in.Role }}},
		Set:    append(set, Assign[NucleusInput]{"last_test_run_at", nucleusNow}),
		Remove: remove, Event: messages.AccountTested, Rejected: messages.NucleusRejected,
	}
}

var scheduleStates = []string{ScheduleEnabled, ScheduleDisabled}

// counted pins a schedule's resource count as read: attaching, detaching
// and deleting all depend on it, so none of them misses another.
var counted = Guard[NucleusInput]{Name: "resources unchanged", Attr: "resource_count", Op: Eq, Value: func(_ NucleusInput, read Item) any {
	if _, ok := read["resource_count"]; !ok {
		return nil
	}
	return readNumber(read, "resource_count")
}}

func countBy(d int) Assign[NucleusInput] {
	return Assign[NucleusInput]{"resource_count", func(_ NucleusInput, read Item) any { return int64(number(read, "resource_count")) + int64(d) }}
}

// upsert writes a schedule whole, keeping what the command does not
// give: when it was created, and how many resources it has.
func upsert(name, to string) Transition[NucleusInput] {
	return Transition[NucleusInput]{
		Name: name, Command: messages.ScheduleUpsert, Doc: "enabled " + map[string]string{ScheduleEnabled: "true", ScheduleDisabled: "false"}[to],
		From: []string{Absent, ScheduleEnabled, ScheduleDisabled}, To: to, Guards: []Guard[NucleusInput]{counted},
		Set: append(nucleusRow("pk", "sk", "gsi1pk", "gsi1sk", "schedule_id", "schedule_name", "start_cron", "end_cron",
			"timezone", "enabled", "next_start_at", "next_stop_at", "updated_at"),
			Assign[NucleusInput]{"created_at", func(in NucleusInput, read Item) any {
				if c, ok := read["created_at"].(*types.AttributeValueMemberS); ok {
					return c.Value
				}
				return in.Now
			}},
			countBy(0)),
		Event: messages.ScheduleUpserted, Rejected: messages.NucleusRejected,
	}
}

// advanceWindow moves a schedule's next window of one edge on, if it is
// still the window that fired and the schedule is enabled.
func advanceWindow(name, attr string) Transition[NucleusInput] {
	return Transition[NucleusInput]{
		Name: name, Command: messages.ScheduleWindowDue, Doc: attr + " as armed",
		From: []string{ScheduleEnabled}, To: Same,
		Guards: []Guard[NucleusInput]{{Name: "window armed", Reason: messages.ReasonSuperseded, Attr: attr, Op: Eq,
			Value: func(in NucleusInput, _ Item) any { return in.WindowAt }}},
		Set:   []Assign[NucleusInput]{{attr, func(in NucleusInput, _ Item) any { return in.Next }}},
		Event: messages.ScheduleWindowExecuted, Rejected: messages.NucleusRejected,
		Refuse: map[string]string{ScheduleDisabled: messages.ReasonDisabled},
	}
}

// Schedule is the machine of a schedule's METADATA item: enabled or
// disabled, its next windows set while enabled; its resource count
// serialises the changes to its resources.
var Schedule = &Machine[NucleusInput]{
	Name: "schedule", State: "schedule_state", Key: "pk", States: scheduleStates,
	Transitions: []Transition[NucleusInput]{
		upsert(ScheduleUpsertOn, ScheduleEnabled),
		upsert(ScheduleUpsertOff, ScheduleDisabled),
		{
			Name: ScheduleEnable, Command: messages.ScheduleEnable, From: scheduleStates, To: ScheduleEnabled,
			Set: []Assign[NucleusInput]{
				{"enabled", func(NucleusInput, Item) any { return true }},
				{"next_start_at", func(in NucleusInput, _ Item) any { return in.NextStart }},
				{"next_stop_at", func(in NucleusInput, _ Item) any { return in.NextStop }},
				{"updated_at", nucleusNow},
			},
			Event: messages.ScheduleEnabled, Rejected: messages.NucleusRejected,
		},
		{
			Name: ScheduleDisable, Command: messages.ScheduleDisable, From: scheduleStates, To: ScheduleDisabled,
			Set:    []Assign[NucleusInput]{{"enabled", func(NucleusInput, Item) any { return false }}, {"updated_at", nucleusNow}},
			Remove: []string{"next_start_at", "next_stop_at"},
			Event:  messages.ScheduleDisabled, Rejected: messages.NucleusRejected,
		},
		{
			Name: ScheduleDelete, Command: messages.ScheduleDelete, Doc: "with every resource",
			From: scheduleStates, To: Absent, Guards: []Guard[NucleusInput]{counted},
			Event: messages.ScheduleDeleted, Rejected: messages.NucleusRejected,
		},
		{
			Name: ScheduleAttach, Command: messages.ResourceAttach, From: scheduleStates, To: Same,
			Guards: []Guard[NucleusInput]{counted, {Name: "room", Reason: messages.ReasonScheduleFull, Attr: "resource_count", Op: Lt,
				Value: func(NucleusInput, Item) any { return messages.MaxScheduleResources }}},
			Set:      []Assign[NucleusInput]{countBy(1)},
			Rejected: messages.NucleusRejected,
		},
		{
			Name: ScheduleDetach, Command: messages.ResourceDetach, From: scheduleStates, To: Same,
			Guards: []Guard[NucleusInput]{counted}, Set: []Assign[NucleusInput]{countBy(-1)},
			Rejected: messages.NucleusRejected,
		},
		advanceWindow(ScheduleAdvStart, "next_start_at"),
		advanceWindow(ScheduleAdvStop, "next_stop_at"),
	},
}

var resourceStates = []string{ResourceAttached, ResourceActing, ResourceRunning, ResourceStopped, ResourceFailed}

// finish records what a window did to a resource it holds; remove names
// what the result clears besides the hold.
func finish(name, to string, remove []string, set ...Assign[NucleusInput]) Transition[NucleusInput] {
	return Transition[NucleusInput]{
		Name: name, Command: messages.ScheduleWindowDue, From: []string{ResourceActing}, To: to,
		Guards: []Guard[NucleusInput]{{Name: "held by the window", Reason: messages.ReasonSuperseded, Attr: "window", Op: Eq,
			Value: func(in NucleusInput, _ Item) any { return in.Window }}},
		Set: append(set,
			Assign[NucleusInput]{"last_window", func(in NucleusInput, _ Item) any { return in.Window }},
			Assign[NucleusInput]{"last_status", func(in NucleusInput, _ Item) any { return in.Status }},
			Assign[NucleusInput]{"last_executed_at", nucleusNow}),
		Remove: append([]string{"window", "acting_until"}, remove...),
	}
}

// Resource is the machine of a targeted resource's item: attached, then
// held by one window at a time while it acts (acting), and left in what
// the window did. A window acts on a resource once: its claim is refused
// once the resource records that window as its last (acted), and while
// another delivery holds it (busy) until that hold lapses.
var Resource = &Machine[NucleusInput]{
	Name: "resource", State: "execution_state", Key: "pk", Unset: ResourceAttached, States: resourceStates,
	Transitions: []Transition[NucleusInput]{
		{
			Name: ResourceAttach, Command: messages.ResourceAttach, From: []string{Absent}, To: ResourceAttached,
			Set: nucleusRow("pk", "sk", "gsi1pk", "gsi1sk", "resource_arn", "resource_type", "region", "account_id",
				"schedule_id", "attached_at"),
			Event: messages.ResourceAttached, Rejected: messages.NucleusRejected,
			Refuse: map[string]string{ResourceAttached: messages.ReasonAlreadyExists, ResourceActing: messages.ReasonAlreadyExists,
				ResourceRunning: messages.ReasonAlreadyExists, ResourceStopped: messages.ReasonAlreadyExists, ResourceFailed: messages.ReasonAlreadyExists},
		},
		{
			Name: ResourceDetach, Command: messages.ResourceDetach, Doc: "or schedule.deleted", From: resourceStates, To: Absent,
			Event: messages.ResourceDetached, Rejected: messages.NucleusRejected,
		},
		{
			Name: ResourceClaim, Command: messages.ScheduleWindowDue, Doc: "a window holds it while it acts",
			From: resourceStates, To: ResourceActing,
			Guards: []Guard[NucleusInput]{
				{Name: "not acted", Reason: ReasonActed, Attr: "last_window", Op: Ne, OrAbsent: true,
					Value: func(in NucleusInput, _ Item) any { return in.Window }},
				{Name: "not held", Reason: ReasonBusy, Attr: "acting_until", Op: Lt, OrAbsent: true,
					Value: func(in NucleusInput, _ Item) any { return in.Now }},
			},
			Set: []Assign[NucleusInput]{
				{"window", func(in NucleusInput, _ Item) any { return in.Window }},
				{"acting_until", func(in NucleusInput, _ Item) any { return in.ActingUntil }},
			},
		},
		finish(ResourceStart, ResourceRunning, []string{"last_error"}),
		finish(ResourceStop, ResourceStopped, []string{"last_error"}, Assign[NucleusInput]{"desired_count", func(in NucleusInput, _ Item) any {
			// An ECS service's count, remembered for the next start; a
			// stop that found it at 0 keeps the one remembered before.
			if in.Count > 0 {
				return int64(in.Count)
			}
			return nil
		}}),
		finish(ResourceFail, ResourceFailed, nil, Assign[NucleusInput]{"last_error", func(in NucleusInput, _ Item) any { return in.Error }}),
	},
}
