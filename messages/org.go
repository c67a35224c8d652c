package messages

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"
)

// Org is the directory of the agent-task system: organisations, their
// users and projects, settings and secrets (docs/orgs.md).
const Org Domain = "org"

// Org commands.
var (
	OrgCreate       = command[OrgCreatePayload](Org, "org.created")
	UserRegister    = command[UserRegisterPayload](Org, "user.registered")
	UserSuspend     = command[UserSuspendPayload](Org, "user.suspended")
	ProjectCreate   = command[ProjectCreatePayload](Org, "project.created")
	SettingsUpdate  = command[SettingsUpdatePayload](Org, "settings.updated")
	SecretStore     = command[SecretStorePayload](Org, "secret.stored")
	SecretRotate    = command[SecretRotatePayload](Org, "secret.rotated")
	OrgEventCreated = event[OrgCreatedPayload](Org, "org.created")
	UserRegistered  = event[UserRegisteredPayload](Org, "user.registered")
	UserSuspended   = event[UserSuspendedPayload](Org, "user.suspended")
	ProjectCreated  = event[ProjectCreatedPayload](Org, "project.created")
	SettingsUpdated = event[SettingsUpdatedPayload](Org, "settings.updated")
	SecretStored    = event[SecretStoredPayload](Org, "secret.stored")
	SecretRotated   = event[SecretStoredPayload](Org, "secret.rotated")
	// OrgRejected answers any org command refused: its reason, the
	// command's type and the keys it named.
	OrgRejected = event[OrgRejectedPayload](Org, "org.command-rejected")
)

// Rejection reasons of the org and task domains.
const (
	ReasonAlreadyExists = "already_exists"
	ReasonEmailTaken    = "email_taken"
	// ReasonForbidden: the actor's role does not allow the command, the
	// actor is suspended or unknown, or it belongs to another org.
	ReasonForbidden = "forbidden"
	// ReasonOrgNotFound, ReasonProjectNotFound: a command named an org or
	// project that does not exist.
	ReasonOrgNotFound     = "org_not_found"
	ReasonProjectNotFound = "project_not_found"
	// ReasonModelNotAllowed: the task's model is not in the allow-list of
	// the most specific settings scope that has one.
	ReasonModelNotAllowed = "model_not_allowed"
	// ReasonPlaintextRefused: a secret outside development with no KMS
	// key to encrypt it.
	ReasonPlaintextRefused = "plaintext_refused"
)

// Roles a user holds in an org.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// Settings scopes, from the least specific.
const (
	ScopeGlobal  = "global"
	ScopeUser    = "user"
	ScopeProject = "project"
)

var (
	roles       = []string{RoleOwner, RoleAdmin, RoleMember, RoleViewer}
	plans       = []string{"free", "pro", "enterprise"}
	scopes      = []string{ScopeGlobal, ScopeUser, ScopeProject}
	secretTypes = []string{"openai_key", "anthropic_key"}
)

// Field limits of the agent-task system.
const (
	maxName   = 256
	maxModel  = 128
	maxEmail  = 254
	maxSecret = 8 << 10
	// bcrypt reads at most 72 bytes of a password.
	maxPassword = 72
	minPassword = 8
	maxModels   = 64
	maxPrefs    = 16 << 10
)

// entityIDPattern is what an org, user, project, agent, task, secret or
// notification ID may look like: an identifier without '#', which keys
// use as their separator.
var entityIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// actorPattern is who sends a command: a user, an agent, or transit.
var actorPattern = regexp.MustCompile(`^(?:(?:user|agent):[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}|system)$`)

var emailPattern = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)

func checkEntityID(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	if !entityIDPattern.MatchString(v) {
		return invalid(field, "%q is not an identifier (letters, digits and _ . : -, at most 128)", v)
	}
	return nil
}

func checkOptionalEntityID(field, v string) error {
	if v == "" {
		return nil
	}
	return checkEntityID(field, v)
}

func checkActor(v string) error {
	if !actorPattern.MatchString(v) {
		return invalid("actor", "%q is not user:<id>, agent:<id> or system", v)
	}
	return nil
}

func checkOneOf(field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return invalid(field, "%q, want one of %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

func entityIDSchema(p *jsonschema.Schema) { patternSchema(p, entityIDPattern, 128) }

func optionalEntityIDSchema(p *jsonschema.Schema) {
	p.Pattern = optionalPattern(entityIDPattern)
	p.MaxLength = count(128)
	nullable(p)
}

func actorSchema(p *jsonschema.Schema) { patternSchema(p, actorPattern, 134) }

func enumSchema(p *jsonschema.Schema, values []string) {
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
}

// defaultedEnumSchema mirrors checkOneOf on a member Validate fills in
// when it is empty: absent, null and "" all mean def.
func defaultedEnumSchema(p *jsonschema.Schema, values []string, def string) {
	enumSchema(p, values)
	p.Enum = append(p.Enum, "", nil)
	p.Default = def
	nullable(p)
}

// emailSchemaPattern is emailPattern under checkText's character rule,
// spelled out: Go's \s is ASCII white space, which JSON Schema's (ECMA
// 262) is not, and of it only the space is not a control character.
const emailSchemaPattern = `^[^@\x00-\x20\x7f]+@[^@\x00-\x20\x7f]+\.[^@\x00-\x20\x7f]+$`

// exactlyWhenScope mirrors SettingsUpdatePayload's rule that member (an
// ID) is set exactly when scope is the given one.
func exactlyWhenScope(s *jsonschema.Schema, scope, member string) {
	when := &jsonschema.Schema{Properties: jsonschema.NewProperties(), Required: []string{"scope"}}
	when.Properties.Set("scope", &jsonschema.Schema{Const: scope})
	set := &jsonschema.Schema{Properties: jsonschema.NewProperties(), Required: []string{member}}
	set.Properties.Set(member, &jsonschema.Schema{Type: "string", MinLength: count(1)})
	unset := &jsonschema.Schema{Properties: jsonschema.NewProperties()}
	unset.Properties.Set(member, &jsonschema.Schema{Enum: []any{"", nil}})
	s.AllOf = append(s.AllOf, &jsonschema.Schema{If: when, Then: set, Else: unset})
}

// Actor is who sent a command: "user:<id>", "agent:<id>" or "system".
// Every command of the org and task domains names one; the queue's IAM
// policy, not transit, decides who may send which.
type Actor string

// User is the user ID of a user actor, empty for any other.
func (a Actor) User() string { return a.id("user:") }

// Agent is the agent ID of an agent actor, empty for any other.
func (a Actor) Agent() string { return a.id("agent:") }

func (a Actor) id(prefix string) string {
	id, ok := strings.CutPrefix(string(a), prefix)
	if !ok {
		return ""
	}
	return id
}

// OrgCreatePayload creates an organisation.
type OrgCreatePayload struct {
	OrgID string `json:"org_id"`
	Name  string `json:"name"`
	// Plan is free, pro or enterprise; default free.
	Plan  string `json:"plan,omitempty"`
	Actor Actor  `json:"actor"`
}

func (OrgCreatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	requiredTextSchema(property(s, "name"), maxName)
	defaultedEnumSchema(property(s, "plan"), plans, plans[0])
	actorSchema(property(s, "actor"))
}

func (p *OrgCreatePayload) Validate() error {
	if p.Plan == "" {
		p.Plan = plans[0]
	}
	return first(checkEntityID("org_id", p.OrgID), required("name", p.Name, maxName),
		checkOneOf("plan", p.Plan, plans), checkActor(string(p.Actor)))
}

// UserRegisterPayload registers a user in an org. The password is stored
// as a bcrypt hash and appears in no event, log or audit record.
type UserRegisterPayload struct {
	OrgID  string `json:"org_id"`
	UserID string `json:"user_id"`
	// Email is unique within the org, compared without case.
	Email       string `json:"email"`
	Password    string `json:"password"`
	DisplayName string `json:"display_name"`
	// Role is owner, admin, member or viewer.
	Role  string `json:"role"`
	Actor Actor  `json:"actor"`
}

func (UserRegisterPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "user_id"))
	email := property(s, "email")
	requiredTextSchema(email, maxEmail)
	email.Pattern = emailSchemaPattern
	pw := property(s, "password")
	requiredTextSchema(pw, maxPassword)
	pw.MinLength = count(minPassword)
	requiredTextSchema(property(s, "display_name"), maxName)
	enumSchema(property(s, "role"), roles)
	actorSchema(property(s, "actor"))
	goOnly(s, fmt.Sprintf("password is at most %d bytes of UTF-8 (bcrypt reads no more)", maxPassword))
}

func (p *UserRegisterPayload) Validate() error {
	p.Email = strings.ToLower(p.Email)
	if err := first(checkEntityID("org_id", p.OrgID), checkEntityID("user_id", p.UserID),
		required("email", p.Email, maxEmail), required("display_name", p.DisplayName, maxName),
		checkOneOf("role", p.Role, roles), checkActor(string(p.Actor))); err != nil {
		return err
	}
	if !emailPattern.MatchString(p.Email) {
		return invalid("email", "%q is not an email address", p.Email)
	}
	if err := required("password", p.Password, maxPassword); err != nil {
		return err
	}
	if len([]rune(p.Password)) < minPassword || len(p.Password) > maxPassword {
		return invalid("password", "want %d to %d bytes", minPassword, maxPassword)
	}
	return nil
}

// UserSuspendPayload suspends a user: it can no longer act.
type UserSuspendPayload struct {
	OrgID  string `json:"org_id"`
	UserID string `json:"user_id"`
	Actor  Actor  `json:"actor"`
}

func (UserSuspendPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "user_id"))
	actorSchema(property(s, "actor"))
}

func (p *UserSuspendPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("user_id", p.UserID), checkActor(string(p.Actor)))
}

// ProjectCreatePayload creates a project in an existing org.
type ProjectCreatePayload struct {
	OrgID     string `json:"org_id"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	// LocalPathHint is where the project usually lives on a developer's
	// machine, e.g. /Users/dev/myproject.
	LocalPathHint string `json:"local_path_hint,omitempty"`
	DefaultModel  string `json:"default_model,omitempty"`
	Actor         Actor  `json:"actor"`
}

func (ProjectCreatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "project_id"))
	requiredTextSchema(property(s, "name"), maxName)
	textSchema(property(s, "local_path_hint"), maxName*4)
	nullable(property(s, "local_path_hint"))
	textSchema(property(s, "default_model"), maxModel)
	nullable(property(s, "default_model"))
	actorSchema(property(s, "actor"))
}

func (p *ProjectCreatePayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("project_id", p.ProjectID),
		required("name", p.Name, maxName), checkText("local_path_hint", p.LocalPathHint, maxName*4),
		checkText("default_model", p.DefaultModel, maxModel), checkActor(string(p.Actor)))
}

// SettingsUpdatePayload replaces the settings of one scope: the org's
// global settings, a user's or a project's.
type SettingsUpdatePayload struct {
	OrgID string `json:"org_id"`
	// Scope is global, user (with user_id) or project (with project_id).
	Scope        string `json:"scope"`
	UserID       string `json:"user_id,omitempty"`
	ProjectID    string `json:"project_id,omitempty"`
	DefaultModel string `json:"default_model,omitempty"`
	// ModelAllowList, when set, is every model a task may use where this
	// is the most specific scope that has one.
	ModelAllowList  []string `json:"model_allow_list,omitempty"`
	OpenAIKeyRef    string   `json:"openai_key_ref,omitempty"`
	AnthropicKeyRef string   `json:"anthropic_key_ref,omitempty"`
	// UIPrefs and NotifyPrefs are free-form objects of strings.
	UIPrefs     map[string]string `json:"ui_prefs,omitempty"`
	NotifyPrefs map[string]string `json:"notify_prefs,omitempty"`
	Actor       Actor             `json:"actor"`
}

func (SettingsUpdatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	enumSchema(property(s, "scope"), scopes)
	optionalEntityIDSchema(property(s, "user_id"))
	optionalEntityIDSchema(property(s, "project_id"))
	for _, f := range []string{"default_model", "openai_key_ref", "anthropic_key_ref"} {
		textSchema(property(s, f), maxModel)
		nullable(property(s, f))
	}
	models := property(s, "model_allow_list")
	models.MaxItems = count(maxModels)
	requiredTextSchema(models.Items, maxModel)
	nullable(models)
	nullable(property(s, "ui_prefs"))
	nullable(property(s, "notify_prefs"))
	actorSchema(property(s, "actor"))
	exactlyWhenScope(s, ScopeUser, "user_id")
	exactlyWhenScope(s, ScopeProject, "project_id")
	goOnly(s, fmt.Sprintf("ui_prefs and notify_prefs are each at most %d KiB, keys and values counted in bytes of UTF-8", maxPrefs>>10))
}

func (p *SettingsUpdatePayload) Validate() error {
	if err := first(checkEntityID("org_id", p.OrgID), checkOneOf("scope", p.Scope, scopes),
		checkOptionalEntityID("user_id", p.UserID), checkOptionalEntityID("project_id", p.ProjectID),
		checkText("default_model", p.DefaultModel, maxModel), checkText("openai_key_ref", p.OpenAIKeyRef, maxModel),
		checkText("anthropic_key_ref", p.AnthropicKeyRef, maxModel), checkActor(string(p.Actor))); err != nil {
		return err
	}
	if (p.Scope == ScopeUser) != (p.UserID != "") {
		return invalid("user_id", "set exactly when scope is user")
	}
	if (p.Scope == ScopeProject) != (p.ProjectID != "") {
		return invalid("project_id", "set exactly when scope is project")
	}
	if len(p.ModelAllowList) > maxModels {
		return invalid("model_allow_list", "%d models, at most %d", len(p.ModelAllowList), maxModels)
	}
	for i, m := range p.ModelAllowList {
		if err := required(fmt.Sprintf("model_allow_list[%d]", i), m, maxModel); err != nil {
			return err
		}
	}
	for field, prefs := range map[string]map[string]string{"ui_prefs": p.UIPrefs, "notify_prefs": p.NotifyPrefs} {
		size := 0
		for k, v := range prefs {
			size += len(k) + len(v)
		}
		if size > maxPrefs {
			return invalid(field, "%d bytes, at most %d", size, maxPrefs)
		}
	}
	return nil
}

// SecretStorePayload stores an API key for the org. Outside development
// transit encrypts it with KMS before it reaches the table; it appears in
// no event, log or audit record.
type SecretStorePayload struct {
	OrgID    string `json:"org_id"`
	SecretID string `json:"secret_id"`
	// SecretType is openai_key or anthropic_key. (Not "type": a body with
	// a type member is read as an envelope.)
	SecretType string `json:"secret_type"`
	Value      string `json:"value"`
	Actor      Actor  `json:"actor"`
}

func (SecretStorePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "secret_id"))
	enumSchema(property(s, "secret_type"), secretTypes)
	requiredTextSchema(property(s, "value"), maxSecret)
	actorSchema(property(s, "actor"))
}

func (p *SecretStorePayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("secret_id", p.SecretID),
		checkOneOf("secret_type", p.SecretType, secretTypes), required("value", p.Value, maxSecret), checkActor(string(p.Actor)))
}

// SecretRotatePayload replaces the value of a stored secret.
type SecretRotatePayload struct {
	OrgID    string `json:"org_id"`
	SecretID string `json:"secret_id"`
	Value    string `json:"value"`
	Actor    Actor  `json:"actor"`
}

func (SecretRotatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "secret_id"))
	requiredTextSchema(property(s, "value"), maxSecret)
	actorSchema(property(s, "actor"))
}

func (p *SecretRotatePayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("secret_id", p.SecretID),
		required("value", p.Value, maxSecret), checkActor(string(p.Actor)))
}

// OrgCreatedPayload is an org created.
type OrgCreatedPayload struct {
	OrgID     string `json:"org_id"`
	Name      string `json:"name"`
	Plan      string `json:"plan"`
	CreatedAt string `json:"created_at"`
}

// UserRegisteredPayload is a user registered; never its password.
type UserRegisteredPayload struct {
	OrgID       string `json:"org_id"`
	UserID      string `json:"user_id"`
	Email       string `json:"email"`
	DisplayName string `json:"display_name"`
	Role        string `json:"role"`
	CreatedAt   string `json:"created_at"`
}

// UserSuspendedPayload is a user suspended.
type UserSuspendedPayload struct {
	OrgID  string `json:"org_id"`
	UserID string `json:"user_id"`
	// By is who suspended the user.
	By Actor `json:"by"`
}

// ProjectCreatedPayload is a project created.
type ProjectCreatedPayload struct {
	OrgID         string `json:"org_id"`
	ProjectID     string `json:"project_id"`
	Name          string `json:"name"`
	LocalPathHint string `json:"local_path_hint,omitempty"`
	DefaultModel  string `json:"default_model,omitempty"`
	CreatedAt     string `json:"created_at"`
}

// SettingsUpdatedPayload is a scope's settings replaced.
type SettingsUpdatedPayload struct {
	OrgID          string   `json:"org_id"`
	Scope          string   `json:"scope"`
	UserID         string   `json:"user_id,omitempty"`
	ProjectID      string   `json:"project_id,omitempty"`
	DefaultModel   string   `json:"default_model,omitempty"`
	ModelAllowList []string `json:"model_allow_list,omitempty"`
	UpdatedAt      string   `json:"updated_at"`
}

// SecretStoredPayload is a secret stored or rotated: which, never its
// value.
type SecretStoredPayload struct {
	OrgID    string `json:"org_id"`
	SecretID string `json:"secret_id"`
	// SecretType is openai_key or anthropic_key.
	SecretType string `json:"secret_type"`
	// Encrypted is false only in development, where plaintext is allowed.
	Encrypted bool   `json:"encrypted"`
	UpdatedAt string `json:"updated_at"`
}

// OrgRejectedPayload is an org command refused.
type OrgRejectedPayload struct {
	Command Type   `json:"command"`
	OrgID   string `json:"org_id"`
	// ID is what the command was about: the user, project, secret or
	// settings scope it named (empty for org.created).
	ID     string `json:"id,omitempty"`
	Actor  Actor  `json:"actor"`
	Reason string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p OrgRejectedPayload) RejectionReason() string { return p.Reason }

// first is the first non-nil error of checks made in order.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
