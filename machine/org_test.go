package machine_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"

	"transit/machine"
	"transit/messages"
)

// orgItemIn is an item of m in state, nil for Absent: a user is u-dev, a
// member of acme; settings carry no allow-list.
func orgItemIn(m *machine.Machine[machine.OrgInput]) func(*testing.T, string) machine.Item {
	return func(t *testing.T, state string) machine.Item {
		if state == machine.Absent {
			return nil
		}
		fields := map[string]any{"PK": "X#1", "SK": "Y#1", "orgId": "acme", "role": messages.RoleMember, "email": "dev@acme.test"}
		if state != m.Unset {
			fields[m.State] = state
		}
		return item(t, fields)
	}
}

func orgInput(t *testing.T) machine.OrgInput {
	return machine.OrgInput{Now: isoNow, Row: item(t, map[string]any{"PK": "X#1", "SK": "Y#1"}), OrgID: "acme",
		Roles: machine.Workers, Model: "claude-sonnet-4"}
}

// TestOrg_every_state_and_transition: the tables of the org, user, email
// claim, project, settings and secret machines, for a member of acme
// acting in acme.
func TestOrg_every_state_and_transition(t *testing.T) {
	nf, ws, dup, forbidden := messages.ReasonNotFound, messages.ReasonWrongState, messages.ReasonAlreadyExists, messages.ReasonForbidden
	active, suspended := machine.UserActive, machine.UserSuspended
	machines := []struct {
		m     *machine.Machine[machine.OrgInput]
		table map[string]map[string]cell
	}{
		{machine.Org, map[string]map[string]cell{
			machine.OrgCreate: {machine.Absent: {to: machine.OrgCreated}, machine.OrgCreated: {reason: dup}},
			machine.OrgExists: {machine.Absent: {reason: messages.ReasonOrgNotFound}, machine.OrgCreated: {to: machine.OrgCreated}},
		}},
		{machine.User, map[string]map[string]cell{
			machine.UserRegister: {machine.Absent: {to: active}, active: {reason: dup}, suspended: {reason: dup}},
			machine.UserSuspend:  {machine.Absent: {reason: nf}, active: {to: suspended}, suspended: {reason: ws}},
			machine.UserAct:      {machine.Absent: {reason: forbidden}, active: {to: active}, suspended: {reason: forbidden}},
		}},
		{machine.EmailClaim, map[string]map[string]cell{
			machine.EmailTake: {machine.Absent: {to: machine.EmailClaimed}, machine.EmailClaimed: {reason: messages.ReasonEmailTaken}},
		}},
		{machine.Project, map[string]map[string]cell{
			machine.ProjectCreate: {machine.Absent: {to: machine.ProjectCreated}, machine.ProjectCreated: {reason: dup}},
			machine.ProjectExists: {machine.Absent: {reason: messages.ReasonProjectNotFound}, machine.ProjectCreated: {to: machine.ProjectCreated}},
		}},
		{machine.Settings, map[string]map[string]cell{
			machine.SettingsReplace:  {machine.Absent: {to: machine.SettingsSet}, machine.SettingsSet: {to: machine.SettingsSet}},
			machine.SettingsAllows:   {machine.Absent: {reason: nf}, machine.SettingsSet: {reason: messages.ReasonModelNotAllowed}},
			machine.SettingsUnlisted: {machine.Absent: {to: machine.Absent}, machine.SettingsSet: {to: machine.SettingsSet}},
		}},
		{machine.Secret, map[string]map[string]cell{
			machine.SecretStore:  {machine.Absent: {to: machine.SecretStored}, machine.SecretStored: {reason: dup}},
			machine.SecretRotate: {machine.Absent: {reason: nf}, machine.SecretStored: {to: machine.SecretStored}},
		}},
	}
	for _, mt := range machines {
		checkTable(t, mt.m, mt.table, orgItemIn(mt.m), orgInput(t))
	}
}

// TestUser_act_holds_role_and_org: a viewer may not do what workers do,
// a member may not do what managers do, and nobody acts in another org.
func TestUser_act_holds_role_and_org(t *testing.T) {
	act := machine.User.Transition(machine.UserAct)
	user := func(role, org string) machine.Item {
		return item(t, map[string]any{"PK": "USER#u", "status": machine.UserActive, "role": role, "orgId": org})
	}
	workers, managers := orgInput(t), orgInput(t)
	managers.Roles = machine.Managers
	for _, c := range []struct {
		user   machine.Item
		in     machine.OrgInput
		reason string
	}{
		{user(messages.RoleViewer, "acme"), workers, messages.ReasonForbidden},
		{user(messages.RoleMember, "acme"), workers, ""},
		{user(messages.RoleMember, "acme"), managers, messages.ReasonForbidden},
		{user(messages.RoleAdmin, "acme"), managers, ""},
		{user(messages.RoleOwner, "rival"), workers, messages.ReasonForbidden},
	} {
		assert.Equal(t, c.reason, machine.User.Decide(act, c.user, c.user, c.in).Reason, "%v", c.user["role"])
	}
	// A user of another org is not found by a suspension: no org learns
	// of another's users.
	rival := user(messages.RoleMember, "rival")
	assert.Equal(t, messages.ReasonNotFound, machine.User.Decide(machine.User.Transition(machine.UserSuspend), rival, rival, workers).Reason)
}

// TestSettings_allow_list_holds_the_model: a scope with an allow-list
// allows a model on it, refuses one not on it; a scope without one is
// unlisted, and one given a list since it was read is stale.
func TestSettings_allow_list_holds_the_model(t *testing.T) {
	listed := item(t, map[string]any{"PK": "ORG#acme", "SK": "SET#GLOBAL", "modelAllowList": []string{"claude-sonnet-4", "gpt-4o"}})
	allows, unlisted := machine.Settings.Transition(machine.SettingsAllows), machine.Settings.Transition(machine.SettingsUnlisted)
	in := orgInput(t)
	assert.True(t, machine.Settings.Decide(allows, listed, listed, in).Applies())
	in.Model = "gpt-5"
	assert.Equal(t, messages.ReasonModelNotAllowed, machine.Settings.Decide(allows, listed, listed, in).Reason)
	assert.True(t, machine.Settings.Decide(unlisted, listed, nil, in).Stale, "a list added since the read changes which scope decides")
	listed["modelAllowList"] = &types.AttributeValueMemberL{}
	assert.Equal(t, messages.ReasonModelNotAllowed, machine.Settings.Decide(allows, listed, listed, in).Reason, "an empty list allows nothing")
}
