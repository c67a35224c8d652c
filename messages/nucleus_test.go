package messages_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

const (
	nucleusAccount  = `"account_id":"123456789012"`
	nucleusSchedule = `"schedule_id":"sch-dev-nights"`
	nucleusRole     = "arn:aws:iam::123456789012:role/nucleus-scheduler"
	nucleusEC2      = "arn:aws:ec2:eu-central-1:123456789012:instance/i-0abc123def4567890"
	nucleusDB       = "arn:aws:rds:eu-central-1:123456789012:db:dev-orders"
	nucleusECS      = "arn:aws:ecs:eu-central-1:123456789012:service/dev/web-api"
	nucleusOtherEC2 = "arn:aws:ec2:eu-central-1:123456789012:volume/vol-0abc123def4567890"
)

// nucleusGood are valid nucleus payloads; they join good, so the
// catalogue's agreement tests (every member removed, null, of the wrong
// type) cover the nucleus domain too.
var nucleusGood = map[messages.Type]string{
	messages.AccountRegister: `{` + nucleusAccount + `,"account_name":"Development","role_arn":"` + nucleusRole + `","user_id":"u-1"}`,
	messages.AccountUpdate: `{` + nucleusAccount + `,"account_name":"Development (eu-central-1)",` +
		`"role_arn":"arn:aws:iam::123456789012:role/ops/nucleus-scheduler-v2","user_id":"u-1"}`,
	messages.AccountTest: `{` + nucleusAccount + `,"user_id":"u-1"}`,
	messages.ScheduleUpsert: `{` + nucleusSchedule + `,"schedule_name":"Dev environment nights","start_cron":"0 8 * * 1-5",` +
		`"end_cron":"0 19 * * 1-5","timezone":"Europe/Berlin","enabled":false,"user_id":"u-1"}`,
	messages.ScheduleEnable:    `{` + nucleusSchedule + `,"user_id":"u-1"}`,
	messages.ScheduleDisable:   `{` + nucleusSchedule + `,"user_id":"u-1"}`,
	messages.ScheduleDelete:    `{` + nucleusSchedule + `,"user_id":"u-1"}`,
	messages.ResourceAttach:    `{` + nucleusSchedule + `,"resource_arn":"` + nucleusEC2 + `","user_id":"u-1"}`,
	messages.ResourceDetach:    `{` + nucleusSchedule + `,"resource_arn":"` + nucleusDB + `","user_id":"u-1"}`,
	messages.ScheduleWindowDue: `{` + nucleusSchedule + `,"edge":"stop","window_at":"2030-01-02T18:00:00.000Z","user_id":"system"}`,
}

func init() {
	for typ, payload := range nucleusGood {
		good[typ] = payload
	}
}

// roleOfLength is a role ARN of account 123456789012, n characters long.
func roleOfLength(n int) string {
	const prefix = "arn:aws:iam::123456789012:role/"
	path := strings.Repeat("p/", (n-len(prefix)-1)/2)
	return prefix + path + strings.Repeat("r", n-len(prefix)-len(path))
}

// ecsOfLength is an ECS service ARN n characters long (550 or more), its
// region stretched: ParseResourceARN bounds the names, not the region.
func ecsOfLength(n int) string {
	names := "service/" + strings.Repeat("c", 255) + "/" + strings.Repeat("s", 255)
	fixed := len("arn:aws:ecs::123456789012:") + len(names) + len("us--1")
	return "arn:aws:ecs:us-" + strings.Repeat("a", n-fixed) + "-1:123456789012:" + names
}

func nucleusAgreementCases(t *testing.T) []agreementCase {
	var (
		register = messages.AccountRegister
		update   = messages.AccountUpdate
		test     = messages.AccountTest
		upsert   = messages.ScheduleUpsert
		enable   = messages.ScheduleEnable
		disable  = messages.ScheduleDisable
		del      = messages.ScheduleDelete
		attach   = messages.ResourceAttach
		detach   = messages.ResourceDetach
		due      = messages.ScheduleWindowDue
	)
	return []agreementCase{
		// account.registered: the account ID and role, shared by every account command
		set(t, "account_id_11_digits", register, "account_id", str("12345678901"), false),
		set(t, "account_id_13_digits", register, "account_id", str("1234567890123"), false),
		set(t, "account_id_letter", register, "account_id", str("12345678901a"), false),
		set(t, "account_id_dashes", register, "account_id", str("1234-5678-9012"), false),
		set(t, "account_id_trailing_newline", register, "account_id", str("123456789012\n"), false),
		set(t, "account_id_empty", register, "account_id", str(""), false),
		set(t, "account_id_number", register, "account_id", "123456789012", false),
		change(t, "account_id_leading_zeros", register, true,
			"account_id", str("000000000001"), "role_arn", str("arn:aws:iam::000000000001:role/nucleus-scheduler")),
		set(t, "account_name_unicode", register, "account_name", str("Entwicklung München ✓"), true),
		set(t, "account_name_at_max_length", register, "account_name", str(strings.Repeat("é", 256)), true),
		set(t, "account_name_too_long", register, "account_name", str(strings.Repeat("n", 257)), false),
		set(t, "account_name_empty", register, "account_name", str(""), false),
		set(t, "account_name_control_character", register, "account_name", str("Dev\x1b[31m"), false),
		set(t, "role_arn_with_path", register, "role_arn", str("arn:aws:iam::123456789012:role/service-role/ops/Scheduler+=,.@_-"), true),
		set(t, "role_arn_china", register, "role_arn", str("arn:aws-cn:iam::123456789012:role/r"), true),
		set(t, "role_arn_gov_cloud", register, "role_arn", str("arn:aws-us-gov:iam::123456789012:role/r"), true),
		set(t, "role_arn_name_at_max_length", register, "role_arn", str("arn:aws:iam::123456789012:role/"+strings.Repeat("r", 64)), true),
		set(t, "role_arn_name_too_long", register, "role_arn", str("arn:aws:iam::123456789012:role/"+strings.Repeat("r", 65)), false),
		set(t, "role_arn_at_max_length", register, "role_arn", str(roleOfLength(2048)), true),
		set(t, "role_arn_too_long", register, "role_arn", str(roleOfLength(2049)), false),
		set(t, "role_arn_unknown_partition", register, "role_arn", str("arn:aws-xx:iam::123456789012:role/r"), false),
		set(t, "role_arn_of_a_user", register, "role_arn", str("arn:aws:iam::123456789012:user/ada"), false),
		set(t, "role_arn_assumed_role", register, "role_arn", str("arn:aws:sts::123456789012:assumed-role/r/s"), false),
		set(t, "role_arn_trailing_slash", register, "role_arn", str("arn:aws:iam::123456789012:role/ops/"), false),
		set(t, "role_arn_no_name", register, "role_arn", str("arn:aws:iam::123456789012:role/"), false),
		set(t, "role_arn_11_digit_account", register, "role_arn", str("arn:aws:iam::12345678901:role/r"), false),
		set(t, "role_arn_region", register, "role_arn", str("arn:aws:iam:eu-central-1:123456789012:role/r"), false),
		set(t, "role_arn_colon_in_name", register, "role_arn", str("arn:aws:iam::123456789012:role/a:b"), false),
		set(t, "role_arn_space", register, "role_arn", str("arn:aws:iam::123456789012:role/a b"), false),
		set(t, "role_arn_key_separator", register, "role_arn", str("arn:aws:iam::123456789012:role/a#b"), false),
		set(t, "role_arn_trailing_newline", register, "role_arn", str(nucleusRole+"\n"), false),
		set(t, "role_arn_empty", register, "role_arn", str(""), false),
		set(t, "register_user_id_key_separator", register, "user_id", str("u#1"), false),
		set(t, "register_user_id_empty", register, "user_id", str(""), false),

		// account.updated: account_name or role_arn, at least one
		change(t, "name_only", update, true, "role_arn", ""),
		change(t, "role_only", update, true, "account_name", ""),
		change(t, "name_with_empty_role", update, true, "role_arn", str("")),
		change(t, "role_with_null_name", update, true, "account_name", "null"),
		change(t, "neither", update, false, "account_name", "", "role_arn", ""),
		change(t, "neither_empty", update, false, "account_name", str(""), "role_arn", str("")),
		change(t, "neither_null", update, false, "account_name", "null", "role_arn", "null"),
		change(t, "empty_name_without_role", update, false, "account_name", str(""), "role_arn", ""),
		change(t, "bad_name_with_role", update, false, "account_name", str(strings.Repeat("n", 257))),
		set(t, "update_role_arn_of_a_user", update, "role_arn", str("arn:aws:iam::123456789012:user/ada"), false),
		set(t, "update_role_arn_too_long", update, "role_arn", str(roleOfLength(2049)), false),
		set(t, "update_account_id_letters", update, "account_id", str("abcdefghijkl"), false),

		// account.tested
		set(t, "test_account_id_11_digits", test, "account_id", str("12345678901"), false),
		set(t, "test_user_id_space", test, "user_id", str("u 1"), false),

		// schedule.upserted: the crons and zone are parsed by the handler
		// (invalid_cron, invalid_timezone), not here.
		set(t, "enabled_true", upsert, "enabled", "true", true),
		set(t, "enabled_null_is_true", upsert, "enabled", "null", true),
		set(t, "enabled_absent_is_true", upsert, "enabled", "", true),
		set(t, "enabled_string", upsert, "enabled", str("true"), false),
		set(t, "enabled_number", upsert, "enabled", "1", false),
		set(t, "schedule_id_key_separator", upsert, "schedule_id", str("sch#1"), false),
		set(t, "schedule_id_space", upsert, "schedule_id", str("sch dev"), false),
		set(t, "schedule_id_at_max_length", upsert, "schedule_id", str(strings.Repeat("s", 128)), true),
		set(t, "schedule_id_too_long", upsert, "schedule_id", str(strings.Repeat("s", 129)), false),
		set(t, "schedule_name_empty", upsert, "schedule_name", str(""), false),
		set(t, "schedule_name_too_long", upsert, "schedule_name", str(strings.Repeat("n", 257)), false),
		set(t, "start_cron_descriptor", upsert, "start_cron", str("@daily"), true),
		set(t, "start_cron_not_a_cron", upsert, "start_cron", str("at eight"), true),
		set(t, "start_cron_at_max_length", upsert, "start_cron", str(strings.Repeat("*", 128)), true),
		set(t, "start_cron_too_long", upsert, "start_cron", str(strings.Repeat("*", 129)), false),
		set(t, "start_cron_empty", upsert, "start_cron", str(""), false),
		set(t, "end_cron_control_character", upsert, "end_cron", str("0 19 * * 1-5\n"), false),
		set(t, "end_cron_empty", upsert, "end_cron", str(""), false),
		set(t, "timezone_utc", upsert, "timezone", str("UTC"), true),
		set(t, "timezone_unknown", upsert, "timezone", str("Mars/Olympus_Mons"), true),
		set(t, "timezone_at_max_length", upsert, "timezone", str(strings.Repeat("z", 64)), true),
		set(t, "timezone_too_long", upsert, "timezone", str(strings.Repeat("z", 65)), false),
		set(t, "timezone_empty", upsert, "timezone", str(""), false),
		set(t, "upsert_user_id_empty", upsert, "user_id", str(""), false),

		// schedule.enabled, schedule.disabled, schedule.deleted
		set(t, "enable_schedule_id_empty", enable, "schedule_id", str(""), false),
		set(t, "disable_schedule_id_injection", disable, "schedule_id", str(`s" OR 1=1`), false),
		set(t, "delete_user_id_system", del, "user_id", str("system"), true),
		set(t, "delete_user_id_leading_dash", del, "user_id", str("-u"), false),

		// resource.attached, resource.detached: EC2 instances, RDS DB instances, ECS services
		set(t, "resource_rds", attach, "resource_arn", str(nucleusDB), true),
		set(t, "resource_ecs", attach, "resource_arn", str(nucleusECS), true),
		set(t, "resource_ecs_default_cluster", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:service/web-api"), true),
		set(t, "resource_ec2_short_instance_id", attach, "resource_arn", str("arn:aws:ec2:eu-central-1:123456789012:instance/i-1a2b3c4d"), true),
		set(t, "resource_china", attach, "resource_arn", str("arn:aws-cn:rds:cn-north-1:123456789012:db:a"), true),
		set(t, "resource_gov_cloud", attach, "resource_arn", str("arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/i-1a2b3c4d"), true),
		set(t, "resource_s3", attach, "resource_arn", str("arn:aws:s3:::dev-bucket"), false),
		set(t, "resource_lambda", attach, "resource_arn", str("arn:aws:lambda:eu-central-1:123456789012:function:f"), false),
		set(t, "resource_ec2_volume", attach, "resource_arn", str(nucleusOtherEC2), false),
		set(t, "resource_rds_cluster", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:cluster:orders"), false),
		set(t, "resource_ecs_task", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:task/dev/0123456789abcdef"), false),
		set(t, "resource_ecs_cluster", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:cluster/dev"), false),
		set(t, "resource_ecs_three_names", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:service/a/b/c"), false),
		set(t, "resource_ecs_dot", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:service/dev/web.api"), false),
		set(t, "resource_ecs_name_at_max_length", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:service/dev/"+strings.Repeat("s", 255)), true),
		set(t, "resource_ecs_name_too_long", attach, "resource_arn", str("arn:aws:ecs:eu-central-1:123456789012:service/dev/"+strings.Repeat("s", 256)), false),
		set(t, "resource_rds_identifier_at_max_length", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:d"+strings.Repeat("b", 62)), true),
		set(t, "resource_rds_identifier_too_long", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:d"+strings.Repeat("b", 63)), false),
		set(t, "resource_rds_trailing_hyphen", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:orders-"), false),
		set(t, "resource_rds_double_hyphen", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:orders--db"), false),
		set(t, "resource_rds_digit_first", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:1orders"), false),
		set(t, "resource_ec2_instance_id_9_hex", attach, "resource_arn", str("arn:aws:ec2:eu-central-1:123456789012:instance/i-0123456789"), false),
		set(t, "resource_ec2_instance_id_upper_case", attach, "resource_arn", str("arn:aws:ec2:eu-central-1:123456789012:instance/i-0ABC123DEF4567890"), false),
		set(t, "resource_11_digit_account", attach, "resource_arn", str("arn:aws:ec2:eu-central-1:12345678901:instance/i-1a2b3c4d"), false),
		set(t, "resource_bad_region", attach, "resource_arn", str("arn:aws:ec2:eucentral1:123456789012:instance/i-1a2b3c4d"), false),
		set(t, "resource_empty_region", attach, "resource_arn", str("arn:aws:ec2::123456789012:instance/i-1a2b3c4d"), false),
		set(t, "resource_unknown_partition", attach, "resource_arn", str("arn:aws-xx:ec2:eu-central-1:123456789012:instance/i-1a2b3c4d"), false),
		set(t, "resource_trailing_space", attach, "resource_arn", str(nucleusEC2+" "), false),
		set(t, "resource_key_separator", attach, "resource_arn", str("arn:aws:rds:eu-central-1:123456789012:db:orders#1"), false),
		set(t, "resource_bare_instance_id", attach, "resource_arn", str("i-0abc123def4567890"), false),
		set(t, "resource_empty", attach, "resource_arn", str(""), false),
		set(t, "resource_arn_at_max_length", attach, "resource_arn", str(ecsOfLength(1024)), true),
		set(t, "resource_arn_too_long", attach, "resource_arn", str(ecsOfLength(1025)), false),
		set(t, "attach_schedule_id_empty", attach, "schedule_id", str(""), false),
		set(t, "detach_ecs", detach, "resource_arn", str(nucleusECS), true),
		set(t, "detach_ec2_volume", detach, "resource_arn", str(nucleusOtherEC2), false),
		set(t, "detach_user_id_empty", detach, "user_id", str(""), false),

		// schedule.window-due: sent by transit's own timer
		set(t, "user_id_empty_is_system", due, "user_id", str(""), true),
		set(t, "user_id_upper_case", due, "user_id", str("System"), false),
		set(t, "user_id_a_user", due, "user_id", str("u-1"), false),
		set(t, "user_id_an_actor", due, "user_id", str("user:u-1"), false),
		set(t, "edge_start", due, "edge", str("start"), true),
		set(t, "edge_upper_case", due, "edge", str("Stop"), false),
		set(t, "edge_unknown", due, "edge", str("pause"), false),
		set(t, "edge_empty", due, "edge", str(""), false),
		set(t, "window_at_seconds", due, "window_at", str("2030-01-02T18:00:00Z"), true),
		set(t, "window_at_offset", due, "window_at", str("2030-01-02T19:00:00.000+01:00"), true),
		set(t, "window_at_nanoseconds", due, "window_at", str("2030-01-02T18:00:00.123456789Z"), true),
		set(t, "window_at_leap_day", due, "window_at", str("2028-02-29T18:00:00Z"), true),
		set(t, "window_at_date_only", due, "window_at", str("2030-01-02"), false),
		set(t, "window_at_no_zone", due, "window_at", str("2030-01-02T18:00:00"), false),
		set(t, "window_at_space", due, "window_at", str("2030-01-02 18:00:00Z"), false),
		set(t, "window_at_lower_case_t", due, "window_at", str("2030-01-02t18:00:00Z"), false),
		set(t, "window_at_lower_case_z", due, "window_at", str("2030-01-02T18:00:00z"), false),
		set(t, "window_at_thirtieth_of_february", due, "window_at", str("2030-02-30T18:00:00Z"), false),
		set(t, "window_at_not_a_leap_year", due, "window_at", str("2030-02-29T18:00:00Z"), false),
		set(t, "window_at_leap_second", due, "window_at", str("2030-12-31T23:59:60Z"), false),
		set(t, "window_at_comma_fraction", due, "window_at", str("2030-01-02T18:00:00,5Z"), false),
		set(t, "window_at_offset_of_24_hours", due, "window_at", str("2030-01-02T18:00:00+24:00"), false),
		set(t, "window_at_words", due, "window_at", str("tonight"), false),
		set(t, "window_at_unix_seconds", due, "window_at", "1893607200", false),
		set(t, "window_at_empty", due, "window_at", str(""), false),
		set(t, "due_schedule_id_empty", due, "schedule_id", str(""), false),
	}
}

func TestNucleusSchemas_agree_with_transit(t *testing.T) {
	agreeWithTransit(t, messages.Nucleus, nucleusAgreementCases(t), nucleusGood)
}

// TestNucleusSchemas_known_differences pins where the nucleus schemas and
// transit part: JSON Schema cannot compare role_arn's account with
// account_id, which each schema's description names.
func TestNucleusSchemas_known_differences(t *testing.T) {
	_, compiled := catalogue(t)
	const otherRole = `"arn:aws:iam::210987654321:role/nucleus-scheduler"`
	tests := []struct {
		Name    string
		Type    messages.Type
		Payload string
		GoOK    bool // the schema says the opposite
	}{
		{Name: "register_role_of_another_account", Type: messages.AccountRegister,
			Payload: edit(t, good[messages.AccountRegister], "role_arn", otherRole)},
		{Name: "update_role_of_another_account", Type: messages.AccountUpdate,
			Payload: edit(t, good[messages.AccountUpdate], "role_arn", otherRole)},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, tc.GoOK, goOK, "transit's verdict")
			assert.Equal(t, !tc.GoOK, schemaOK, "the schema's verdict")
		})
	}
	files, err := messages.Schemas()
	require.NoError(t, err)
	for _, f := range files {
		if f.Kind == messages.CommandSchema && (f.Type == messages.AccountRegister || f.Type == messages.AccountUpdate) {
			assert.Contains(t, string(f.JSON), "role_arn is a role of account_id", f.Path)
		}
	}
}

// decodeBare decodes a command of typ as nucleus producers send it: the
// payload alone, base with set applied (a nil value removes the member),
// the type in the message attribute.
func decodeBare(t *testing.T, typ messages.Type, base string, set map[string]any) (messages.Command, error) {
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
	body, err := json.Marshal(payload)
	require.NoError(t, err)
	return messages.Decode(body, messages.Meta{ID: "msg-1", Type: string(typ)})
}

func TestDecode_nucleus_commands_as_producers_send_them(t *testing.T) {
	tests := map[messages.Type]any{
		messages.AccountRegister: &messages.AccountRegisterPayload{AccountID: "123456789012", AccountName: "Development",
			RoleARN: nucleusRole, UserID: "u-1"},
		messages.AccountUpdate: &messages.AccountUpdatePayload{AccountID: "123456789012", AccountName: "Development (eu-central-1)",
			RoleARN: "arn:aws:iam::123456789012:role/ops/nucleus-scheduler-v2", UserID: "u-1"},
		messages.AccountTest: &messages.AccountTestPayload{AccountID: "123456789012", UserID: "u-1"},
		messages.ScheduleUpsert: &messages.ScheduleUpsertPayload{ScheduleID: "sch-dev-nights", ScheduleName: "Dev environment nights",
			StartCron: "0 8 * * 1-5", EndCron: "0 19 * * 1-5", Timezone: "Europe/Berlin", Enabled: new(false), UserID: "u-1"},
		messages.ScheduleEnable:    &messages.ScheduleRefPayload{ScheduleID: "sch-dev-nights", UserID: "u-1"},
		messages.ScheduleDisable:   &messages.ScheduleRefPayload{ScheduleID: "sch-dev-nights", UserID: "u-1"},
		messages.ScheduleDelete:    &messages.ScheduleRefPayload{ScheduleID: "sch-dev-nights", UserID: "u-1"},
		messages.ResourceAttach:    &messages.ResourcePayload{ScheduleID: "sch-dev-nights", ResourceARN: nucleusEC2, UserID: "u-1"},
		messages.ResourceDetach:    &messages.ResourcePayload{ScheduleID: "sch-dev-nights", ResourceARN: nucleusDB, UserID: "u-1"},
		messages.ScheduleWindowDue: &messages.ScheduleWindowPayload{ScheduleID: "sch-dev-nights", Edge: "stop", WindowAt: "2030-01-02T18:00:00.000Z", UserID: "system"},
	}
	assert.Len(t, tests, len(messages.Commands(messages.Nucleus)), "every nucleus command")
	for typ, want := range tests {
		t.Run(string(typ), func(t *testing.T) {
			cmd, err := messages.Decode([]byte(nucleusGood[typ]), messages.Meta{ID: "msg-1", Type: string(typ), CorrelationID: "corr-1"})
			require.NoError(t, err)
			assert.Equal(t, messages.Command{ID: "msg-1", Type: typ, CorrelationID: "corr-1", Payload: want}, cmd)
			domain, ok := messages.DomainOf(typ)
			require.True(t, ok)
			assert.Equal(t, messages.Nucleus, domain)
		})
	}
}

func TestDecode_account_commands_check_their_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Type      messages.Type
		Set       map[string]any
		WantField string
	}{
		{"register_no_account_id", messages.AccountRegister, map[string]any{"account_id": nil}, "account_id"},
		{"register_account_id_11_digits", messages.AccountRegister, map[string]any{"account_id": "12345678901"}, "account_id"},
		{"register_account_id_letters", messages.AccountRegister, map[string]any{"account_id": "12345678901a"}, "account_id"},
		{"register_account_id_number", messages.AccountRegister, map[string]any{"account_id": 123456789012}, "account_id"},
		{"register_no_account_name", messages.AccountRegister, map[string]any{"account_name": nil}, "account_name"},
		{"register_account_name_too_long", messages.AccountRegister, map[string]any{"account_name": strings.Repeat("n", 257)}, "account_name"},
		{"register_no_role_arn", messages.AccountRegister, map[string]any{"role_arn": nil}, "role_arn"},
		{"register_role_arn_of_a_user", messages.AccountRegister, map[string]any{"role_arn": "arn:aws:iam::123456789012:user/ada"}, "role_arn"},
		{"register_role_of_another_account", messages.AccountRegister,
			map[string]any{"role_arn": "arn:aws:iam::210987654321:role/nucleus-scheduler"}, "role_arn"},
		{"register_no_user_id", messages.AccountRegister, map[string]any{"user_id": nil}, "user_id"},
		{"register_unknown_field", messages.AccountRegister, map[string]any{"region": "eu-central-1"}, "region"},
		{"update_account_id_letters", messages.AccountUpdate, map[string]any{"account_id": "abcdefghijkl"}, "account_id"},
		{"update_role_of_another_account", messages.AccountUpdate,
			map[string]any{"role_arn": "arn:aws:iam::210987654321:role/nucleus-scheduler"}, "role_arn"},
		{"update_role_arn_bad", messages.AccountUpdate, map[string]any{"role_arn": "nucleus-scheduler"}, "role_arn"},
		{"update_no_user_id", messages.AccountUpdate, map[string]any{"user_id": ""}, "user_id"},
		{"test_no_account_id", messages.AccountTest, map[string]any{"account_id": nil}, "account_id"},
		{"test_account_id_11_digits", messages.AccountTest, map[string]any{"account_id": "12345678901"}, "account_id"},
		{"test_no_user_id", messages.AccountTest, map[string]any{"user_id": nil}, "user_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeBare(t, tc.Type, nucleusGood[tc.Type], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}

	_, err := decodeBare(t, messages.AccountRegister, nucleusGood[messages.AccountRegister],
		map[string]any{"role_arn": "arn:aws:iam::210987654321:role/nucleus-scheduler"})
	ie := requireInvalid(t, err, "role_arn")
	assert.Contains(t, ie.Reason, "210987654321", "the role's account is named")
}

func TestDecode_account_update_needs_a_name_or_a_role(t *testing.T) {
	for name, set := range map[string]map[string]any{
		"name_only": {"role_arn": nil},
		"role_only": {"account_name": nil},
		"both":      {},
	} {
		t.Run(name, func(t *testing.T) {
			cmd, err := decodeBare(t, messages.AccountUpdate, nucleusGood[messages.AccountUpdate], set)
			require.NoError(t, err)
			p := cmd.Payload.(*messages.AccountUpdatePayload)
			assert.NotEqual(t, [2]string{}, [2]string{p.AccountName, p.RoleARN})
		})
	}
	for name, set := range map[string]map[string]any{
		"absent": {"account_name": nil, "role_arn": nil},
		"empty":  {"account_name": "", "role_arn": ""},
	} {
		t.Run("neither_"+name, func(t *testing.T) {
			_, err := decodeBare(t, messages.AccountUpdate, nucleusGood[messages.AccountUpdate], set)
			ie := requireInvalid(t, err, "account_name")
			assert.Contains(t, ie.Reason, "role_arn")
		})
	}
}

func TestDecode_schedule_upsert_defaults_enabled_to_true(t *testing.T) {
	for name, enabled := range map[string]any{"absent": nil, "null": json.RawMessage("null"), "true": true} {
		t.Run(name, func(t *testing.T) {
			set := map[string]any{"enabled": enabled}
			cmd, err := decodeBare(t, messages.ScheduleUpsert, nucleusGood[messages.ScheduleUpsert], set)
			require.NoError(t, err)
			p := cmd.Payload.(*messages.ScheduleUpsertPayload)
			require.NotNil(t, p.Enabled)
			assert.True(t, *p.Enabled)
		})
	}
	cmd, err := decodeBare(t, messages.ScheduleUpsert, nucleusGood[messages.ScheduleUpsert], nil)
	require.NoError(t, err)
	assert.False(t, *cmd.Payload.(*messages.ScheduleUpsertPayload).Enabled, "false is kept")

	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"enabled_string", map[string]any{"enabled": "true"}, "enabled"},
		{"no_schedule_id", map[string]any{"schedule_id": nil}, "schedule_id"},
		{"schedule_id_key_separator", map[string]any{"schedule_id": "sch#1"}, "schedule_id"},
		{"no_schedule_name", map[string]any{"schedule_name": ""}, "schedule_name"},
		{"no_start_cron", map[string]any{"start_cron": nil}, "start_cron"},
		{"end_cron_too_long", map[string]any{"end_cron": strings.Repeat("*", 129)}, "end_cron"},
		{"no_timezone", map[string]any{"timezone": nil}, "timezone"},
		{"timezone_too_long", map[string]any{"timezone": strings.Repeat("z", 65)}, "timezone"},
		{"no_user_id", map[string]any{"user_id": nil}, "user_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeBare(t, messages.ScheduleUpsert, nucleusGood[messages.ScheduleUpsert], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestDecode_schedule_ref_commands_check_their_fields(t *testing.T) {
	for _, typ := range []messages.Type{messages.ScheduleEnable, messages.ScheduleDisable, messages.ScheduleDelete} {
		t.Run(string(typ), func(t *testing.T) {
			_, err := decodeBare(t, typ, nucleusGood[typ], map[string]any{"schedule_id": nil})
			requireInvalid(t, err, "schedule_id")
			_, err = decodeBare(t, typ, nucleusGood[typ], map[string]any{"schedule_id": "sch dev"})
			requireInvalid(t, err, "schedule_id")
			_, err = decodeBare(t, typ, nucleusGood[typ], map[string]any{"user_id": nil})
			requireInvalid(t, err, "user_id")
		})
	}
}

func TestDecode_schedule_window_due_acts_as_system(t *testing.T) {
	for name, user := range map[string]any{"absent": nil, "empty": "", "system": "system"} {
		t.Run(name, func(t *testing.T) {
			cmd, err := decodeBare(t, messages.ScheduleWindowDue, nucleusGood[messages.ScheduleWindowDue], map[string]any{"user_id": user})
			require.NoError(t, err)
			assert.Equal(t, "system", cmd.Payload.(*messages.ScheduleWindowPayload).UserID)
		})
	}
	for _, user := range []string{"System", "u-1", "user:u-1"} {
		_, err := decodeBare(t, messages.ScheduleWindowDue, nucleusGood[messages.ScheduleWindowDue], map[string]any{"user_id": user})
		requireInvalid(t, err, "user_id")
	}
}

func TestDecode_schedule_window_due_rejects_bad_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_schedule_id", map[string]any{"schedule_id": nil}, "schedule_id"},
		{"no_edge", map[string]any{"edge": nil}, "edge"},
		{"edge_unknown", map[string]any{"edge": "pause"}, "edge"},
		{"no_window_at", map[string]any{"window_at": nil}, "window_at"},
		{"window_at_words", map[string]any{"window_at": "tonight"}, "window_at"},
		{"window_at_date_only", map[string]any{"window_at": "2030-01-02"}, "window_at"},
		{"window_at_no_zone", map[string]any{"window_at": "2030-01-02T18:00:00"}, "window_at"},
		{"window_at_thirtieth_of_february", map[string]any{"window_at": "2030-02-30T18:00:00Z"}, "window_at"},
		{"window_at_comma_fraction", map[string]any{"window_at": "2030-01-02T18:00:00,5Z"}, "window_at"},
		{"window_at_offset_of_24_hours", map[string]any{"window_at": "2030-01-02T18:00:00+24:00"}, "window_at"},
		{"window_at_number", map[string]any{"window_at": 1893607200}, "window_at"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeBare(t, messages.ScheduleWindowDue, nucleusGood[messages.ScheduleWindowDue], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
	// The window is kept as sent: it is compared with the one armed.
	cmd, err := decodeBare(t, messages.ScheduleWindowDue, nucleusGood[messages.ScheduleWindowDue],
		map[string]any{"edge": "start", "window_at": "2030-01-02T08:00:00+01:00"})
	require.NoError(t, err)
	assert.Equal(t, "2030-01-02T08:00:00+01:00", cmd.Payload.(*messages.ScheduleWindowPayload).WindowAt)
}

func TestDecode_resource_commands_take_ec2_rds_and_ecs_only(t *testing.T) {
	for _, typ := range []messages.Type{messages.ResourceAttach, messages.ResourceDetach} {
		t.Run(string(typ), func(t *testing.T) {
			for _, arn := range []string{nucleusEC2, nucleusDB, nucleusECS} {
				cmd, err := decodeBare(t, typ, nucleusGood[typ], map[string]any{"resource_arn": arn})
				require.NoError(t, err, arn)
				assert.Equal(t, arn, cmd.Payload.(*messages.ResourcePayload).ResourceARN)
			}
			for _, arn := range []string{
				"arn:aws:s3:::dev-bucket",
				"arn:aws:lambda:eu-central-1:123456789012:function:f",
				nucleusOtherEC2,
				"arn:aws:rds:eu-central-1:123456789012:cluster:orders",
				"arn:aws:ecs:eu-central-1:123456789012:cluster/dev",
			} {
				_, err := decodeBare(t, typ, nucleusGood[typ], map[string]any{"resource_arn": arn})
				ie := requireInvalid(t, err, "resource_arn")
				assert.Contains(t, ie.Reason, "is not an EC2 instance, RDS DB instance or ECS service ARN", arn)
			}
			for name, set := range map[string]map[string]any{
				"no_resource_arn":  {"resource_arn": nil},
				"instance_id_only": {"resource_arn": "i-0abc123def4567890"},
				"too_long":         {"resource_arn": ecsOfLength(1025)},
				"key_separator":    {"resource_arn": nucleusDB + "#1"},
			} {
				t.Run(name, func(t *testing.T) {
					_, err := decodeBare(t, typ, nucleusGood[typ], set)
					requireInvalid(t, err, "resource_arn")
				})
			}
			_, err := decodeBare(t, typ, nucleusGood[typ], map[string]any{"schedule_id": nil})
			requireInvalid(t, err, "schedule_id")
			_, err = decodeBare(t, typ, nucleusGood[typ], map[string]any{"user_id": nil})
			requireInvalid(t, err, "user_id")
		})
	}
}
