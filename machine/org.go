package machine

import (
	"transit/messages"
)

// States of the org domain's items. Only users have a state attribute
// (status); every other item that exists is in its one state.
const (
	OrgCreated     = "created"
	UserActive     = "active"
	UserSuspended  = "suspended"
	EmailClaimed   = "claimed"
	ProjectCreated = "created"
	SettingsSet    = "set"
	SecretStored   = "stored"
)

// OrgInput is what an org-domain transition decides on besides the item.
type OrgInput struct {
	// Now is the command's decision time as stored (ISO 8601, UTC, ms).
	Now string
	// Row is the item a creation or replacement writes, as stored.
	Row Item
	// OrgID is the org the command acts in.
	OrgID string
	// Roles are the roles that may act (a user acting); Model a task's
	// model, which an allow-list must hold.
	Roles []string
	Model string
}

// Names of the org-domain transitions.
const (
	OrgCreate        = "create"
	OrgExists        = "exists"
	UserRegister     = "register"
	UserSuspend      = "suspend"
	UserAct          = "act"
	EmailTake        = "claim"
	ProjectCreate    = "create"
	ProjectExists    = "exists"
	SettingsReplace  = "replace"
	SettingsAllows   = "allows"
	SettingsUnlisted = "unlisted"
	SecretStore      = "store"
	SecretRotate     = "rotate"
)

// Actors' roles, by what they may do.
var (
	// Managers change the org: its users, settings and secrets.
	Managers = []string{messages.RoleOwner, messages.RoleAdmin}
	// Workers queue, answer and cancel tasks; a viewer only looks.
	Workers = []string{messages.RoleOwner, messages.RoleAdmin, messages.RoleMember}
)

func created(attrs ...string) []Assign[OrgInput] {
	return copyFrom(attrs, func(in OrgInput) Item { return in.Row })
}

// Org is the machine of an org's item: created once; other commands hold
// it to act in an org that exists.
var Org = &Machine[OrgInput]{
	Name: "org", State: "orgState", Key: "PK", Unset: OrgCreated, States: []string{OrgCreated},
	Transitions: []Transition[OrgInput]{
		{
			Name: OrgCreate, Command: messages.OrgCreate, From: []string{Absent}, To: OrgCreated,
			Set: created("PK", "orgId", "name", "plan", "createdAt"), Event: messages.OrgEventCreated, Rejected: messages.OrgRejected,
			Refuse: map[string]string{OrgCreated: messages.ReasonAlreadyExists},
		},
		{
			Name: OrgExists, Command: messages.ProjectCreate, Doc: "or user.registered, in an org that exists",
			From: []string{OrgCreated}, To: OrgCreated, Rejected: messages.OrgRejected,
			Refuse: map[string]string{Absent: messages.ReasonOrgNotFound},
		},
	},
}

var inOrg = Guard[OrgInput]{Name: "same org", Reason: messages.ReasonForbidden, Attr: "orgId", Op: Eq, Value: func(in OrgInput, _ Item) any { return in.OrgID }}

// User is the machine of a user: registered active, suspended by a
// manager; every command a user sends holds the user active, of the org
// it acts in and in a role allowed to send it (act).
var User = &Machine[OrgInput]{
	Name: "user", State: "status", Key: "PK", States: []string{UserActive, UserSuspended},
	Transitions: []Transition[OrgInput]{
		{
			Name: UserRegister, Command: messages.UserRegister, From: []string{Absent}, To: UserActive,
			Set:   created("PK", "userId", "email", "passwordHash", "displayName", "role", "orgId", "createdAt"),
			Event: messages.UserRegistered, Rejected: messages.OrgRejected,
			Refuse: map[string]string{UserActive: messages.ReasonAlreadyExists, UserSuspended: messages.ReasonAlreadyExists},
		},
		{
			Name: UserSuspend, Command: messages.UserSuspend, From: []string{UserActive}, To: UserSuspended,
			// A user of another org is not found: no org learns of another's users.
			Guards: []Guard[OrgInput]{{Name: "same org", Reason: messages.ReasonNotFound, Attr: "orgId", Op: Eq, Value: func(in OrgInput, _ Item) any { return in.OrgID }}},
			Set:    []Assign[OrgInput]{{"suspendedAt", func(in OrgInput, _ Item) any { return in.Now }}},
			Event:  messages.UserSuspended, Rejected: messages.OrgRejected,
		},
		{
			Name: UserAct, Doc: "a user acts: active, of the org, in a role allowed",
			From: []string{UserActive}, To: UserActive,
			Guards: []Guard[OrgInput]{inOrg, {Name: "role", Reason: messages.ReasonForbidden, Attr: "role", Op: OneOf, Value: func(in OrgInput, _ Item) any { return in.Roles }}},
			Refuse: map[string]string{Absent: messages.ReasonForbidden, UserSuspended: messages.ReasonForbidden},
		},
	},
}

// EmailClaim is the machine of the item that keeps an email unique within
// an org (an index cannot): claimed in the registration's transaction.
var EmailClaim = &Machine[OrgInput]{
	Name: "email-claim", State: "claimState", Key: "PK", Unset: EmailClaimed, States: []string{EmailClaimed},
	Transitions: []Transition[OrgInput]{{
		Name: EmailTake, Command: messages.UserRegister, From: []string{Absent}, To: EmailClaimed,
		Set: created("PK", "userId"), Rejected: messages.OrgRejected,
		Refuse: map[string]string{EmailClaimed: messages.ReasonEmailTaken},
	}},
}

// Project is the machine of a project: created once in an org that
// exists; a queued task holds it.
var Project = &Machine[OrgInput]{
	Name: "project", State: "projectState", Key: "PK", Unset: ProjectCreated, States: []string{ProjectCreated},
	Transitions: []Transition[OrgInput]{
		{
			Name: ProjectCreate, Command: messages.ProjectCreate, From: []string{Absent}, To: ProjectCreated,
			Set:   created("PK", "SK", "projectId", "orgId", "name", "localPathHint", "defaultModel", "createdAt", "updatedAt"),
			Event: messages.ProjectCreated, Rejected: messages.OrgRejected,
			Refuse: map[string]string{ProjectCreated: messages.ReasonAlreadyExists},
		},
		{
			Name: ProjectExists, Command: messages.TaskQueue, Doc: "a task queued in it",
			From: []string{ProjectCreated}, To: ProjectCreated, Rejected: messages.TaskRejected,
			Refuse: map[string]string{Absent: messages.ReasonProjectNotFound},
		},
	},
}

// Settings is the machine of one scope's settings: replaced whole by
// settings.updated. A queued task's model must be in the allow-list of
// the most specific scope that has one: that scope allows it, and every
// more specific scope is held without a list.
var Settings = &Machine[OrgInput]{
	Name: "settings", State: "settingsState", Key: "PK", Unset: SettingsSet, States: []string{SettingsSet},
	Transitions: []Transition[OrgInput]{
		{
			Name: SettingsReplace, Command: messages.SettingsUpdate, From: []string{Absent, SettingsSet}, To: SettingsSet,
			Set: created("PK", "SK", "scope", "defaultModel", "modelAllowList", "openaiKeyRef", "anthropicKeyRef",
				"uiPrefs", "notifyPrefs", "updatedAt"),
			Event: messages.SettingsUpdated, Rejected: messages.OrgRejected,
		},
		{
			Name: SettingsAllows, Command: messages.TaskQueue, Doc: "the most specific allow-list holds the model",
			From: []string{SettingsSet}, To: SettingsSet, Rejected: messages.TaskRejected,
			Guards: []Guard[OrgInput]{{Name: "allowed", Reason: messages.ReasonModelNotAllowed, Attr: "modelAllowList", Op: Contains,
				Value: func(in OrgInput, _ Item) any { return in.Model }}},
		},
		{
			// A pin: a list added meanwhile changes which scope decides.
			Name: SettingsUnlisted, Command: messages.TaskQueue, Doc: "a more specific scope has no allow-list",
			From: []string{Absent, SettingsSet}, To: Same,
			Guards: []Guard[OrgInput]{{Name: "no list", Attr: "modelAllowList", Op: NotExists}},
		},
	},
}

// Secret is the machine of a stored secret: stored once, rotated in place.
var Secret = &Machine[OrgInput]{
	Name: "secret", State: "secretState", Key: "PK", Unset: SecretStored, States: []string{SecretStored},
	Transitions: []Transition[OrgInput]{
		{
			Name: SecretStore, Command: messages.SecretStore, From: []string{Absent}, To: SecretStored,
			Set:   created("PK", "SK", "secretId", "type", "cipherText", "encrypted", "createdAt", "updatedAt"),
			Event: messages.SecretStored, Rejected: messages.OrgRejected,
			Refuse: map[string]string{SecretStored: messages.ReasonAlreadyExists},
		},
		{
			Name: SecretRotate, Command: messages.SecretRotate, From: []string{SecretStored}, To: SecretStored,
			Set:   created("cipherText", "encrypted", "updatedAt"),
			Event: messages.SecretRotated, Rejected: messages.OrgRejected,
		},
	},
}
