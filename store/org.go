package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
	"transit/messages"
)

// Items of the org domain's tables (docs/orgs.md). Times are ISO 8601
// strings in UTC with milliseconds (Instant's form), so they sort.

// Org is an organisation.
type Org struct {
	// PK is ORG#<orgId>.
	PK string `dynamodbav:"PK" json:"-"`
	// OrgID is the org's ID, as org.created named it.
	OrgID string `dynamodbav:"orgId" json:"org_id"`
	// Name is the org's display name.
	Name string `dynamodbav:"name" json:"name"`
	// Plan is free, pro or enterprise.
	Plan string `dynamodbav:"plan" json:"plan"`
	// CreatedAt is when org.created created it.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
}

// User is a user of one org.
type User struct {
	// PK is USER#<userId>.
	PK string `dynamodbav:"PK" json:"-"`
	// UserID is the user's ID; the key holds it alone, so it is unique across orgs.
	UserID string `dynamodbav:"userId" json:"user_id"`
	// Email is unique within the org (an EmailClaim holds it), lower case.
	Email string `dynamodbav:"email" json:"email"`
	// PasswordHash is the bcrypt hash of the password; it is kept out of
	// every event and audit record.
	PasswordHash string `dynamodbav:"passwordHash" json:"-"`
	// DisplayName is the user's name as shown to others.
	DisplayName string `dynamodbav:"displayName" json:"display_name"`
	// Role is owner, admin, member or viewer.
	Role string `dynamodbav:"role" json:"role"`
	// OrgID is the org the user belongs to.
	OrgID string `dynamodbav:"orgId" json:"org_id"`
	// Status is active or suspended.
	Status string `dynamodbav:"status" json:"status"`
	// CreatedAt is when user.registered registered the user.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
	// LastLoginAt is for the product's login, which transit does not do.
	LastLoginAt string `dynamodbav:"lastLoginAt,omitempty" json:"last_login_at,omitempty"`
	// SuspendedAt is when user.suspended suspended the user.
	SuspendedAt string `dynamodbav:"suspendedAt,omitempty" json:"suspended_at,omitempty"`
}

// EmailClaim holds an email for one user of an org, in the Users table.
type EmailClaim struct {
	// PK is EMAIL#<orgId>#<email>. The claim carries neither orgId nor
	// email as attributes, so it stays out of email-index.
	PK string `dynamodbav:"PK"`
	// UserID is the user the email belongs to.
	UserID string `dynamodbav:"userId"`
}

// Project is a project of an org.
type Project struct {
	// PK is ORG#<orgId>, SK PROJ#<projectId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is PROJ#<projectId>.
	SK string `dynamodbav:"SK" json:"-"`
	// ProjectID is the project's ID, unique within its org.
	ProjectID string `dynamodbav:"projectId" json:"project_id"`
	// OrgID is the org the project belongs to.
	OrgID string `dynamodbav:"orgId" json:"org_id"`
	// Name is the project's display name.
	Name string `dynamodbav:"name" json:"name"`
	// LocalPathHint is where the project usually lives on a developer's
	// machine.
	LocalPathHint string `dynamodbav:"localPathHint,omitempty" json:"local_path_hint,omitempty"`
	// DefaultModel is the model a task of the project runs with when task.queued names none.
	DefaultModel string `dynamodbav:"defaultModel,omitempty" json:"default_model,omitempty"`
	// CreatedAt is when project.created created it.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
	// UpdatedAt is when the project last changed.
	UpdatedAt string `dynamodbav:"updatedAt" json:"updated_at"`
}

// ScopeSettings are one scope's settings in an org.
type ScopeSettings struct {
	// PK is ORG#<orgId>; SK SET#GLOBAL, SET#USER#<userId> or
	// SET#PROJ#<projectId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK names the scope: SET#GLOBAL, SET#USER#<userId> or SET#PROJ#<projectId>.
	SK string `dynamodbav:"SK" json:"-"`
	// Scope is global, user or project.
	Scope string `dynamodbav:"scope" json:"scope"`
	// DefaultModel is the model a task uses when neither its command nor its project names one.
	DefaultModel string `dynamodbav:"defaultModel,omitempty" json:"default_model,omitempty"`
	// ModelAllowList, when present, is every model a task may use where
	// this is the most specific scope that has one.
	ModelAllowList []string `dynamodbav:"modelAllowList,omitempty" json:"model_allow_list,omitempty"`
	// OpenAIKeyRef names the stored secret (its secretId) holding the OpenAI key to use.
	OpenAIKeyRef string `dynamodbav:"openaiKeyRef,omitempty" json:"openai_key_ref,omitempty"`
	// AnthropicKeyRef names the stored secret (its secretId) holding the Anthropic key to use.
	AnthropicKeyRef string `dynamodbav:"anthropicKeyRef,omitempty" json:"anthropic_key_ref,omitempty"`
	// UIPrefs are the product UI's preferences, free-form strings.
	UIPrefs map[string]string `dynamodbav:"uiPrefs,omitempty" json:"ui_prefs,omitempty"`
	// NotifyPrefs are notification preferences, free-form strings.
	NotifyPrefs map[string]string `dynamodbav:"notifyPrefs,omitempty" json:"notify_prefs,omitempty"`
	// UpdatedAt is when settings.updated last replaced the scope's settings.
	UpdatedAt string `dynamodbav:"updatedAt" json:"updated_at"`
}

// Secret is an org's API key.
type Secret struct {
	// PK is ORG#<orgId>, SK SEC#<secretId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is SEC#<secretId>.
	SK string `dynamodbav:"SK" json:"-"`
	// SecretID is the secret's ID within its org.
	SecretID string `dynamodbav:"secretId" json:"secret_id"`
	// Type is openai_key or anthropic_key.
	Type string `dynamodbav:"type" json:"type"`
	// CipherText is the KMS-sealed value (provider.Sealer), or in
	// development, where Encrypted is false, the value itself. It is kept
	// out of every event and audit record.
	CipherText string `dynamodbav:"cipherText" json:"-"`
	// Encrypted says whether CipherText is sealed by KMS; false only in development.
	Encrypted bool `dynamodbav:"encrypted" json:"encrypted"`
	// CreatedAt is when secret.stored stored it.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
	// UpdatedAt is when it was stored or last rotated.
	UpdatedAt string `dynamodbav:"updatedAt" json:"updated_at"`
}

func iso(t time.Time) string { return At(t).String() }

func orgKey(orgID string) machine.Item {
	return machine.Item{"PK": &types.AttributeValueMemberS{Value: "ORG#" + orgID}}
}

func userKey(userID string) machine.Item {
	return machine.Item{"PK": &types.AttributeValueMemberS{Value: "USER#" + userID}}
}

func emailKey(orgID, email string) machine.Item {
	return machine.Item{"PK": &types.AttributeValueMemberS{Value: "EMAIL#" + orgID + "#" + email}}
}

// orgItemKey is the key of an item in one of an org's partitions.
func orgItemKey(orgID, sk string) machine.Item {
	return machine.Item{
		"PK": &types.AttributeValueMemberS{Value: "ORG#" + orgID},
		"SK": &types.AttributeValueMemberS{Value: sk},
	}
}

func settingsSK(scope, userID, projectID string) string {
	switch scope {
	case messages.ScopeUser:
		return "SET#USER#" + userID
	case messages.ScopeProject:
		return "SET#PROJ#" + projectID
	}
	return "SET#GLOBAL"
}

func orgStep(m *machine.Machine[machine.OrgInput], name, table string, key machine.Item, entity string, in machine.OrgInput) step[machine.OrgInput] {
	return step[machine.OrgInput]{m: m, t: m.Transition(name), table: table, key: key, in: in, entity: entity}
}

// actorJoin holds the actor allowed to act in org with one of roles, in
// the command's transaction: a user active, of the org, in such a role;
// the system always may; an agent never may (it acts on tasks alone).
func (s *Store) actorJoin(ctx context.Context, actor messages.Actor, orgID string, roles []string) ([]joined, machine.Outcome, error) {
	switch {
	case actor == "system":
		return nil, machine.Outcome{}, nil
	case actor.User() == "":
		return nil, machine.Outcome{Reason: messages.ReasonForbidden}, nil
	}
	read, err := getRaw(ctx, s.db, s.users, userKey(actor.User()))
	if err != nil {
		return nil, machine.Outcome{}, err
	}
	st := orgStep(machine.User, machine.UserAct, s.users, userKey(actor.User()), "", machine.OrgInput{OrgID: orgID, Roles: roles})
	j, out, err := join(st, read)
	if err != nil || !out.Applies() {
		return nil, out, err
	}
	return []joined{j}, out, nil
}

// orgExists holds the org existing, in the command's transaction.
func (s *Store) orgExists(ctx context.Context, orgID string) ([]joined, machine.Outcome, error) {
	read, err := getRaw(ctx, s.db, s.orgs, orgKey(orgID))
	if err != nil {
		return nil, machine.Outcome{}, err
	}
	j, out, err := join(orgStep(machine.Org, machine.OrgExists, s.orgs, orgKey(orgID), "", machine.OrgInput{}), read)
	if err != nil || !out.Applies() {
		return nil, out, err
	}
	return []joined{j}, out, nil
}

// joins runs each join in turn, stopping at the first that does not apply.
func joins(all ...func() ([]joined, machine.Outcome, error)) ([]joined, machine.Outcome, error) {
	var js []joined
	for _, j := range all {
		more, out, err := j()
		if err != nil || !out.Applies() {
			return nil, out, err
		}
		js = append(js, more...)
	}
	return js, machine.Outcome{}, nil
}

// CreateOrg creates an org. One that exists is a *Rejection
// (already_exists).
func (s *Store) CreateOrg(ctx context.Context, cmd Cmd, p messages.OrgCreatePayload) (Org, error) {
	org := Org{PK: "ORG#" + p.OrgID, OrgID: p.OrgID, Name: p.Name, Plan: p.Plan, CreatedAt: iso(cmd.At)}
	row, err := rawItem(org)
	if err != nil {
		return Org{}, err
	}
	st := orgStep(machine.Org, machine.OrgCreate, s.orgs, orgKey(p.OrgID), "ORG#"+p.OrgID, machine.OrgInput{Row: row})
	err = apply(ctx, s, cmd, st, &org)
	return org, wrap(err, "create org %s", p.OrgID)
}

// RegisterUser registers a user with its password's bcrypt hash, holding
// the org, the email within it and the actor (the system or a manager)
// in one transaction.
func (s *Store) RegisterUser(ctx context.Context, cmd Cmd, p messages.UserRegisterPayload, passwordHash string) (User, error) {
	u := User{PK: "USER#" + p.UserID, UserID: p.UserID, Email: p.Email, PasswordHash: passwordHash, DisplayName: p.DisplayName,
		Role: p.Role, OrgID: p.OrgID, Status: machine.UserActive, CreatedAt: iso(cmd.At)}
	row, err := rawItem(u)
	if err != nil {
		return User{}, err
	}
	claimRow, err := rawItem(EmailClaim{PK: "EMAIL#" + p.OrgID + "#" + p.Email, UserID: p.UserID})
	if err != nil {
		return User{}, err
	}
	st := orgStep(machine.User, machine.UserRegister, s.users, userKey(p.UserID), "USER#"+p.UserID, machine.OrgInput{Row: row})
	err = applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.OrgInput) ([]joined, machine.Outcome, error) {
		return joins(
			func() ([]joined, machine.Outcome, error) { return s.orgExists(ctx, p.OrgID) },
			func() ([]joined, machine.Outcome, error) { return s.actorJoin(ctx, p.Actor, p.OrgID, machine.Managers) },
			func() ([]joined, machine.Outcome, error) {
				key := emailKey(p.OrgID, p.Email)
				read, err := getRaw(ctx, s.db, s.users, key)
				if err != nil {
					return nil, machine.Outcome{}, err
				}
				j, out, err := join(orgStep(machine.EmailClaim, machine.EmailTake, s.users, key, "", machine.OrgInput{Row: claimRow}), read)
				return []joined{j}, out, err
			},
		)
	}, &u)
	return u, wrap(err, "register user %s", p.UserID)
}

// SuspendUser suspends a user of the org, by a manager (or the system);
// no one suspends themselves (forbidden), so an org keeps a manager.
func (s *Store) SuspendUser(ctx context.Context, cmd Cmd, p messages.UserSuspendPayload) (User, error) {
	var u User
	st := orgStep(machine.User, machine.UserSuspend, s.users, userKey(p.UserID), "USER#"+p.UserID, machine.OrgInput{OrgID: p.OrgID, Now: iso(cmd.At)})
	err := applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.OrgInput) ([]joined, machine.Outcome, error) {
		if p.Actor.User() == p.UserID {
			return nil, machine.Outcome{Reason: messages.ReasonForbidden}, nil
		}
		return s.actorJoin(ctx, p.Actor, p.OrgID, machine.Managers)
	}, &u)
	return u, wrap(err, "suspend user %s", p.UserID)
}

// CreateProject creates a project in an org that exists, by a manager.
func (s *Store) CreateProject(ctx context.Context, cmd Cmd, p messages.ProjectCreatePayload) (Project, error) {
	pr := Project{PK: "ORG#" + p.OrgID, SK: "PROJ#" + p.ProjectID, ProjectID: p.ProjectID, OrgID: p.OrgID, Name: p.Name,
		LocalPathHint: p.LocalPathHint, DefaultModel: p.DefaultModel, CreatedAt: iso(cmd.At), UpdatedAt: iso(cmd.At)}
	row, err := rawItem(pr)
	if err != nil {
		return Project{}, err
	}
	key := orgItemKey(p.OrgID, pr.SK)
	st := orgStep(machine.Project, machine.ProjectCreate, s.projects, key, "PROJECT#"+p.OrgID+"/"+p.ProjectID, machine.OrgInput{Row: row})
	err = applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.OrgInput) ([]joined, machine.Outcome, error) {
		return joins(
			func() ([]joined, machine.Outcome, error) { return s.orgExists(ctx, p.OrgID) },
			func() ([]joined, machine.Outcome, error) { return s.actorJoin(ctx, p.Actor, p.OrgID, machine.Managers) },
		)
	}, &pr)
	return pr, wrap(err, "create project %s", p.ProjectID)
}

// UpdateSettings replaces one scope's settings, by a manager.
func (s *Store) UpdateSettings(ctx context.Context, cmd Cmd, p messages.SettingsUpdatePayload) (ScopeSettings, error) {
	set := ScopeSettings{PK: "ORG#" + p.OrgID, SK: settingsSK(p.Scope, p.UserID, p.ProjectID), Scope: p.Scope,
		DefaultModel: p.DefaultModel, ModelAllowList: p.ModelAllowList, OpenAIKeyRef: p.OpenAIKeyRef,
		AnthropicKeyRef: p.AnthropicKeyRef, UIPrefs: p.UIPrefs, NotifyPrefs: p.NotifyPrefs, UpdatedAt: iso(cmd.At)}
	row, err := rawItem(set)
	if err != nil {
		return ScopeSettings{}, err
	}
	st := orgStep(machine.Settings, machine.SettingsReplace, s.settings, orgItemKey(p.OrgID, set.SK),
		"SETTINGS#"+p.OrgID+"/"+set.SK, machine.OrgInput{Row: row})
	err = applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.OrgInput) ([]joined, machine.Outcome, error) {
		return s.managed(ctx, p.OrgID, p.Actor)
	}, &set)
	return set, wrap(err, "update settings %s of %s", set.SK, p.OrgID)
}

// StoreSecret stores a secret, sealed by the caller (or, in development,
// not), by a manager.
func (s *Store) StoreSecret(ctx context.Context, cmd Cmd, p messages.SecretStorePayload, cipherText string, encrypted bool) (Secret, error) {
	sec := Secret{PK: "ORG#" + p.OrgID, SK: "SEC#" + p.SecretID, SecretID: p.SecretID, Type: p.SecretType, CipherText: cipherText,
		Encrypted: encrypted, CreatedAt: iso(cmd.At), UpdatedAt: iso(cmd.At)}
	return s.writeSecret(ctx, cmd, machine.SecretStore, p.OrgID, p.Actor, sec)
}

// RotateSecret replaces a stored secret's value, by a manager.
func (s *Store) RotateSecret(ctx context.Context, cmd Cmd, p messages.SecretRotatePayload, cipherText string, encrypted bool) (Secret, error) {
	sec := Secret{PK: "ORG#" + p.OrgID, SK: "SEC#" + p.SecretID, SecretID: p.SecretID, CipherText: cipherText,
		Encrypted: encrypted, UpdatedAt: iso(cmd.At)}
	return s.writeSecret(ctx, cmd, machine.SecretRotate, p.OrgID, p.Actor, sec)
}

func (s *Store) writeSecret(ctx context.Context, cmd Cmd, transition, orgID string, actor messages.Actor, sec Secret) (Secret, error) {
	row, err := rawItem(sec)
	if err != nil {
		return Secret{}, err
	}
	st := orgStep(machine.Secret, transition, s.secrets, orgItemKey(orgID, sec.SK), "SECRET#"+orgID+"/"+sec.SecretID, machine.OrgInput{Row: row})
	err = applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.OrgInput) ([]joined, machine.Outcome, error) {
		return s.managed(ctx, orgID, actor)
	}, &sec)
	return sec, wrap(err, "%s secret %s of %s", transition, sec.SecretID, orgID)
}

// managed holds the org existing and the actor one of its managers (or
// the system).
func (s *Store) managed(ctx context.Context, orgID string, actor messages.Actor) ([]joined, machine.Outcome, error) {
	return joins(
		func() ([]joined, machine.Outcome, error) { return s.orgExists(ctx, orgID) },
		func() ([]joined, machine.Outcome, error) { return s.actorJoin(ctx, actor, orgID, machine.Managers) },
	)
}

// RefuseSecret records that a secret could not be stored as the command
// asked (in plaintext, outside development): a *Rejection for reason, or
// for the reason the actor could not have stored it anyway.
func (s *Store) RefuseSecret(ctx context.Context, cmd Cmd, orgID, secretID string, actor messages.Actor, reason string) error {
	_, out, err := s.managed(ctx, orgID, actor)
	if err != nil {
		return err
	}
	if !out.Applies() {
		reason = out.Reason
	}
	return s.recordRejection(ctx, cmd, "SECRET#"+orgID+"/"+secretID, &Rejection{Reason: reason, At: cmd.At}, nil)
}

// GetSecret reads a stored secret, its cipherText included.
func (s *Store) GetSecret(ctx context.Context, orgID, secretID string) (Secret, bool, error) {
	return getItem[Secret](ctx, s.db, s.secrets, orgItemKey(orgID, "SEC#"+secretID))
}

// wrap adds context to err, keeping nil nil.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
