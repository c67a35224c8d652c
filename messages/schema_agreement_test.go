package messages_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

// The published schemas are the producers' contract and Validate is what
// transit runs: these tests hold the two to the same verdict on the same
// payload.

// verdicts returns whether transit (Decode, as a command arrives) and the
// command's schema accept payload.
func verdicts(t *testing.T, compiled map[string]*jsonschema.Schema, typ messages.Type, payload string) (goOK, schemaOK bool) {
	t.Helper()
	body := fmt.Sprintf(`{"id":"cmd-1","type":%q,"schema":%d,"payload":%s}`, typ, messages.Schema, payload)
	_, err := messages.Decode([]byte(body), messages.Meta{})
	if err != nil {
		require.True(t, messages.IsInvalid(err), "a payload is refused as invalid, not %T: %v", err, err)
	}
	doc, derr := jsonschema.UnmarshalJSON(strings.NewReader(payload))
	require.NoError(t, derr, "the case's payload is not JSON: %s", payload)
	sch := compiled[messages.SchemaID(messages.CommandSchema, typ)]
	require.NotNil(t, sch, typ)
	serr := sch.Validate(doc)
	if err != nil || serr != nil {
		t.Logf("transit: %v\nschema: %v", err, serr)
	}
	return err == nil, serr == nil
}

// edit returns payload with the member at path (dot-separated, array
// indices as numbers) set to the JSON value raw, or removed when raw is "".
func edit(t *testing.T, payload, path, raw string) string {
	t.Helper()
	var doc any
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc))
	var value any
	if raw != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&value), raw)
	}
	keys := strings.Split(path, ".")
	parent := doc
	for i, k := range keys {
		last := i == len(keys)-1
		switch p := parent.(type) {
		case map[string]any:
			if last {
				if raw == "" {
					delete(p, k)
				} else {
					p[k] = value
				}
			}
			parent = p[k]
		case []any:
			n, err := strconv.Atoi(k)
			require.NoError(t, err, path)
			if last {
				p[n] = value
			}
			parent = p[n]
		default:
			t.Fatalf("%s: nothing to edit at %q", path, k)
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(doc))
	return strings.TrimSpace(out.String())
}

func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// good are valid payloads the cases start from.
var good = map[messages.Type]string{
	messages.SandboxAllocate:      `{"track_id":"track-42","idempotency_key":"attempt-1"}`,
	messages.SandboxMarkDeletion:  `{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f","track_id":"track-42"}`,
	messages.SandboxExpire:        `{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"}`,
	messages.SandboxCleanup:       `{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"}`,
	messages.SandboxSync:          `{"inventory":[{"external_id":"ext-1","name":"lab 1","lab_duration_hours":4},{"external_id":"ext-2","name":"lab 2","lab_duration_hours":0.5}]}`,
	messages.SandboxReinstate:     `{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"}`,
	messages.SandboxRetire:        `{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"}`,
	messages.LayerPublished:       `{"region":"eu-west-1","package":"requests","version":3,"arn":"arn:aws:lambda:eu-west-1:123456789012:layer:requests:3","requirements_hash":"sha256:9f2c"}`,
	messages.BuildRecorded:        `{"package":"requests","version":3,"requirements":"urllib3==2\n","requirements_hash":"sha256:9f2c"}`,
	messages.LayerDeleteRequested: `{"region":"eu-west-1","package":"requests","version":2}`,
	messages.LayerRemoved:         `{"region":"eu-west-1","package":"requests","version":2,"arn":"arn:aws:lambda:eu-west-1:123456789012:layer:requests:2"}`,
	messages.TimerCreate: `{"timer_id":"order-42:reminder","group_id":"orders","execute_at":"2030-01-02T03:04:05Z",` +
		`"callback":"https://hooks.example.com/due","payload":{"order":42},"callback_timeout":"5s",` +
		`"retry_policy":{"max_attempts":3,"initial_interval":"1s","multiplier":2,"max_interval":"1m","max_total_duration":"1h"}}`,
	messages.TimerDelete: `{"timer_id":"order-42:reminder"}`,
	messages.TimerDue:    `{"shard":3,"timer_id":"order-42:reminder","timer_uuid":"9b2c4e1a-7d3f-4a8b-8c6e-5f1d2a3b4c5d","execute_at":"2030-01-02T03:04:05Z"}`,
}

func inventoryOf(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"external_id":"ext-%d","name":"lab","lab_duration_hours":1}`, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

type agreementCase struct {
	Name    string
	Type    messages.Type
	Payload string
	Valid   bool
}

// set is a case: good payload of typ with path set to raw ("" removes it).
func set(t *testing.T, name string, typ messages.Type, path, raw string, valid bool) agreementCase {
	return agreementCase{Name: name, Type: typ, Payload: edit(t, good[typ], path, raw), Valid: valid}
}

func agreementCases(t *testing.T) []agreementCase {
	var (
		allocate = messages.SandboxAllocate
		mark     = messages.SandboxMarkDeletion
		expire   = messages.SandboxExpire
		cleanup  = messages.SandboxCleanup
		sync     = messages.SandboxSync
		reinst   = messages.SandboxReinstate
		retire   = messages.SandboxRetire
		publish  = messages.LayerPublished
		build    = messages.BuildRecorded
		del      = messages.LayerDeleteRequested
		removed  = messages.LayerRemoved
		create   = messages.TimerCreate
		tdel     = messages.TimerDelete
		due      = messages.TimerDue
	)
	const uuid = "0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"
	return []agreementCase{
		// sandbox.allocate
		set(t, "track_id_injection", allocate, "track_id", str(`x" OR 1=1`), false),
		set(t, "track_id_expression_name", allocate, "track_id", str("#status"), false),
		set(t, "track_id_empty", allocate, "track_id", str(""), false),
		set(t, "track_id_space", allocate, "track_id", str("track 1"), false),
		set(t, "track_id_leading_dash", allocate, "track_id", str("-track"), false),
		set(t, "track_id_non_ascii_letter", allocate, "track_id", str("tråck"), false),
		set(t, "track_id_trailing_newline", allocate, "track_id", str("track-1\n"), false),
		set(t, "track_id_every_punctuation", allocate, "track_id", str("org/team:track-1.v2_x@host"), true),
		set(t, "track_id_at_max_length", allocate, "track_id", str(strings.Repeat("t", 256)), true),
		set(t, "track_id_too_long", allocate, "track_id", str(strings.Repeat("t", 257)), false),
		set(t, "track_id_number", allocate, "track_id", "7", false),
		set(t, "idempotency_key_empty_defaults", allocate, "idempotency_key", str(""), true),
		set(t, "idempotency_key_free_text", allocate, "idempotency_key", str("retry #2 / ok"), true),
		set(t, "idempotency_key_256_two_byte_characters", allocate, "idempotency_key", str(strings.Repeat("é", 256)), true),
		set(t, "idempotency_key_257_characters", allocate, "idempotency_key", str(strings.Repeat("é", 257)), false),
		set(t, "idempotency_key_escape_sequence", allocate, "idempotency_key", str("key\x1b[31m"), false),
		set(t, "idempotency_key_nul", allocate, "idempotency_key", str("key\x00"), false),
		set(t, "idempotency_key_delete_character", allocate, "idempotency_key", str("key\x7f"), false),
		set(t, "idempotency_key_object", allocate, "idempotency_key", `{"k":1}`, false),

		// sandbox.mark-deletion, sandbox.expire, sandbox.cleanup
		set(t, "sandbox_id_upper_case", mark, "sandbox_id", str(strings.ToUpper(uuid)), false),
		set(t, "sandbox_id_braces", mark, "sandbox_id", str("{"+uuid+"}"), false),
		set(t, "sandbox_id_urn", mark, "sandbox_id", str("urn:uuid:"+uuid), false),
		set(t, "sandbox_id_no_dashes", mark, "sandbox_id", str(strings.ReplaceAll(uuid, "-", "")), false),
		set(t, "sandbox_id_truncated", mark, "sandbox_id", str(uuid[:35]), false),
		set(t, "sandbox_id_trailing_space", mark, "sandbox_id", str(uuid+" "), false),
		set(t, "sandbox_id_empty", mark, "sandbox_id", str(""), false),
		set(t, "mark_track_id_injection", mark, "track_id", str(`x" OR 1=1`), false),
		set(t, "expire_sweep_empty_id", expire, "sandbox_id", str(""), true),
		set(t, "expire_sweep_no_id", expire, "sandbox_id", "", true),
		set(t, "expire_upper_case_id", expire, "sandbox_id", str(strings.ToUpper(uuid)), false),
		set(t, "expire_not_a_uuid", expire, "sandbox_id", str("not-a-uuid"), false),
		set(t, "cleanup_sweep_empty_id", cleanup, "sandbox_id", str(""), true),
		set(t, "cleanup_trailing_newline", cleanup, "sandbox_id", str(uuid+"\n"), false),

		// sandbox.sync
		set(t, "inventory_empty", sync, "inventory", "[]", true),
		set(t, "inventory_absent_pulls", sync, "inventory", "", true),
		set(t, "inventory_null_pulls", sync, "inventory", "null", true),
		set(t, "inventory_of_the_old_cap", sync, "inventory", inventoryOf(1000), true),
		set(t, "inventory_beyond_the_old_cap", sync, "inventory", inventoryOf(3000), true),
		set(t, "inventory_object", sync, "inventory", `{"ext-1":{}}`, false),
		set(t, "inventory_null_entry", sync, "inventory.1", "null", false),
		set(t, "external_id_empty", sync, "inventory.1.external_id", str(""), false),
		set(t, "external_id_too_long", sync, "inventory.0.external_id", str(strings.Repeat("e", 257)), false),
		set(t, "external_id_control_character", sync, "inventory.0.external_id", str("ext\x00"), false),
		set(t, "external_id_missing", sync, "inventory.0.external_id", "", false),
		set(t, "name_empty", sync, "inventory.1.name", str(""), false),
		set(t, "name_tab", sync, "inventory.1.name", str("lab\t1"), false),
		set(t, "name_unicode", sync, "inventory.1.name", str("Labor Zürich ✓"), true),
		set(t, "lab_hours_one_second", sync, "inventory.0.lab_duration_hours", "0.0002777777777777778", true),
		set(t, "lab_hours_half_a_second", sync, "inventory.0.lab_duration_hours", "0.0001388888888888889", false),
		set(t, "lab_hours_zero", sync, "inventory.0.lab_duration_hours", "0", false),
		set(t, "lab_hours_negative", sync, "inventory.0.lab_duration_hours", "-1", false),
		set(t, "lab_hours_thirty_days", sync, "inventory.0.lab_duration_hours", "720", true),
		set(t, "lab_hours_over_thirty_days", sync, "inventory.0.lab_duration_hours", "720.5", false),
		set(t, "lab_hours_huge", sync, "inventory.0.lab_duration_hours", "1e400", false),
		set(t, "lab_hours_string", sync, "inventory.0.lab_duration_hours", str("4"), false),
		set(t, "inventory_entry_unknown_member", sync, "inventory.0.region", str("eu"), false),

		// sandbox.reinstate, sandbox.retire
		set(t, "reinstate_sandbox_id_upper_case", reinst, "sandbox_id", str(strings.ToUpper(uuid)), false),
		set(t, "reinstate_sandbox_id_empty", reinst, "sandbox_id", str(""), false),
		set(t, "reinstate_sandbox_id_missing", reinst, "sandbox_id", "", false),
		set(t, "retire_sandbox_id_not_a_uuid", retire, "sandbox_id", str("not-a-uuid"), false),
		set(t, "retire_sandbox_id_empty", retire, "sandbox_id", str(""), false),
		set(t, "retire_sandbox_id_missing", retire, "sandbox_id", "", false),

		// layer.published, build.recorded, layer.delete-requested, layer.removed
		set(t, "region_upper_case", publish, "region", str("EU-west-1"), false),
		set(t, "region_three_parts", publish, "region", str("us-gov-west-1"), true),
		set(t, "region_injection", publish, "region", str("eu-west-1' OR '1'='1"), false),
		set(t, "package_leading_dot", publish, "package", str(".requests"), false),
		set(t, "package_at_max_length", publish, "package", str(strings.Repeat("p", 128)), true),
		set(t, "package_too_long", publish, "package", str(strings.Repeat("p", 129)), false),
		set(t, "version_zero", publish, "version", "0", false),
		set(t, "version_negative", publish, "version", "-1", false),
		set(t, "version_max_safe_integer", publish, "version", "9007199254740991", true),
		set(t, "version_beyond_safe_integers", publish, "version", "9007199254740992", false),
		set(t, "version_beyond_int64", publish, "version", "9223372036854775808", false),
		set(t, "version_string", publish, "version", str("3"), false),
		set(t, "arn_of_a_function", publish, "arn", str("arn:aws:lambda:eu-west-1:123456789012:function:f:3"), false),
		set(t, "arn_china_partition", publish, "arn", str("arn:aws-cn:lambda:cn-north-1:123456789012:layer:requests:3"), true),
		set(t, "requirements_hash_empty", publish, "requirements_hash", str(""), true),
		set(t, "requirements_hash_spaces", publish, "requirements_hash", str("sha 256"), false),
		set(t, "requirements_hash_too_long", publish, "requirements_hash", str(strings.Repeat("h", 129)), false),
		set(t, "build_requirements_empty", build, "requirements", str(""), true),
		set(t, "build_requirements_at_max", build, "requirements", str(strings.Repeat("é", 64*1024)), true),
		set(t, "build_requirements_too_long", build, "requirements", str(strings.Repeat("r", 64*1024+1)), false),
		set(t, "build_requirements_hash_empty", build, "requirements_hash", str(""), false),
		set(t, "build_package_injection", build, "package", str(`requests"; drop`), false),
		set(t, "delete_version_zero", del, "version", "0", false),
		set(t, "delete_region_missing", del, "region", "", false),
		set(t, "removed_arn_empty", removed, "arn", str(""), false),

		// timer.create
		set(t, "timer_id_expression", create, "timer_id", str("a = :b OR #c"), false),
		set(t, "timer_id_too_long", create, "timer_id", str(strings.Repeat("t", 257)), false),
		set(t, "group_id_empty", create, "group_id", str(""), true),
		set(t, "group_id_control_character", create, "group_id", str("g\r\n"), false),
		set(t, "group_id_too_long", create, "group_id", str(strings.Repeat("g", 257)), false),
		set(t, "execute_at_offset_and_fraction", create, "execute_at", str("2030-01-02T03:04:05.123456789+05:30"), true),
		set(t, "execute_at_leap_day", create, "execute_at", str("2028-02-29T00:00:00Z"), true),
		set(t, "execute_at_not_a_leap_year", create, "execute_at", str("2030-02-29T00:00:00Z"), false),
		set(t, "execute_at_thirty_first_of_april", create, "execute_at", str("2030-04-31T00:00:00Z"), false),
		set(t, "execute_at_month_13", create, "execute_at", str("2030-13-01T00:00:00Z"), false),
		set(t, "execute_at_hour_24", create, "execute_at", str("2030-01-01T24:00:00Z"), false),
		set(t, "execute_at_leap_second", create, "execute_at", str("2030-12-31T23:59:60Z"), false),
		set(t, "execute_at_lower_case_t", create, "execute_at", str("2030-01-01t00:00:00Z"), false),
		set(t, "execute_at_no_zone", create, "execute_at", str("2030-01-01T00:00:00"), false),
		set(t, "execute_at_words", create, "execute_at", str("tomorrow"), false),
		set(t, "execute_at_unix_seconds", create, "execute_at", "1893553445", false),
		set(t, "execute_at_zero_time", create, "execute_at", str("0001-01-01T00:00:00Z"), false),
		set(t, "execute_at_before_1970", create, "execute_at", str("1969-12-31T23:59:59Z"), false),
		set(t, "execute_at_1970_written_with_an_offset", create, "execute_at", str("1970-01-01T00:30:00+01:00"), true),
		set(t, "execute_at_past", create, "execute_at", str("2001-01-01T00:00:00Z"), true),
		set(t, "callback_ftp", create, "callback", str("ftp://x/y"), false),
		set(t, "callback_http_without_host", create, "callback", str("http:///path"), false),
		set(t, "callback_local_port", create, "callback", str("http://127.0.0.1:8080/x"), true),
		set(t, "callback_query_and_fragment", create, "callback", str("https://h.example/p/q?a=1&b=%2F#frag/x?"), true),
		set(t, "callback_space", create, "callback", str("https://h.example/a b"), false),
		set(t, "callback_bad_escape", create, "callback", str("https://h.example/%zz"), false),
		set(t, "callback_upper_case_scheme", create, "callback", str("HTTPS://h.example/"), false),
		set(t, "callback_user_info", create, "callback", str("https://user:pw@h.example/"), false),
		set(t, "callback_ipv6", create, "callback", str("http://[::1]:8080/"), false),
		set(t, "callback_non_ascii_path", create, "callback", str("https://h.example/é"), false),
		set(t, "callback_empty_port", create, "callback", str("https://h.example:/"), false),
		set(t, "callback_too_long", create, "callback", str("https://h.example/"+strings.Repeat("a", 2048)), false),
		set(t, "callback_sqs", create, "callback", str("sqs://transit-sandbox-commands"), true),
		set(t, "callback_sns_underscore", create, "callback", str("sns://billing_events"), true),
		set(t, "callback_sqs_path", create, "callback", str("sqs://a/b"), false),
		set(t, "callback_sns_no_name", create, "callback", str("sns://"), false),
		set(t, "callback_sqs_name_too_long", create, "callback", str("sqs://"+strings.Repeat("q", 81)), false),
		set(t, "payload_any_json", create, "payload", `[1,"two",{"three":null}]`, true),
		set(t, "payload_null", create, "payload", "null", true),
		set(t, "callback_timeout_fraction", create, "callback_timeout", str("1.5s"), true),
		set(t, "callback_timeout_leading_dot", create, "callback_timeout", str(".5s"), true),
		set(t, "callback_timeout_micro_sign", create, "callback_timeout", str("250µs"), true),
		set(t, "callback_timeout_plus_sign", create, "callback_timeout", str("+1s"), true),
		set(t, "callback_timeout_zero_is_default", create, "callback_timeout", str("0"), true),
		set(t, "callback_timeout_negative", create, "callback_timeout", str("-1s"), false),
		set(t, "callback_timeout_negative_zero", create, "callback_timeout", str("-0s"), false),
		set(t, "callback_timeout_no_unit", create, "callback_timeout", str("5"), false),
		set(t, "callback_timeout_upper_case_unit", create, "callback_timeout", str("5S"), false),
		set(t, "callback_timeout_empty", create, "callback_timeout", str(""), false),
		set(t, "callback_timeout_number", create, "callback_timeout", "5", false),
		set(t, "retry_policy_null_is_default", create, "retry_policy", "null", true),
		set(t, "retry_policy_empty_is_default", create, "retry_policy", "{}", true),
		set(t, "retry_policy_unknown_member", create, "retry_policy.jitter", "true", false),
		set(t, "max_attempts_zero_is_default", create, "retry_policy.max_attempts", "0", true),
		set(t, "max_attempts_negative", create, "retry_policy.max_attempts", "-1", false),
		set(t, "max_attempts_at_max", create, "retry_policy.max_attempts", "1000", true),
		set(t, "max_attempts_too_many", create, "retry_policy.max_attempts", "1001", false),
		set(t, "max_attempts_fraction", create, "retry_policy.max_attempts", "2.5", false),
		set(t, "multiplier_zero_is_default", create, "retry_policy.multiplier", "0", true),
		set(t, "multiplier_one", create, "retry_policy.multiplier", "1", true),
		set(t, "multiplier_fraction", create, "retry_policy.multiplier", "1.5", true),
		set(t, "multiplier_below_one", create, "retry_policy.multiplier", "0.5", false),
		set(t, "multiplier_negative", create, "retry_policy.multiplier", "-2", false),
		set(t, "multiplier_at_max", create, "retry_policy.multiplier", "100", true),
		set(t, "multiplier_too_large", create, "retry_policy.multiplier", "100.5", false),
		set(t, "initial_interval_negative", create, "retry_policy.initial_interval", str("-1s"), false),
		set(t, "max_total_duration_days_unit", create, "retry_policy.max_total_duration", str("2d"), false),

		// timer.delete, timer.due
		set(t, "delete_timer_id_injection", tdel, "timer_id", str(`x" OR 1=1`), false),
		set(t, "due_shard_zero", due, "shard", "0", true),
		set(t, "due_shard_negative", due, "shard", "-1", false),
		set(t, "due_shard_beyond_safe_integers", due, "shard", "9007199254740992", false),
		set(t, "due_timer_uuid_empty", due, "timer_uuid", str(""), false),
		set(t, "due_timer_uuid_space", due, "timer_uuid", str("9b2c 4e1a"), false),
		set(t, "due_timer_uuid_non_ascii", due, "timer_uuid", str("9b2c-é"), false),
		set(t, "due_timer_uuid_too_long", due, "timer_uuid", str(strings.Repeat("u", messages.MaxIDLength+1)), false),
		set(t, "due_execute_at_zero_time", due, "execute_at", str("0001-01-01T00:00:00Z"), false),
	}
}

// derivedCases are, for every command and every member of its good
// payload, the member removed, set to null and set to the wrong JSON
// type, plus an unknown member. Transit and the schema must agree on
// each; which way depends on the member.
func derivedCases(t *testing.T) []agreementCase {
	var cases []agreementCase
	types := make([]string, 0, len(good))
	for typ := range good {
		types = append(types, string(typ))
	}
	sort.Strings(types)
	for _, name := range types {
		typ := messages.Type(name)
		var members map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(good[typ]), &members))
		cases = append(cases, agreementCase{Name: "unknown_member", Type: typ, Payload: edit(t, good[typ], "zzz", "1")})
		for m, v := range members {
			wrong := "12345"
			switch v[0] {
			case '"':
			case '[', '{':
				wrong = str("x")
			default:
				wrong = str(string(v))
			}
			cases = append(cases,
				agreementCase{Name: "without_" + m, Type: typ, Payload: edit(t, good[typ], m, "")},
				agreementCase{Name: m + "_null", Type: typ, Payload: edit(t, good[typ], m, "null")},
				agreementCase{Name: m + "_wrong_type", Type: typ, Payload: edit(t, good[typ], m, wrong)},
			)
		}
	}
	sort.Slice(cases, func(i, j int) bool {
		return string(cases[i].Type)+cases[i].Name < string(cases[j].Type)+cases[j].Name
	})
	return cases
}

func TestSchemas_agree_with_transit(t *testing.T) {
	_, compiled := catalogue(t)
	for typ, payload := range good {
		goOK, schemaOK := verdicts(t, compiled, typ, payload)
		require.True(t, goOK && schemaOK, "the good %s payload must pass both: transit %v, schema %v", typ, goOK, schemaOK)
	}
	covered := map[messages.Type]bool{}
	for _, tc := range agreementCases(t) {
		covered[tc.Type] = true
		t.Run(string(tc.Type)+"/"+tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, tc.Valid, goOK, "transit's verdict")
			assert.Equal(t, tc.Valid, schemaOK, "the schema's verdict")
		})
	}
	// The org, task and nucleus domains' cases run in org_test.go,
	// task_test.go and nucleus_test.go.
	for _, tc := range append(append(orgAgreementCases(t), taskAgreementCases(t)...), nucleusAgreementCases(t)...) {
		covered[tc.Type] = true
	}
	for _, d := range messages.Domains() {
		for _, typ := range messages.Commands(d) {
			assert.True(t, covered[typ], "%s has no agreement case", typ)
			assert.Contains(t, good, typ, "%s has no good payload", typ)
		}
	}
}

func TestSchemas_agree_with_transit_on_every_member(t *testing.T) {
	_, compiled := catalogue(t)
	for _, tc := range derivedCases(t) {
		t.Run(string(tc.Type)+"/"+tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, goOK, schemaOK, "transit accepts: %v, the schema accepts: %v", goOK, schemaOK)
		})
	}
}

// TestSchemas_known_differences pins where the two part: rules JSON Schema
// cannot state, which each schema's description names, and leniencies of
// Go's decoder the schemas do not advertise. A case that starts agreeing
// belongs in the agreement table, and its note out of the description.
func TestSchemas_known_differences(t *testing.T) {
	_, compiled := catalogue(t)
	tests := []struct {
		Name    string
		Type    messages.Type
		Payload string
		GoOK    bool // the schema says the opposite
	}{
		// Rules only transit checks.
		{Name: "duplicate_external_id", Type: messages.SandboxSync,
			Payload: `{"inventory":[{"external_id":"ext-1","name":"a","lab_duration_hours":1},{"external_id":"ext-1","name":"b","lab_duration_hours":1}]}`},
		{Name: "execute_at_beyond_ten_years", Type: messages.TimerCreate, Payload: edit(t, good[messages.TimerCreate], "execute_at", str("2999-01-01T00:00:00Z"))},
		{Name: "callback_timeout_over_a_minute", Type: messages.TimerCreate, Payload: edit(t, good[messages.TimerCreate], "callback_timeout", str("2m"))},
		{Name: "timer_payload_over_64_kib", Type: messages.TimerCreate, Payload: edit(t, good[messages.TimerCreate], "payload", str(strings.Repeat("x", 64<<10)))},
		{Name: "max_interval_below_initial_interval", Type: messages.TimerCreate,
			Payload: edit(t, good[messages.TimerCreate], "retry_policy", `{"initial_interval":"10m"}`)},
		{Name: "duration_beyond_int64_nanoseconds", Type: messages.TimerCreate,
			Payload: edit(t, good[messages.TimerCreate], "retry_policy.max_total_duration", str("9999999h"))},
		{Name: "integer_written_with_a_fraction", Type: messages.LayerPublished, Payload: edit(t, good[messages.LayerPublished], "version", "3.0")},
		{Name: "integer_written_with_an_exponent", Type: messages.TimerDue, Payload: edit(t, good[messages.TimerDue], "shard", "3e0")},
		// Leniencies of encoding/json and time.Time's parser.
		{Name: "member_name_in_another_case", Type: messages.SandboxAllocate, Payload: `{"TRACK_ID":"track-42"}`, GoOK: true},
		{Name: "execute_at_comma_fraction", Type: messages.TimerCreate, Payload: edit(t, good[messages.TimerCreate], "execute_at", str("2030-01-02T03:04:05,5Z")), GoOK: true},
		{Name: "execute_at_offset_of_24_hours", Type: messages.TimerCreate, Payload: edit(t, good[messages.TimerCreate], "execute_at", str("2030-01-02T03:04:05+24:00")), GoOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, tc.GoOK, goOK, "transit's verdict")
			assert.Equal(t, !tc.GoOK, schemaOK, "the schema's verdict")
		})
	}
}

func TestSchemas_http_callbacks_parse_with_a_host(t *testing.T) {
	// The callback pattern is meant to admit only URLs net/url (and so the
	// HTTP client) takes with a host: every accepted case must parse.
	for _, tc := range agreementCases(t) {
		var p struct {
			Callback string `json:"callback"`
		}
		if tc.Type != messages.TimerCreate || !tc.Valid || json.Unmarshal([]byte(tc.Payload), &p) != nil || !strings.HasPrefix(p.Callback, "http") {
			continue
		}
		u, err := url.Parse(p.Callback)
		require.NoError(t, err, p.Callback)
		assert.NotEmpty(t, u.Host, p.Callback)
	}
}

// agreeWithTransit checks that the schema and Validate give each case of a
// domain the same verdict, and that every command of the domain has a
// case and a good payload.
func agreeWithTransit(t *testing.T, d messages.Domain, cases []agreementCase, good map[messages.Type]string) {
	_, compiled := catalogue(t)
	covered := map[messages.Type]bool{}
	for _, tc := range cases {
		covered[tc.Type] = true
		t.Run(string(tc.Type)+"/"+tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.Equal(t, tc.Valid, goOK, "transit's verdict")
			assert.Equal(t, tc.Valid, schemaOK, "the schema's verdict")
		})
	}
	for _, typ := range messages.Commands(d) {
		assert.True(t, covered[typ], "%s has no agreement case", typ)
		assert.Contains(t, good, typ, "%s has no good payload", typ)
	}
}
