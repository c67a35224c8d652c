package messages_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

const (
	taskKeys  = `"org_id":"org-acme","task_id":"task-42"`
	agentKeys = taskKeys + `,"agent_id":"agent-7","actor":"agent:agent-7"`
	logLines  = `[{"seq":41,"at":"2030-01-02T03:04:05Z","stream":"stdout","line":"ok   web/sessions 0.412s","level":"info"},` +
		`{"seq":42,"at":"2030-01-02T03:04:05.250+01:00","stream":"stderr","line":"warning: 2 deprecated calls","level":"warn"}]`
)

// taskGood are valid task payloads; they join good, so the catalogue's
// agreement tests (every member removed, null, of the wrong type) cover
// the task domain too.
var taskGood = map[messages.Type]string{
	messages.TaskQueue: `{` + taskKeys + `,"project_id":"proj-web","prompt":"Add a migration that indexes sessions by user_id.",` +
		`"title":"Index sessions","priority":70,"model":"claude-sonnet-4-5","desired_agent_id":"agent-7","actor":"user:u-1"}`,
	messages.TaskLease:         `{"org_id":"org-acme","agent_id":"agent-7","capabilities":["interactive","git"],"actor":"agent:agent-7"}`,
	messages.TaskStart:         `{` + agentKeys + `}`,
	messages.TaskProgress:      `{` + agentKeys + `,"message":"running the test suite","lines":` + logLines + `}`,
	messages.TaskAwaitResponse: `{` + agentKeys + `,"question":"Should the migration also drop the legacy sessions table?"}`,
	messages.TaskRespond:       `{` + taskKeys + `,"response":"No, keep it for now.","actor":"user:u-1"}`,
	messages.TaskComplete:      `{` + agentKeys + `,"result":"Added migration 0042; 318 tests pass."}`,
	messages.TaskFail:          `{` + agentKeys + `,"error":"test suite failed: 3 of 318 tests"}`,
	messages.TaskCancel:        `{` + taskKeys + `,"actor":"user:u-1"}`,
	messages.TaskLeaseExpire:   `{` + taskKeys + `,"agent_id":"agent-7","actor":"system"}`,
	messages.AgentHeartbeat: `{"org_id":"org-acme","agent_id":"agent-7","host":"ada-mbp.local","pid":48213,"cwd":"/Users/ada/src/web",` +
		`"version":"1.4.2","capabilities":["interactive"],"can_interactive":true,"current_task_id":"task-42",` +
		`"current_project_id":"proj-web","actor":"agent:agent-7"}`,
	messages.AgentSilence:         `{"org_id":"org-acme","agent_id":"agent-7","last_heartbeat_at":"2030-01-02T03:04:05.000Z","actor":"system"}`,
	messages.NotificationMarkRead: `{"org_id":"org-acme","notification_id":"notif-9","created_at":"2030-01-02T03:04:05.000Z","actor":"user:u-1"}`,
}

func init() {
	for typ, payload := range taskGood {
		good[typ] = payload
	}
}

// logLinesOf returns n valid log lines, seq 0 to n-1.
func logLinesOf(n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"seq":%d,"at":"2030-01-02T03:04:05Z","stream":"stdout","line":"line %d","level":"info"}`, i, i)
	}
	return "[" + strings.Join(lines, ",") + "]"
}

func taskAgreementCases(t *testing.T) []agreementCase {
	var (
		queue     = messages.TaskQueue
		lease     = messages.TaskLease
		start     = messages.TaskStart
		progress  = messages.TaskProgress
		ask       = messages.TaskAwaitResponse
		respond   = messages.TaskRespond
		complete  = messages.TaskComplete
		fail      = messages.TaskFail
		cancel    = messages.TaskCancel
		expired   = messages.TaskLeaseExpire
		heartbeat = messages.AgentHeartbeat
		silent    = messages.AgentSilence
		read      = messages.NotificationMarkRead
	)
	capabilities := func(i int) string { return fmt.Sprintf("cap-%d", i) }
	return []agreementCase{
		// task.queued
		set(t, "priority_zero", queue, "priority", "0", true),
		set(t, "priority_at_max", queue, "priority", "100", true),
		set(t, "priority_too_high", queue, "priority", "101", false),
		set(t, "priority_negative", queue, "priority", "-1", false),
		set(t, "priority_fraction", queue, "priority", "50.5", false),
		set(t, "title_empty_defaults", queue, "title", str(""), true),
		set(t, "title_at_max_length", queue, "title", str(strings.Repeat("t", 256)), true),
		set(t, "title_too_long", queue, "title", str(strings.Repeat("t", 257)), false),
		set(t, "title_control_character", queue, "title", str("Index\tsessions"), false),
		set(t, "prompt_at_max_length", queue, "prompt", str(strings.Repeat("p", 32<<10)), true),
		set(t, "prompt_too_long", queue, "prompt", str(strings.Repeat("p", 32<<10+1)), false),
		set(t, "prompt_empty", queue, "prompt", str(""), false),
		// checkText refuses every control character, the newline too.
		set(t, "prompt_two_lines", queue, "prompt", str("Index sessions.\nThen run the tests."), true),
		set(t, "prompt_unicode", queue, "prompt", str("Übersetze die README ✓"), true),
		set(t, "model_empty", queue, "model", str(""), true),
		set(t, "model_too_long", queue, "model", str(strings.Repeat("m", 129)), false),
		set(t, "desired_agent_id_empty", queue, "desired_agent_id", str(""), true),
		set(t, "desired_agent_id_space", queue, "desired_agent_id", str("agent 7"), false),
		set(t, "desired_agent_id_too_long", queue, "desired_agent_id", str(strings.Repeat("a", 129)), false),
		set(t, "project_id_key_separator", queue, "project_id", str("proj#web"), false),
		set(t, "task_id_empty", queue, "task_id", str(""), false),
		set(t, "queue_actor_agent", queue, "actor", str("agent:agent-7"), true),
		set(t, "queue_actor_empty", queue, "actor", str(""), false),

		// task.lease: the agent actor and capabilities
		set(t, "capabilities_empty", lease, "capabilities", "[]", true),
		set(t, "capabilities_at_max", lease, "capabilities", listOf(32, capabilities), true),
		set(t, "capabilities_too_many", lease, "capabilities", listOf(33, capabilities), false),
		set(t, "capability_empty", lease, "capabilities.1", str(""), false),
		set(t, "capability_null", lease, "capabilities.1", "null", false),
		set(t, "capability_leading_dash", lease, "capabilities.0", str("-git"), false),
		set(t, "capability_space", lease, "capabilities.0", str("run tests"), false),
		set(t, "capability_at_max_length", lease, "capabilities.0", str(strings.Repeat("c", 64)), true),
		set(t, "capability_too_long", lease, "capabilities.0", str(strings.Repeat("c", 65)), false),
		set(t, "capability_punctuation", lease, "capabilities.0", str("lang:go_1.26-x"), true),
		set(t, "lease_actor_empty_defaults", lease, "actor", str(""), true),
		set(t, "lease_actor_user", lease, "actor", str("user:u-1"), false),
		set(t, "lease_actor_system", lease, "actor", str("system"), false),
		set(t, "lease_actor_agent_without_id", lease, "actor", str("agent:"), false),
		set(t, "lease_agent_id_empty", lease, "agent_id", str(""), false),
		set(t, "lease_agent_id_key_separator", lease, "agent_id", str("agent#7"), false),

		// task.started
		set(t, "start_actor_empty_defaults", start, "actor", str(""), true),
		set(t, "start_actor_user", start, "actor", str("user:u-1"), false),
		set(t, "start_task_id_space", start, "task_id", str("task 42"), false),

		// task.progress
		set(t, "lines_empty", progress, "lines", "[]", true),
		set(t, "lines_at_max", progress, "lines", logLinesOf(90), true),
		set(t, "lines_too_many", progress, "lines", logLinesOf(91), false),
		set(t, "lines_null_entry", progress, "lines.0", "null", false),
		set(t, "line_first_seq_zero", progress, "lines.0.seq", "0", true),
		set(t, "line_first_seq_absent_is_zero", progress, "lines.0.seq", "", true),
		set(t, "line_first_seq_null_is_zero", progress, "lines.0.seq", "null", true),
		set(t, "line_seq_negative", progress, "lines.0.seq", "-1", false),
		set(t, "line_seq_max_safe_integer", progress, "lines.1.seq", "9007199254740991", true),
		set(t, "line_seq_beyond_safe_integers", progress, "lines.1.seq", "9007199254740992", false),
		set(t, "line_seq_fraction", progress, "lines.1.seq", "42.5", false),
		set(t, "line_seq_string", progress, "lines.1.seq", str("42"), false),
		set(t, "line_at_missing", progress, "lines.0.at", "", false),
		set(t, "line_at_null", progress, "lines.0.at", "null", false),
		set(t, "line_at_before_1970", progress, "lines.0.at", str("1969-12-31T23:59:59Z"), true),
		set(t, "line_at_date_only", progress, "lines.0.at", str("2030-01-02"), false),
		set(t, "line_at_no_zone", progress, "lines.0.at", str("2030-01-02T03:04:05"), false),
		set(t, "line_at_lower_case_t", progress, "lines.0.at", str("2030-01-02t03:04:05Z"), false),
		set(t, "line_at_leap_second", progress, "lines.0.at", str("2030-12-31T23:59:60Z"), false),
		set(t, "line_at_thirtieth_of_february", progress, "lines.0.at", str("2030-02-30T00:00:00Z"), false),
		set(t, "line_at_unix_seconds", progress, "lines.0.at", "1893553445", false),
		set(t, "line_stream_system", progress, "lines.0.stream", str("system"), true),
		set(t, "line_stream_unknown", progress, "lines.0.stream", str("stdin"), false),
		set(t, "line_stream_missing", progress, "lines.0.stream", "", false),
		set(t, "line_level_error", progress, "lines.0.level", str("error"), true),
		set(t, "line_level_unknown", progress, "lines.0.level", str("fatal"), false),
		set(t, "line_level_empty", progress, "lines.0.level", str(""), false),
		set(t, "line_empty", progress, "lines.0.line", str(""), true),
		set(t, "line_absent_is_empty", progress, "lines.0.line", "", true),
		set(t, "line_null_is_empty", progress, "lines.0.line", "null", true),
		set(t, "line_at_max_length", progress, "lines.0.line", str(strings.Repeat("l", 8<<10)), true),
		set(t, "line_too_long", progress, "lines.0.line", str(strings.Repeat("l", 8<<10+1)), false),
		set(t, "line_tab", progress, "lines.0.line", str("ok\tweb"), true),
		set(t, "line_unknown_member", progress, "lines.0.host", str("ada-mbp"), false),
		set(t, "message_empty", progress, "message", str(""), true),
		set(t, "message_at_max_length", progress, "message", str(strings.Repeat("m", 16<<10)), true),
		set(t, "message_too_long", progress, "message", str(strings.Repeat("m", 16<<10+1)), false),
		set(t, "message_newline", progress, "message", str("running\n"), true),
		set(t, "progress_actor_other_kind", progress, "actor", str("system"), false),

		// task.awaiting-response, task.completed, task.failed
		set(t, "question_empty", ask, "question", str(""), false),
		set(t, "question_at_max_length", ask, "question", str(strings.Repeat("q", 16<<10)), true),
		set(t, "question_too_long", ask, "question", str(strings.Repeat("q", 16<<10+1)), false),
		set(t, "result_empty", complete, "result", str(""), true),
		set(t, "result_too_long", complete, "result", str(strings.Repeat("r", 16<<10+1)), false),
		set(t, "result_control_character", complete, "result", str("done\x00"), false),
		set(t, "error_empty", fail, "error", str(""), false),
		set(t, "error_too_long", fail, "error", str(strings.Repeat("e", 16<<10+1)), false),
		set(t, "fail_agent_id_empty", fail, "agent_id", str(""), false),

		// task.response, task.cancelled
		set(t, "response_empty", respond, "response", str(""), false),
		set(t, "response_at_max_length", respond, "response", str(strings.Repeat("r", 16<<10)), true),
		set(t, "response_actor_agent", respond, "actor", str("agent:agent-7"), true),
		set(t, "response_actor_empty", respond, "actor", str(""), false),
		set(t, "cancel_task_id_injection", cancel, "task_id", str(`t" OR 1=1`), false),
		set(t, "cancel_actor_system", cancel, "actor", str("system"), true),

		// task.lease-expired, agent.silent: the system actor
		set(t, "expired_actor_empty_defaults", expired, "actor", str(""), true),
		set(t, "expired_actor_upper_case", expired, "actor", str("System"), false),
		set(t, "expired_actor_agent", expired, "actor", str("agent:agent-7"), false),
		set(t, "expired_agent_id_empty", expired, "agent_id", str(""), false),
		set(t, "silent_actor_empty_defaults", silent, "actor", str(""), true),
		set(t, "silent_actor_user", silent, "actor", str("user:u-1"), false),
		set(t, "last_heartbeat_at_empty", silent, "last_heartbeat_at", str(""), false),
		set(t, "last_heartbeat_at_at_max_length", silent, "last_heartbeat_at", str(strings.Repeat("9", 64)), true),
		set(t, "last_heartbeat_at_too_long", silent, "last_heartbeat_at", str(strings.Repeat("9", 65)), false),
		set(t, "last_heartbeat_at_control_character", silent, "last_heartbeat_at", str("2030\n"), false),

		// agent.heartbeat
		set(t, "pid_zero", heartbeat, "pid", "0", true),
		set(t, "pid_max", heartbeat, "pid", "2147483647", true),
		set(t, "pid_too_large", heartbeat, "pid", "2147483648", false),
		set(t, "pid_negative", heartbeat, "pid", "-1", false),
		set(t, "pid_fraction", heartbeat, "pid", "1.5", false),
		set(t, "host_empty", heartbeat, "host", str(""), false),
		set(t, "host_too_long", heartbeat, "host", str(strings.Repeat("h", 257)), false),
		set(t, "host_control_character", heartbeat, "host", str("ada\x00"), false),
		set(t, "cwd_empty", heartbeat, "cwd", str(""), true),
		set(t, "cwd_at_max_length", heartbeat, "cwd", str("/"+strings.Repeat("c", 1023)), true),
		set(t, "cwd_too_long", heartbeat, "cwd", str("/"+strings.Repeat("c", 1024)), false),
		set(t, "version_empty", heartbeat, "version", str(""), true),
		set(t, "version_too_long", heartbeat, "version", str(strings.Repeat("v", 129)), false),
		set(t, "can_interactive_false", heartbeat, "can_interactive", "false", true),
		set(t, "can_interactive_number", heartbeat, "can_interactive", "1", false),
		set(t, "current_task_id_empty", heartbeat, "current_task_id", str(""), true),
		set(t, "current_task_id_space", heartbeat, "current_task_id", str("task 42"), false),
		set(t, "current_project_id_key_separator", heartbeat, "current_project_id", str("proj#web"), false),
		set(t, "heartbeat_capabilities_too_many", heartbeat, "capabilities", listOf(33, capabilities), false),
		set(t, "heartbeat_actor_empty_defaults", heartbeat, "actor", str(""), true),
		set(t, "heartbeat_actor_user", heartbeat, "actor", str("user:u-1"), false),

		// notification.read
		set(t, "notification_id_key_separator", read, "notification_id", str("notif#9"), false),
		set(t, "notification_created_at_empty", read, "created_at", str(""), false),
		set(t, "notification_created_at_too_long", read, "created_at", str(strings.Repeat("9", 65)), false),
		set(t, "notification_actor_empty", read, "actor", str(""), false),
	}
}

func TestTaskSchemas_agree_with_transit(t *testing.T) {
	agreeWithTransit(t, messages.Task, taskAgreementCases(t), taskGood)
}

// TestTaskSchemas_known_differences pins where the task schemas and
// transit part: rules JSON Schema cannot state, which each schema's
// description names.
func TestTaskSchemas_known_differences(t *testing.T) {
	_, compiled := catalogue(t)
	tests := []struct {
		Name    string
		Type    messages.Type
		Payload string
	}{
		{Name: "actor_another_agent", Type: messages.TaskStart, Payload: edit(t, good[messages.TaskStart], "actor", str("agent:agent-8"))},
		{Name: "heartbeat_for_another_agent", Type: messages.AgentHeartbeat, Payload: edit(t, good[messages.AgentHeartbeat], "actor", str("agent:agent-8"))},
		{Name: "lines_seq_repeated", Type: messages.TaskProgress, Payload: edit(t, good[messages.TaskProgress], "lines.1.seq", "41")},
		{Name: "lines_seq_decreasing", Type: messages.TaskProgress, Payload: edit(t, good[messages.TaskProgress], "lines.1.seq", "7")},
		{Name: "line_at_zero_time", Type: messages.TaskProgress, Payload: edit(t, good[messages.TaskProgress], "lines.0.at", str("0001-01-01T00:00:00Z"))},
		{Name: "line_at_zero_time_with_an_offset", Type: messages.TaskProgress,
			Payload: edit(t, good[messages.TaskProgress], "lines.0.at", str("0001-01-01T01:00:00+01:00"))},
		{Name: "integer_written_with_a_fraction", Type: messages.TaskQueue, Payload: edit(t, good[messages.TaskQueue], "priority", "70.0")},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			goOK, schemaOK := verdicts(t, compiled, tc.Type, tc.Payload)
			assert.False(t, goOK, "transit's verdict")
			assert.True(t, schemaOK, "the schema's verdict")
		})
	}
}

func TestDecode_task_queue_fills_defaults(t *testing.T) {
	cmd, err := decodeWith(t, messages.TaskQueue, taskGood[messages.TaskQueue], map[string]any{
		"priority": nil, "title": nil, "model": nil, "desired_agent_id": nil,
	})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.TaskQueuePayload)
	require.NotNil(t, p.Priority)
	assert.Equal(t, messages.DefaultPriority, *p.Priority)
	assert.Equal(t, 50, *p.Priority)
	assert.Equal(t, "Add a migration that indexes sessions by user_id.", p.Title, "the title is the prompt's first line")
	assert.Empty(t, p.Model, "the project's default model is the store's to apply")
	assert.Equal(t, messages.Actor("user:u-1"), p.Actor)
}

func TestDecode_task_queue_keeps_what_is_given(t *testing.T) {
	cmd, err := decodeWith(t, messages.TaskQueue, taskGood[messages.TaskQueue], map[string]any{"priority": 0})
	require.NoError(t, err)
	p := cmd.Payload.(*messages.TaskQueuePayload)
	require.NotNil(t, p.Priority)
	assert.Equal(t, 0, *p.Priority, "priority 0 is a priority, not the default")
	assert.Equal(t, "Index sessions", p.Title)
	assert.Equal(t, "claude-sonnet-4-5", p.Model)
	assert.Equal(t, "agent-7", p.DesiredAgentID)
}

func TestDecode_task_queue_cuts_the_title_from_the_prompt(t *testing.T) {
	tests := []struct {
		Name   string
		Prompt string
		Title  string
	}{
		{Name: "short", Prompt: "Fix the flaky test", Title: "Fix the flaky test"},
		{Name: "exactly_80", Prompt: strings.Repeat("a", 80), Title: strings.Repeat("a", 80)},
		{Name: "cut_to_80_characters", Prompt: strings.Repeat("a", 79) + "bcd", Title: strings.Repeat("a", 79) + "b"},
		{Name: "cut_by_characters_not_bytes", Prompt: strings.Repeat("é", 100), Title: strings.Repeat("é", 80)},
		{Name: "first_line", Prompt: "Fix the flaky test\nIt fails one run in ten.", Title: "Fix the flaky test"},
		{Name: "tabs_dropped", Prompt: "Fix\tthe test\r\nsoon", Title: "Fixthe test"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cmd, err := decodeWith(t, messages.TaskQueue, taskGood[messages.TaskQueue], map[string]any{"prompt": tc.Prompt, "title": ""})
			require.NoError(t, err)
			assert.Equal(t, tc.Title, cmd.Payload.(*messages.TaskQueuePayload).Title)
		})
	}
}

func TestDecode_task_queue_rejects_bad_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"no_org_id", map[string]any{"org_id": nil}, "org_id"},
		{"no_task_id", map[string]any{"task_id": ""}, "task_id"},
		{"task_id_expression_name", map[string]any{"task_id": "#state"}, "task_id"},
		{"no_project_id", map[string]any{"project_id": nil}, "project_id"},
		{"no_prompt", map[string]any{"prompt": nil}, "prompt"},
		{"prompt_too_long", map[string]any{"prompt": strings.Repeat("p", 32<<10+1)}, "prompt"},
		{"title_too_long", map[string]any{"title": strings.Repeat("t", 257)}, "title"},
		{"priority_negative", map[string]any{"priority": -1}, "priority"},
		{"priority_over_100", map[string]any{"priority": 101}, "priority"},
		{"priority_fraction", map[string]any{"priority": 2.5}, "priority"},
		{"model_too_long", map[string]any{"model": strings.Repeat("m", 129)}, "model"},
		{"desired_agent_id_bad", map[string]any{"desired_agent_id": "agent 7"}, "desired_agent_id"},
		{"no_actor", map[string]any{"actor": nil}, "actor"},
		{"unknown_field", map[string]any{"deadline": "tomorrow"}, "deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.TaskQueue, taskGood[messages.TaskQueue], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

// agentCommands are the commands an agent sends for itself: the actor
// defaults to agent:<agent_id> and may name no one else.
var agentCommands = []messages.Type{
	messages.TaskLease, messages.TaskStart, messages.TaskProgress, messages.TaskAwaitResponse,
	messages.TaskComplete, messages.TaskFail, messages.AgentHeartbeat,
}

func actorOf(t *testing.T, payload any) messages.Actor {
	t.Helper()
	switch p := payload.(type) {
	case *messages.TaskLeasePayload:
		return p.Actor
	case *messages.TaskAgentPayload:
		return p.Actor
	case *messages.TaskProgressPayload:
		return p.Actor
	case *messages.TaskQuestionPayload:
		return p.Actor
	case *messages.TaskResultPayload:
		return p.Actor
	case *messages.TaskErrorPayload:
		return p.Actor
	case *messages.AgentHeartbeatPayload:
		return p.Actor
	case *messages.TaskLeaseExpiredPayload:
		return p.Actor
	case *messages.AgentSilentPayload:
		return p.Actor
	}
	t.Fatalf("no actor in %T", payload)
	return ""
}

func TestDecode_agent_commands_act_for_their_agent(t *testing.T) {
	for _, typ := range agentCommands {
		t.Run(string(typ), func(t *testing.T) {
			for name, actor := range map[string]any{"absent": nil, "empty": "", "the_agent": "agent:agent-7"} {
				cmd, err := decodeWith(t, typ, taskGood[typ], map[string]any{"actor": actor})
				require.NoError(t, err, name)
				assert.Equal(t, messages.Actor("agent:agent-7"), actorOf(t, cmd.Payload), name)
				assert.Equal(t, "agent-7", actorOf(t, cmd.Payload).Agent(), name)
			}
			for _, actor := range []string{"agent:agent-8", "user:u-1", "system", "agent:"} {
				_, err := decodeWith(t, typ, taskGood[typ], map[string]any{"actor": actor})
				ie := requireInvalid(t, err, "actor")
				assert.Contains(t, ie.Reason, "agent:agent-7", actor)
			}
			_, err := decodeWith(t, typ, taskGood[typ], map[string]any{"agent_id": nil, "actor": nil})
			requireInvalid(t, err, "agent_id")
			_, err = decodeWith(t, typ, taskGood[typ], map[string]any{"agent_id": "agent 7", "actor": "agent:agent 7"})
			requireInvalid(t, err, "agent_id")
		})
	}
}

func TestDecode_timer_sent_task_commands_act_as_system(t *testing.T) {
	for _, typ := range []messages.Type{messages.TaskLeaseExpire, messages.AgentSilence} {
		t.Run(string(typ), func(t *testing.T) {
			for _, actor := range []any{nil, "", "system"} {
				cmd, err := decodeWith(t, typ, taskGood[typ], map[string]any{"actor": actor})
				require.NoError(t, err, actor)
				assert.Equal(t, messages.Actor("system"), actorOf(t, cmd.Payload), actor)
			}
			for _, actor := range []string{"System", "user:u-1", "agent:agent-7"} {
				_, err := decodeWith(t, typ, taskGood[typ], map[string]any{"actor": actor})
				requireInvalid(t, err, "actor")
			}
		})
	}
}

func TestDecode_task_lease_rejects_bad_capabilities(t *testing.T) {
	caps := func(n int) []string {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = fmt.Sprintf("cap-%d", i)
		}
		return cs
	}
	tests := []struct {
		Name      string
		Caps      []string
		WantField string
	}{
		{"too_many", caps(33), "capabilities"},
		{"empty", []string{"git", ""}, "capabilities[1]"},
		{"leading_dash", []string{"-git"}, "capabilities[0]"},
		{"space", []string{"run tests"}, "capabilities[0]"},
		{"too_long", []string{"git", "go", strings.Repeat("c", 65)}, "capabilities[2]"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.TaskLease, taskGood[messages.TaskLease], map[string]any{"capabilities": tc.Caps})
			requireInvalid(t, err, tc.WantField)
		})
	}
	cmd, err := decodeWith(t, messages.TaskLease, taskGood[messages.TaskLease], map[string]any{"capabilities": caps(32)})
	require.NoError(t, err)
	assert.Len(t, cmd.Payload.(*messages.TaskLeasePayload).Capabilities, 32)
}

// progressWith is a task.progress payload with the given lines.
func progressWith(lines ...map[string]any) map[string]any {
	return map[string]any{"lines": lines}
}

func logLine(seq int64) map[string]any {
	return map[string]any{"seq": seq, "at": "2030-01-02T03:04:05.250Z", "stream": "stdout", "line": "ok", "level": "info"}
}

func with(line map[string]any, key string, v any) map[string]any {
	out := map[string]any{}
	for k, old := range line {
		out[k] = old
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

func TestDecode_task_progress_reads_lines(t *testing.T) {
	cmd, err := decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], nil)
	require.NoError(t, err)
	p := cmd.Payload.(*messages.TaskProgressPayload)
	assert.Equal(t, messages.Actor("agent:agent-7"), p.Actor)
	assert.Equal(t, "running the test suite", p.Message)
	require.Len(t, p.Lines, 2)
	assert.Equal(t, messages.LogLine{Seq: 41, At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Stream: "stdout", Line: "ok   web/sessions 0.412s", Level: "info"}, p.Lines[0])
	assert.True(t, p.Lines[1].At.Equal(time.Date(2030, 1, 2, 2, 4, 5, 250e6, time.UTC)), "an offset is kept as the same instant: %v", p.Lines[1].At)

	// A report may carry only a message, or nothing but its keys.
	for name, set := range map[string]map[string]any{"message_only": {"lines": nil}, "nothing": {"lines": nil, "message": nil}} {
		_, err := decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], set)
		require.NoError(t, err, name)
	}

	// The first line may have seq 0, written or not, and an empty line.
	first := with(with(logLine(0), "seq", nil), "line", nil)
	cmd, err = decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], progressWith(first, logLine(1)))
	require.NoError(t, err)
	assert.Equal(t, int64(0), cmd.Payload.(*messages.TaskProgressPayload).Lines[0].Seq)
	assert.Empty(t, cmd.Payload.(*messages.TaskProgressPayload).Lines[0].Line)
}

func TestDecode_task_progress_rejects_bad_lines(t *testing.T) {
	lines := func(n int) []map[string]any {
		ls := make([]map[string]any, n)
		for i := range ls {
			ls[i] = logLine(int64(i))
		}
		return ls
	}
	tests := []struct {
		Name      string
		Lines     []map[string]any
		WantField string
	}{
		{"too_many", lines(91), "lines"},
		{"seq_repeated", []map[string]any{logLine(4), logLine(5), logLine(5)}, "lines[2].seq"},
		{"seq_decreasing", []map[string]any{logLine(4), logLine(3)}, "lines[1].seq"},
		{"seq_missing_after_the_first", []map[string]any{logLine(4), with(logLine(5), "seq", nil)}, "lines[1].seq"},
		{"seq_negative", []map[string]any{logLine(-1)}, "lines[0].seq"},
		{"seq_beyond_safe_integers", []map[string]any{logLine(1 << 53)}, "lines[0].seq"},
		{"at_missing", []map[string]any{logLine(0), with(logLine(1), "at", nil)}, "lines[1].at"},
		{"at_zero_time", []map[string]any{with(logLine(0), "at", "0001-01-01T00:00:00Z")}, "lines[0].at"},
		// time.Time's decoder refuses it before Validate runs.
		{"at_not_a_time", []map[string]any{with(logLine(0), "at", "yesterday")}, "payload"},
		{"stream_unknown", []map[string]any{with(logLine(0), "stream", "stdin")}, "lines[0].stream"},
		{"stream_missing", []map[string]any{with(logLine(0), "stream", nil)}, "lines[0].stream"},
		{"level_unknown", []map[string]any{logLine(0), with(logLine(1), "level", "fatal")}, "lines[1].level"},
		{"line_too_long", []map[string]any{with(logLine(0), "line", strings.Repeat("l", 8<<10+1))}, "lines[0].line"},
		{"line_control_character", []map[string]any{with(logLine(0), "line", "\x1b[31mred")}, "lines[0].line"},
		{"line_unknown_member", []map[string]any{with(logLine(0), "host", "ada-mbp")}, "host"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], progressWith(tc.Lines...))
			requireInvalid(t, err, tc.WantField)
		})
	}

	_, err := decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], map[string]any{"message": strings.Repeat("m", 16<<10+1)})
	requireInvalid(t, err, "message")
	cmd, err := decodeWith(t, messages.TaskProgress, taskGood[messages.TaskProgress], progressWith(lines(90)...))
	require.NoError(t, err)
	assert.Len(t, cmd.Payload.(*messages.TaskProgressPayload).Lines, 90)
}

func TestDecode_task_agent_texts(t *testing.T) {
	tests := []struct {
		Name      string
		Type      messages.Type
		Set       map[string]any
		WantField string // "" when valid
	}{
		{"question_missing", messages.TaskAwaitResponse, map[string]any{"question": nil}, "question"},
		{"question_too_long", messages.TaskAwaitResponse, map[string]any{"question": strings.Repeat("q", 16<<10+1)}, "question"},
		{"question_at_max_length", messages.TaskAwaitResponse, map[string]any{"question": strings.Repeat("q", 16<<10)}, ""},
		{"result_missing", messages.TaskComplete, map[string]any{"result": nil}, ""},
		{"result_empty", messages.TaskComplete, map[string]any{"result": ""}, ""},
		{"result_too_long", messages.TaskComplete, map[string]any{"result": strings.Repeat("r", 16<<10+1)}, "result"},
		{"error_missing", messages.TaskFail, map[string]any{"error": nil}, "error"},
		{"error_control_character", messages.TaskFail, map[string]any{"error": "exit\x00"}, "error"},
		{"start_task_id_missing", messages.TaskStart, map[string]any{"task_id": nil}, "task_id"},
		{"complete_org_id_bad", messages.TaskComplete, map[string]any{"org_id": "org acme"}, "org_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, tc.Type, taskGood[tc.Type], tc.Set)
			if tc.WantField == "" {
				require.NoError(t, err)
				return
			}
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestDecode_user_task_commands_check_their_fields(t *testing.T) {
	tests := []struct {
		Name      string
		Type      messages.Type
		Set       map[string]any
		WantField string
	}{
		{"response_missing", messages.TaskRespond, map[string]any{"response": nil}, "response"},
		{"response_too_long", messages.TaskRespond, map[string]any{"response": strings.Repeat("r", 16<<10+1)}, "response"},
		{"response_no_actor", messages.TaskRespond, map[string]any{"actor": nil}, "actor"},
		{"cancel_no_task_id", messages.TaskCancel, map[string]any{"task_id": nil}, "task_id"},
		{"cancel_actor_bad", messages.TaskCancel, map[string]any{"actor": "user:u#1"}, "actor"},
		{"read_no_notification_id", messages.NotificationMarkRead, map[string]any{"notification_id": ""}, "notification_id"},
		{"read_no_created_at", messages.NotificationMarkRead, map[string]any{"created_at": nil}, "created_at"},
		{"read_created_at_too_long", messages.NotificationMarkRead, map[string]any{"created_at": strings.Repeat("9", 65)}, "created_at"},
		{"read_no_actor", messages.NotificationMarkRead, map[string]any{"actor": ""}, "actor"},
		{"expired_no_agent_id", messages.TaskLeaseExpire, map[string]any{"agent_id": nil}, "agent_id"},
		{"silent_no_last_heartbeat_at", messages.AgentSilence, map[string]any{"last_heartbeat_at": nil}, "last_heartbeat_at"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, tc.Type, taskGood[tc.Type], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestDecode_agent_heartbeat(t *testing.T) {
	// Only the keys and the host are needed.
	cmd, err := messages.Decode(envelope(t, "hb-1", messages.AgentHeartbeat, map[string]any{
		"org_id": "org-acme", "agent_id": "agent-7", "host": "ada-mbp.local",
	}), messages.Meta{})
	require.NoError(t, err)
	assert.Equal(t, &messages.AgentHeartbeatPayload{OrgID: "org-acme", AgentID: "agent-7", Host: "ada-mbp.local", Actor: "agent:agent-7"}, cmd.Payload)

	tests := []struct {
		Name      string
		Set       map[string]any
		WantField string
	}{
		{"pid_negative", map[string]any{"pid": -1}, "pid"},
		{"pid_beyond_int32", map[string]any{"pid": int64(1) << 31}, "pid"},
		{"no_host", map[string]any{"host": nil}, "host"},
		{"host_too_long", map[string]any{"host": strings.Repeat("h", 257)}, "host"},
		{"cwd_too_long", map[string]any{"cwd": "/" + strings.Repeat("c", 1024)}, "cwd"},
		{"version_control_character", map[string]any{"version": "1.4\n"}, "version"},
		{"capability_bad", map[string]any{"capabilities": []string{"git", "a b"}}, "capabilities[1]"},
		{"current_task_id_bad", map[string]any{"current_task_id": "task 42"}, "current_task_id"},
		{"current_project_id_bad", map[string]any{"current_project_id": "proj#web"}, "current_project_id"},
		{"no_org_id", map[string]any{"org_id": nil}, "org_id"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := decodeWith(t, messages.AgentHeartbeat, taskGood[messages.AgentHeartbeat], tc.Set)
			requireInvalid(t, err, tc.WantField)
		})
	}
}

func TestTaskEvents_route_by_org_and_agent(t *testing.T) {
	tests := []struct {
		Name    string
		Payload messages.Routed
		Agent   string
	}{
		{Name: "queued_for_an_agent", Payload: messages.TaskQueuedPayload{OrgID: "org-acme", DesiredAgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "queued_for_any", Payload: messages.TaskQueuedPayload{OrgID: "org-acme"}, Agent: ""},
		{Name: "leased", Payload: messages.TaskLeasedPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "lease_empty", Payload: messages.TaskLeaseEmptyPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "changed", Payload: messages.TaskChangedPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "progressed", Payload: messages.TaskProgressedPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "agent_status", Payload: messages.AgentStatusPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
		{Name: "rejected", Payload: messages.TaskRejectedPayload{OrgID: "org-acme", AgentID: "agent-7"}, Agent: "agent-7"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			assert.Equal(t, map[string]string{messages.OrgAttribute: "org-acme", messages.AgentAttribute: tc.Agent}, tc.Payload.RoutingAttributes())
		})
	}
}
