package messages_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

// orgGood are valid org payloads; they join good, so the catalogue's
// agreement tests (every member removed, null, of the wrong type) cover
// the org domain too.
var orgGood = map[messages.Type]string{
	messages.OrgCreate: `{"org_id":"org-acme","name":"Acme Corp","plan":"pro","actor":"system"}`,
	messages.UserRegister: `{"org_id":"org-acme","user_id":"u-1","email":"Ada@Acme.example","password":"correct horse battery staple",` +
		`"display_name":"Ada Lovelace","role":"owner","actor":"system"}`,
	messages.UserSuspend: `{"org_id":"org-acme","user_id":"u-2","actor":"user:u-1"}`,
	messages.ProjectCreate: `{"org_id":"org-acme","project_id":"proj-web","name":"Web app","local_path_hint":"/Users/ada/src/web",` +
		`"default_model":"claude-sonnet-4-5","actor":"user:u-1"}`,
	messages.SettingsUpdate: `{"org_id":"org-acme","scope":"project","project_id":"proj-web","default_model":"claude-sonnet-4-5",` +
		`"model_allow_list":["claude-sonnet-4-5","claude-opus-4-1"],"openai_key_ref":"secret-openai","anthropic_key_ref":"secret-anthropic",` +
		`"ui_prefs":{"theme":"dark"},"notify_prefs":{"task.awaiting-response":"email"},"actor":"user:u-1"}`,
	messages.SecretStore:  `{"org_id":"org-acme","secret_id":"secret-anthropic","secret_type":"anthropic_key","value":"sk-ant-api03-EXAMPLE","actor":"user:u-1"}`,
	messages.SecretRotate: `{"org_id":"org-acme","secret_id":"secret-anthropic","value":"sk-ant-api03-ROTATED","actor":"user:u-1"}`,
}

func init() {
	for typ, payload := range orgGood {
		good[typ] = payload
	}
}

// change is a case: good payload of typ with each path set to its raw
// value ("" removes it), pairs of path and value in order.
func change(t *testing.T, name string, typ messages.Type, valid bool, pathsAndValues ...string) agreementCase {
	require.Zero(t, len(pathsAndValues)%2, "%s: paths and values come in pairs", name)
	payload := good[typ]
	for i := 0; i < len(pathsAndValues); i += 2 {
		payload = edit(t, payload, pathsAndValues[i], pathsAndValues[i+1])
	}
	return agreementCase{Name: name, Type: typ, Payload: payload, Valid: valid}
}

func listOf(n int, item func(i int) string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = str(item(i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

func orgAgreementCases(t *testing.T) []agreementCase {
	var (
		create   = messages.OrgCreate
		register = messages.UserRegister
		suspend  = messages.UserSuspend
		project  = messages.ProjectCreate
		settings = messages.SettingsUpdate
		store    = messages.SecretStore
		rotate   = messages.SecretRotate
	)
	return []agreementCase{
		// org.created: identifiers and actors, shared by every org and task command
		set(t, "org_id_with_colon_and_dot", create, "org_id", str("acme:eu.1"), true),
		set(t, "org_id_at_max_length", create, "org_id", str(strings.Repeat("o", 128)), true),
		set(t, "org_id_too_long", create, "org_id", str(strings.Repeat("o", 129)), false),
		set(t, "org_id_key_separator", create, "org_id", str("org#acme"), false),
		set(t, "org_id_leading_dash", create, "org_id", str("-acme"), false),
		set(t, "org_id_slash", create, "org_id", str("acme/eu"), false),
		set(t, "org_id_empty", create, "org_id", str(""), false),
		set(t, "org_id_trailing_newline", create, "org_id", str("acme\n"), false),
		set(t, "org_id_non_ascii", create, "org_id", str("acmé"), false),
		set(t, "name_unicode", create, "name", str("Acme Zürich ✓"), true),
		set(t, "name_256_two_byte_characters", create, "name", str(strings.Repeat("é", 256)), true),
		set(t, "name_too_long", create, "name", str(strings.Repeat("n", 257)), false),
		set(t, "name_empty", create, "name", str(""), false),
		set(t, "name_control_character", create, "name", str("Acme\x1b[31m"), false),
		set(t, "plan_free", create, "plan", str("free"), true),
		set(t, "plan_enterprise", create, "plan", str("enterprise"), true),
		set(t, "plan_empty_is_default", create, "plan", str(""), true),
		set(t, "plan_unknown", create, "plan", str("trial"), false),
		set(t, "plan_upper_case", create, "plan", str("Pro"), false),
		set(t, "actor_user", create, "actor", str("user:u-1"), true),
		set(t, "actor_agent", create, "actor", str("agent:agent-7"), true),
		set(t, "actor_user_at_max_length", create, "actor", str("user:"+strings.Repeat("u", 128)), true),
		set(t, "actor_user_too_long", create, "actor", str("user:"+strings.Repeat("u", 129)), false),
		set(t, "actor_agent_at_max_length", create, "actor", str("agent:"+strings.Repeat("a", 128)), true),
		set(t, "actor_empty", create, "actor", str(""), false),
		set(t, "actor_no_id", create, "actor", str("user:"), false),
		set(t, "actor_unknown_kind", create, "actor", str("service:billing"), false),
		set(t, "actor_bare_id", create, "actor", str("u-1"), false),
		set(t, "actor_system_upper_case", create, "actor", str("System"), false),
		set(t, "actor_system_with_id", create, "actor", str("system:cron"), false),
		set(t, "actor_id_with_space", create, "actor", str("user:u 1"), false),
		set(t, "actor_trailing_newline", create, "actor", str("user:u-1\n"), false),

		// user.registered
		set(t, "email_upper_case", register, "email", str("ADA@ACME.EXAMPLE"), true),
		set(t, "email_plus_and_dots", register, "email", str("ada.l+transit@mail.acme.example"), true),
		set(t, "email_consecutive_dots", register, "email", str("ada..l@acme.example"), true),
		set(t, "email_trailing_dot", register, "email", str("ada@acme.example."), true),
		set(t, "email_unicode", register, "email", str("zoë@bücher.example"), true),
		set(t, "email_no_break_space", register, "email", str("ada\u00a0l@acme.example"), true),
		set(t, "email_at_max_length", register, "email", str(strings.Repeat("a", 241)+"@acme.example"), true),
		set(t, "email_too_long", register, "email", str(strings.Repeat("a", 242)+"@acme.example"), false),
		set(t, "email_empty", register, "email", str(""), false),
		set(t, "email_no_at", register, "email", str("ada.acme.example"), false),
		set(t, "email_no_dot_in_domain", register, "email", str("ada@localhost"), false),
		set(t, "email_two_ats", register, "email", str("ada@lovelace@acme.example"), false),
		set(t, "email_space", register, "email", str("ada l@acme.example"), false),
		set(t, "email_tab", register, "email", str("ada\t@acme.example"), false),
		set(t, "email_control_character", register, "email", str("ada\x01@acme.example"), false),
		set(t, "email_delete_character", register, "email", str("ada\x7f@acme.example"), false),
		set(t, "email_trailing_newline", register, "email", str("ada@acme.example\n"), false),
		set(t, "email_nothing_after_the_dot", register, "email", str("ada@acme."), false),
		set(t, "password_at_min_length", register, "password", str("12345678"), true),
		set(t, "password_too_short", register, "password", str("1234567"), false),
		set(t, "password_at_max_length", register, "password", str(strings.Repeat("p", 72)), true),
		set(t, "password_too_long", register, "password", str(strings.Repeat("p", 73)), false),
		set(t, "password_eight_two_byte_characters", register, "password", str(strings.Repeat("é", 8)), true),
		set(t, "password_72_bytes_of_two_byte_characters", register, "password", str(strings.Repeat("é", 36)), true),
		set(t, "password_empty", register, "password", str(""), false),
		set(t, "password_control_character", register, "password", str("password\x00"), false),
		set(t, "password_space", register, "password", str("pass word"), true),
		set(t, "display_name_empty", register, "display_name", str(""), false),
		set(t, "display_name_too_long", register, "display_name", str(strings.Repeat("d", 257)), false),
		set(t, "role_viewer", register, "role", str("viewer"), true),
		set(t, "role_empty", register, "role", str(""), false),
		set(t, "role_upper_case", register, "role", str("Admin"), false),
		set(t, "role_unknown", register, "role", str("superuser"), false),
		set(t, "user_id_key_separator", register, "user_id", str("u#1"), false),

		// user.suspended
		set(t, "suspend_user_id_space", suspend, "user_id", str("u 2"), false),
		set(t, "suspend_by_agent", suspend, "actor", str("agent:agent-7"), true),
		set(t, "suspend_actor_empty", suspend, "actor", str(""), false),

		// project.created
		set(t, "project_id_injection", project, "project_id", str(`p" OR 1=1`), false),
		set(t, "local_path_hint_empty", project, "local_path_hint", str(""), true),
		set(t, "local_path_hint_windows", project, "local_path_hint", str(`C:\Users\ada\src\web`), true),
		set(t, "local_path_hint_at_max_length", project, "local_path_hint", str("/"+strings.Repeat("p", 1023)), true),
		set(t, "local_path_hint_too_long", project, "local_path_hint", str("/"+strings.Repeat("p", 1024)), false),
		set(t, "local_path_hint_newline", project, "local_path_hint", str("/src\n/web"), false),
		set(t, "default_model_at_max_length", project, "default_model", str(strings.Repeat("m", 128)), true),
		set(t, "default_model_too_long", project, "default_model", str(strings.Repeat("m", 129)), false),
		set(t, "default_model_empty", project, "default_model", str(""), true),

		// settings.updated: user_id exactly with scope user, project_id with scope project
		change(t, "scope_global", settings, true, "scope", str("global"), "project_id", ""),
		change(t, "scope_global_with_empty_ids", settings, true, "scope", str("global"), "project_id", str(""), "user_id", str("")),
		change(t, "scope_global_with_null_ids", settings, true, "scope", str("global"), "project_id", "null", "user_id", "null"),
		change(t, "scope_global_with_project_id", settings, false, "scope", str("global")),
		change(t, "scope_global_with_user_id", settings, false, "scope", str("global"), "project_id", "", "user_id", str("u-1")),
		change(t, "scope_user", settings, true, "scope", str("user"), "project_id", "", "user_id", str("u-1")),
		change(t, "scope_user_without_user_id", settings, false, "scope", str("user"), "project_id", ""),
		change(t, "scope_user_with_empty_user_id", settings, false, "scope", str("user"), "project_id", "", "user_id", str("")),
		change(t, "scope_user_with_null_user_id", settings, false, "scope", str("user"), "project_id", "", "user_id", "null"),
		change(t, "scope_user_with_project_id_too", settings, false, "scope", str("user"), "user_id", str("u-1")),
		change(t, "scope_user_with_bad_user_id", settings, false, "scope", str("user"), "project_id", "", "user_id", str("u#1")),
		change(t, "scope_project_with_user_id_too", settings, false, "user_id", str("u-1")),
		set(t, "scope_project_with_empty_project_id", settings, "project_id", str(""), false),
		set(t, "scope_project_with_bad_project_id", settings, "project_id", str("proj web"), false),
		set(t, "scope_unknown", settings, "scope", str("org"), false),
		set(t, "scope_upper_case", settings, "scope", str("Project"), false),
		set(t, "scope_empty", settings, "scope", str(""), false),
		set(t, "model_allow_list_empty", settings, "model_allow_list", "[]", true),
		set(t, "model_allow_list_at_max", settings, "model_allow_list", listOf(64, func(i int) string { return fmt.Sprintf("model-%d", i) }), true),
		set(t, "model_allow_list_too_long", settings, "model_allow_list", listOf(65, func(i int) string { return fmt.Sprintf("model-%d", i) }), false),
		set(t, "model_allow_list_empty_model", settings, "model_allow_list.1", str(""), false),
		set(t, "model_allow_list_null_model", settings, "model_allow_list.1", "null", false),
		set(t, "model_allow_list_model_too_long", settings, "model_allow_list.0", str(strings.Repeat("m", 129)), false),
		set(t, "model_allow_list_model_control_character", settings, "model_allow_list.0", str("claude\x00"), false),
		set(t, "model_allow_list_number", settings, "model_allow_list.0", "7", false),
		set(t, "default_model_control_character", settings, "default_model", str("claude\n"), false),
		set(t, "openai_key_ref_too_long", settings, "openai_key_ref", str(strings.Repeat("k", 129)), false),
		set(t, "anthropic_key_ref_empty", settings, "anthropic_key_ref", str(""), true),
		set(t, "ui_prefs_empty", settings, "ui_prefs", "{}", true),
		set(t, "ui_prefs_nested_object", settings, "ui_prefs.theme", `{"name":"dark"}`, false),
		set(t, "ui_prefs_number", settings, "ui_prefs.columns", "3", false),
		set(t, "ui_prefs_array", settings, "ui_prefs", `["dark"]`, false),
		set(t, "notify_prefs_at_max_size", settings, "notify_prefs", fmt.Sprintf(`{"k":%s}`, str(strings.Repeat("v", 16<<10-1))), true),

		// secret.stored, secret.rotated
		set(t, "secret_type_openai", store, "secret_type", str("openai_key"), true),
		set(t, "secret_type_unknown", store, "secret_type", str("github_token"), false),
		set(t, "secret_type_empty", store, "secret_type", str(""), false),
		set(t, "secret_value_at_max_length", store, "value", str(strings.Repeat("s", 8<<10)), true),
		set(t, "secret_value_too_long", store, "value", str(strings.Repeat("s", 8<<10+1)), false),
		set(t, "secret_value_empty", store, "value", str(""), false),
		set(t, "secret_value_trailing_newline", store, "value", str("sk-ant-api03-EXAMPLE\n"), false),
		set(t, "secret_id_key_separator", store, "secret_id", str("secret#1"), false),
		set(t, "rotate_value_empty", rotate, "value", str(""), false),
		set(t, "rotate_secret_id_empty", rotate, "secret_id", str(""), false),
		set(t, "rotate_actor_system", rotate, "actor", str("system"), true),
	}
}

func TestOrgSchemas_agree_with_transit(t *testing.T) {
	agreeWithTransit(t, messages.Org, orgAgreementCases(t), orgGood)
}

// TestOrgSchemas_known_differences pins where the org schemas and transit
// part, as TestSchemas_known_differences does for the others.
func TestOrgSchemas_known_differences(t *testing.T) {
	_, compiled := catalogue(t)
	tests := []struct {
		Name    string
		Type    messages.Type
		Payload string
		GoOK    bool // the schema says the opposite
	}{
		// Rules only transit checks.
		{Name: "password_over_72_bytes", Type: messages.UserRegister,
			Payload: edit(t, good[messages.UserRegister], "password", str(strings.Repeat("é", 37)))},
		{Name: "ui_prefs_over_16_kib", Type: messages.SettingsUpdate,
			Payload: edit(t, good[messages.SettingsUpdate], "ui_prefs", fmt.Sprintf(`{"a":%s,"b":%s}`, str(strings.Repeat("v", 8<<10)), str(strings.Repeat("v", 8<<10))))},
		// Leniencies of encoding/json: a null string in a map is read as "".
		{Name: "ui_prefs_null_value", Type: messages.SettingsUpdate, Payload: edit(t, good[messages.SettingsUpdate], "ui_prefs.theme", "null"), GoOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, tc.GoOK, goOK, "transit's verdict")
			assert.Equal(t, !tc.GoOK, schemaOK, "the schema's verdict")
		})
	}
}

// decodeWith decodes a command of typ whose payload is base with set
// applied (a nil value removes the member).
func decodeWith(t *testing.T, typ messages.Type, base string, set map[string]any) (messages.Command, error) {
	t.Helper()
	payload := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(base), &payload))
	for k, v := range set {
		if v == nil {
			delete(payload, k)
			continue
		}
		payload[k] = v
	}
	return messages.Decode(envelope(t, "cmd-1", typ, payload), messages.Meta{})
}

func TestDecode_org_create_defaults_plan_to_free(t *testing.T) {
	for name, set := range map[string]map[string]any{
		"absent": {"plan": nil},
		"empty":  {"plan": ""},
	} {
		t.Run(name, func(t *testing.T) {
			cmd, err := decodeWith(t, messages.OrgCreate, orgGood[messages.OrgCreate], set)
			require.NoError(t, err)
			assert.Equal(t, &messages.OrgCreatePayload{OrgID: "org-acme", Name: "Acme Corp", Plan: "free", Actor: "system"}, cmd.Payload)
		})
	}
	cmd, err := decodeWith(t, messages.OrgCreate, orgGood[messages.OrgCreate], nil)
	require.NoError(t, err)
	assert.Equal(t, "pro", cmd.Payload.(*messages.OrgCreatePayload).Plan, "a plan given is kept")
}

func TestDecode_org_create_rejects_bad_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_org_id", map[string]any{"org_id": nil}, "org_id"},
		{"org_id_key_separator", map[string]any{"org_id": "org#acme"}, "org_id"},
		{"org_id_expression_value", map[string]any{"org_id": ":acme"}, "org_id"},
		{"org_id_too_long", map[string]any{"org_id": strings.Repeat("o", 129)}, "org_id"},
		{"no_name", map[string]any{"name": nil}, "name"},
		{"name_too_long", map[string]any{"name": strings.Repeat("n", 257)}, "name"},
		{"name_control_character", map[string]any{"name": "Acme\x07"}, "name"},
		{"plan_unknown", map[string]any{"plan": "trial"}, "plan"},
		{"no_actor", map[string]any{"actor": nil}, "actor"},
		{"actor_without_kind", map[string]any{"actor": "u-1"}, "actor"},
		{"actor_unknown_kind", map[string]any{"actor": "service:billing"}, "actor"},
		{"actor_without_id", map[string]any{"actor": "agent:"}, "actor"},
		{"unknown_field", map[string]any{"owner": "u-1"}, "owner"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.OrgCreate, orgGood[messages.OrgCreate], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestDecode_user_register_lower_cases_email(t *testing.T) {
	cmd, err := decodeWith(t, messages.UserRegister, orgGood[messages.UserRegister], map[string]any{"email": "Ada.Lovelace@ACME.Example"})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.UserRegisterPayload)
	assert.Equal(t, "ada.lovelace@acme.example", p.Email)
	assert.Equal(t, "correct horse battery staple", p.Password, "the password is kept as sent")
	assert.Equal(t, messages.Actor("system"), p.Actor)
}

func TestDecode_user_register_rejects_bad_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_org_id", map[string]any{"org_id": nil}, "org_id"},
		{"user_id_space", map[string]any{"user_id": "u 1"}, "user_id"},
		{"no_email", map[string]any{"email": nil}, "email"},
		{"email_without_at", map[string]any{"email": "ada.acme.example"}, "email"},
		{"email_without_dot_in_domain", map[string]any{"email": "ada@localhost"}, "email"},
		{"email_two_ats", map[string]any{"email": "a@b@acme.example"}, "email"},
		{"email_space", map[string]any{"email": "ada l@acme.example"}, "email"},
		{"email_too_long", map[string]any{"email": strings.Repeat("a", 242) + "@acme.example"}, "email"},
		{"no_password", map[string]any{"password": nil}, "password"},
		{"password_seven_characters", map[string]any{"password": "1234567"}, "password"},
		{"password_73_characters", map[string]any{"password": strings.Repeat("p", 73)}, "password"},
		// bcrypt reads 72 bytes: 37 two-byte characters are 74.
		{"password_over_72_bytes", map[string]any{"password": strings.Repeat("é", 37)}, "password"},
		{"no_display_name", map[string]any{"display_name": nil}, "display_name"},
		{"no_role", map[string]any{"role": nil}, "role"},
		{"role_unknown", map[string]any{"role": "superuser"}, "role"},
		{"role_upper_case", map[string]any{"role": "Owner"}, "role"},
		{"actor_bad", map[string]any{"actor": "root"}, "actor"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.UserRegister, orgGood[messages.UserRegister], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestDecode_user_register_accepts_passwords_by_characters_and_bytes(t *testing.T) {
	for name, pw := range map[string]string{
		"eight_characters":               "12345678",
		"eight_two_byte_characters":      strings.Repeat("é", 8),
		"72_bytes":                       strings.Repeat("p", 72),
		"36_two_byte_characters_72_byte": strings.Repeat("é", 36),
	} {
		t.Run(name, func(t *testing.T) {
			cmd, err := decodeWith(t, messages.UserRegister, orgGood[messages.UserRegister], map[string]any{"password": pw})
			require.NoError(t, err)
			assert.Equal(t, pw, cmd.Payload.(*messages.UserRegisterPayload).Password)
		})
	}
}

func TestDecode_user_suspend_and_project_create_check_their_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Type      messages.Type
		Set       map[string]any
		WantField string
	}{
		{"suspend_no_user_id", messages.UserSuspend, map[string]any{"user_id": nil}, "user_id"},
		{"suspend_org_id_bad", messages.UserSuspend, map[string]any{"org_id": "org acme"}, "org_id"},
		{"suspend_actor_bad", messages.UserSuspend, map[string]any{"actor": "user:u#1"}, "actor"},
		{"project_no_project_id", messages.ProjectCreate, map[string]any{"project_id": nil}, "project_id"},
		{"project_no_name", messages.ProjectCreate, map[string]any{"name": ""}, "name"},
		{"project_local_path_hint_too_long", messages.ProjectCreate, map[string]any{"local_path_hint": "/" + strings.Repeat("p", 1024)}, "local_path_hint"},
		{"project_local_path_hint_newline", messages.ProjectCreate, map[string]any{"local_path_hint": "/src\n"}, "local_path_hint"},
		{"project_default_model_too_long", messages.ProjectCreate, map[string]any{"default_model": strings.Repeat("m", 129)}, "default_model"},
		{"project_no_actor", messages.ProjectCreate, map[string]any{"actor": nil}, "actor"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, tc.Type, orgGood[tc.Type], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}

	// The optional members may be left out.
	cmd, err := decodeWith(t, messages.ProjectCreate, orgGood[messages.ProjectCreate], map[string]any{"local_path_hint": nil, "default_model": nil})
	require.NoError(t, err)
	assert.Equal(t, &messages.ProjectCreatePayload{OrgID: "org-acme", ProjectID: "proj-web", Name: "Web app", Actor: "user:u-1"}, cmd.Payload)
}

func TestDecode_settings_update_names_the_id_of_its_scope(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string // "" when valid
	}{
		{"global", map[string]any{"scope": "global", "project_id": nil}, ""},
		{"user", map[string]any{"scope": "user", "project_id": nil, "user_id": "u-1"}, ""},
		{"project", map[string]any{}, ""},
		{"global_with_project_id", map[string]any{"scope": "global"}, "project_id"},
		{"global_with_user_id", map[string]any{"scope": "global", "project_id": nil, "user_id": "u-1"}, "user_id"},
		{"user_without_user_id", map[string]any{"scope": "user", "project_id": nil}, "user_id"},
		{"user_with_project_id", map[string]any{"scope": "user", "user_id": "u-1"}, "project_id"},
		{"project_without_project_id", map[string]any{"project_id": nil}, "project_id"},
		{"project_with_user_id", map[string]any{"user_id": "u-1"}, "user_id"},
		{"no_scope", map[string]any{"scope": nil}, "scope"},
		{"scope_unknown", map[string]any{"scope": "org"}, "scope"},
		{"user_id_bad", map[string]any{"scope": "user", "project_id": nil, "user_id": "u 1"}, "user_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cmd, err := decodeWith(t, messages.SettingsUpdate, orgGood[messages.SettingsUpdate], tc.Set)
			if tc.WantField != "" {
				requireInvalid(t, err, tc.WantField)
				return
			}
			require.NoError(t, err)
			p := cmd.Payload.(*messages.SettingsUpdatePayload)
			switch p.Scope {
			case messages.ScopeGlobal:
				assert.Equal(t, [2]string{"", ""}, [2]string{p.UserID, p.ProjectID})
			case messages.ScopeUser:
				assert.Equal(t, [2]string{"u-1", ""}, [2]string{p.UserID, p.ProjectID})
			case messages.ScopeProject:
				assert.Equal(t, [2]string{"", "proj-web"}, [2]string{p.UserID, p.ProjectID})
			}
		})
	}
}

func TestDecode_settings_update_rejects_bad_fields(t *testing.T) {
	models := func(n int) []string {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = fmt.Sprintf("model-%d", i)
		}
		return ms
	}
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_org_id", map[string]any{"org_id": nil}, "org_id"},
		{"default_model_too_long", map[string]any{"default_model": strings.Repeat("m", 129)}, "default_model"},
		{"openai_key_ref_control_character", map[string]any{"openai_key_ref": "ref\x00"}, "openai_key_ref"},
		{"anthropic_key_ref_too_long", map[string]any{"anthropic_key_ref": strings.Repeat("k", 129)}, "anthropic_key_ref"},
		{"too_many_models", map[string]any{"model_allow_list": models(65)}, "model_allow_list"},
		{"empty_model", map[string]any{"model_allow_list": []string{"claude-sonnet-4-5", ""}}, "model_allow_list[1]"},
		{"model_too_long", map[string]any{"model_allow_list": []string{strings.Repeat("m", 129)}}, "model_allow_list[0]"},
		{"ui_prefs_over_16_kib", map[string]any{"ui_prefs": map[string]string{"a": strings.Repeat("v", 8<<10), "b": strings.Repeat("v", 8<<10)}}, "ui_prefs"},
		{"notify_prefs_over_16_kib", map[string]any{"notify_prefs": map[string]string{strings.Repeat("k", 16<<10): "v"}}, "notify_prefs"},
		{"ui_prefs_not_strings", map[string]any{"ui_prefs": map[string]any{"columns": 3}}, "ui_prefs"},
		{"actor_bad", map[string]any{"actor": "user:"}, "actor"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.SettingsUpdate, orgGood[messages.SettingsUpdate], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}

	// The limits themselves are allowed.
	cmd, err := decodeWith(t, messages.SettingsUpdate, orgGood[messages.SettingsUpdate], map[string]any{
		"model_allow_list": models(64), "ui_prefs": map[string]string{"k": strings.Repeat("v", 16<<10-1)},
	})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.SettingsUpdatePayload)
	assert.Len(t, p.ModelAllowList, 64)
	assert.Equal(t, map[string]string{"task.awaiting-response": "email"}, p.NotifyPrefs)
}

func TestDecode_secret_commands_check_their_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Type      messages.Type
		Set       map[string]any
		WantField string
	}{
		{"store_no_secret_id", messages.SecretStore, map[string]any{"secret_id": nil}, "secret_id"},
		{"store_secret_type_unknown", messages.SecretStore, map[string]any{"secret_type": "github_token"}, "secret_type"},
		{"store_no_value", messages.SecretStore, map[string]any{"value": ""}, "value"},
		{"store_value_too_long", messages.SecretStore, map[string]any{"value": strings.Repeat("s", 8<<10+1)}, "value"},
		{"store_value_newline", messages.SecretStore, map[string]any{"value": "sk-ant\n"}, "value"},
		{"store_no_actor", messages.SecretStore, map[string]any{"actor": nil}, "actor"},
		{"rotate_no_org_id", messages.SecretRotate, map[string]any{"org_id": ""}, "org_id"},
		{"rotate_no_value", messages.SecretRotate, map[string]any{"value": nil}, "value"},
		{"rotate_type_is_not_a_member", messages.SecretRotate, map[string]any{"type": "openai_key"}, "type"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, tc.Type, orgGood[tc.Type], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}

	cmd, err := decodeWith(t, messages.SecretStore, orgGood[messages.SecretStore], map[string]any{"value": strings.Repeat("s", 8<<10)})
	require.NoError(t, err)
	assert.Equal(t, "anthropic_key", cmd.Payload.(*messages.SecretStorePayload).SecretType)
}

func TestActor_names_its_user_or_agent(t *testing.T) {
	tests := []struct {
		Actor       messages.Actor
		User, Agent string
	}{
		{Actor: "user:u-1", User: "u-1"},
		{Actor: "agent:agent-7", Agent: "agent-7"},
		{Actor: "system"},
		{Actor: ""},
		{Actor: "useru-1"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.User, tc.Actor.User(), tc.Actor)
		assert.Equal(t, tc.Agent, tc.Actor.Agent(), tc.Actor)
	}
}
