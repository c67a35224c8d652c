package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/transport"
)

// TestRun_asks_gets_the_answer_and_completes: the command's lines are
// reported in order, the question after its own line, the answer reaches
// its stdin, and the task completes with its last stdout line.
func TestRun_asks_gets_the_answer_and_completes(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	f.answer = "postgres"
	a := testAgent(t, `echo "task $TRANSIT_TASK_ID in $TRANSIT_PROJECT_ID: $TRANSIT_TASK_TITLE ($TRANSIT_TASK_MODEL)"
echo "$TRANSIT_TASK_PROMPT" | tail -n 1
echo "?? which db?"
read answer
echo "using $answer"`)
	require.NoError(t, runAgent(t, a, f))

	var texts []string
	for i, l := range f.lines() {
		texts = append(texts, l.Line)
		assert.Equal(t, int64(i+1), l.Seq, "numbered from 1 without a gap")
		assert.Equal(t, "stdout", l.Stream)
		assert.Equal(t, "info", l.Level)
		if i > 0 {
			assert.False(t, l.At.Before(f.lines()[i-1].At), "times never go back")
		}
	}
	assert.Equal(t, []string{"task t-1 in web: Add login (claude-sonnet-4)", "and logout", "?? which db?", "using postgres"}, texts)

	types := f.types()
	require.Equal(t, messages.TaskLease, types[0])
	require.Equal(t, messages.TaskStart, types[1])
	require.Equal(t, messages.TaskComplete, types[len(types)-1])
	asked := indexOf(types, messages.TaskAwaitResponse)
	require.Positive(t, asked)
	// Every line up to the question's was sent before it, the answer's
	// after it.
	var before int
	for _, c := range f.sent()[:indexOfCommand(f.sent(), messages.TaskAwaitResponse)] {
		if p, ok := c.Payload.(*messages.TaskProgressPayload); ok {
			before += len(p.Lines)
		}
	}
	assert.Equal(t, 3, before, "lines sent before the question")
	assert.Equal(t, "which db?", of[messages.TaskQuestionPayload](t, f, messages.TaskAwaitResponse).Question)
	assert.Equal(t, "using postgres", of[messages.TaskResultPayload](t, f, messages.TaskComplete).Result)

	for _, c := range f.sent() {
		assert.Equal(t, messages.Actor("agent:agent-1"), actorOf(c), "%s acts as the agent", c.Type)
		if c.Type != messages.TaskLease && c.Type != messages.AgentHeartbeat {
			assert.Equal(t, "corr-t-1", c.CorrelationID, "%s carries the task's correlation ID", c.Type)
		}
	}
}

// TestRun_failure_reports_the_exit_status_and_last_stderr_line: stderr
// lines are warnings; the error is the status and the last of them.
func TestRun_failure_reports_the_exit_status_and_last_stderr_line(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	a := testAgent(t, `echo starting; echo "warning: slow disk" >&2; sleep 0.1; echo "boom: no such table" >&2; echo; exit 3`)
	require.NoError(t, runAgent(t, a, f), "a failed task is reported, not an error of the agent")

	assert.Equal(t, "exit status 3: boom: no such table", of[messages.TaskErrorPayload](t, f, messages.TaskFail).Error)
	assert.NotContains(t, f.types(), messages.TaskComplete)
	var errLines []string
	for _, l := range f.lines() {
		if l.Stream == "stderr" {
			errLines = append(errLines, l.Line)
			assert.Equal(t, "warn", l.Level)
		}
	}
	assert.Equal(t, []string{"warning: slow disk", "boom: no such table"}, errLines)
}

// TestRun_completes_with_exit_0_when_stdout_says_nothing.
func TestRun_completes_with_exit_0_when_stdout_says_nothing(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	require.NoError(t, runAgent(t, testAgent(t, `echo "   "; echo only here >&2`), f))
	assert.Equal(t, "exit 0", of[messages.TaskResultPayload](t, f, messages.TaskComplete).Result)
}

// TestRun_batches_lines_without_losing_or_reordering_one: a flood of
// lines goes in commands of at most the catalogue's limit, every line
// once, in order; a line after a pause goes within the flush interval.
func TestRun_batches_lines_without_losing_or_reordering_one(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	var sentAt []time.Time
	f.seen = func(c messages.Command) {
		if c.Type == messages.TaskProgress {
			sentAt = append(sentAt, time.Now())
		}
	}
	started := time.Now()
	require.NoError(t, runAgent(t, testAgent(t, `i=1; while [ $i -le 500 ]; do echo "line $i"; i=$((i+1)); done; sleep 1.5; echo "after the pause"; sleep 1.5`), f))

	lines := f.lines()
	require.Len(t, lines, 501)
	for i, l := range lines[:500] {
		assert.Equal(t, int64(i+1), l.Seq)
		assert.Equal(t, fmt.Sprintf("line %d", i+1), l.Line)
	}
	assert.Equal(t, "after the pause", lines[500].Line)
	l, err := progressLimits()
	require.NoError(t, err)
	limit := l.Lines
	for _, c := range f.sent() {
		if p, ok := c.Payload.(*messages.TaskProgressPayload); ok {
			assert.LessOrEqual(t, len(p.Lines), limit)
		}
	}
	// The line after the pause went alone, within the flush interval of
	// being written (1.5s in), long before the command ended (3s in).
	last := sentAt[len(sentAt)-1]
	assert.Less(t, last.Sub(started), 2500*time.Millisecond, "the last line was flushed before the command ended")
}

// TestRun_cancelled_kills_the_process_group_and_reports_nothing_more.
func TestRun_cancelled_kills_the_process_group_and_reports_nothing_more(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("reads /proc")
	}
	f := newFakeTransit(t, task("t-1"))
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	f.seen = func(c messages.Command) {
		if p, ok := c.Payload.(*messages.TaskProgressPayload); ok && len(p.Lines) > 0 {
			// The user cancels once the command has started its child.
			go f.user(messages.TaskCancel, messages.Out{Type: messages.TaskCancelled, At: time.Now(), Payload: messages.TaskChangedPayload{
				OrgID: "acme", TaskID: "t-1", AgentID: "agent-1", State: "CANCELLED", By: "user:u-dev"}})
		}
	}
	start := time.Now()
	require.NoError(t, runAgent(t, testAgent(t, `sleep 60 & echo $! > `+pidFile+`; echo working; wait`), f), "a cancellation is no error")
	assert.Less(t, time.Since(start), 20*time.Second)

	assert.Equal(t, []messages.Type{messages.TaskLease, messages.TaskStart, messages.TaskProgress}, f.types(), "nothing reported after the cancellation")
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie nobody reaped yet: killed either way.
		return err != nil || strings.Contains(string(stat), ") Z ")
	}, 5*time.Second, 50*time.Millisecond, "the command's child is killed with it")
}

// TestRun_rejected_command_stops_the_task: transit refusing a command
// (here: the lease was taken over) stops the command; nothing more is sent.
func TestRun_rejected_command_stops_the_task(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	f.reject = func(c messages.Command) string {
		if c.Type == messages.TaskProgress {
			return messages.ReasonNotLeaseholder
		}
		return ""
	}
	start := time.Now()
	err := runAgent(t, testAgent(t, `echo one; sleep 60`), f)
	var rej *RejectedError
	require.ErrorAs(t, err, &rej, "with --once, the agent's error")
	assert.Equal(t, messages.TaskProgress, rej.Command)
	assert.Equal(t, messages.ReasonNotLeaseholder, rej.Reason)
	assert.Less(t, time.Since(start), 20*time.Second, "the command was killed")
	assert.Equal(t, []messages.Type{messages.TaskLease, messages.TaskStart, messages.TaskProgress}, f.types())
}

// TestRun_a_child_left_holding_stdout_does_not_fail_the_task: the
// shell's status counts; its output is waited for a little, not for ever.
func TestRun_a_child_left_holding_stdout_does_not_fail_the_task(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	start := time.Now()
	require.NoError(t, runAgent(t, testAgent(t, `sleep 5 & echo done`), f))
	assert.Less(t, time.Since(start), 4*time.Second)
	assert.Equal(t, "done", of[messages.TaskResultPayload](t, f, messages.TaskComplete).Result)
}

// TestRun_exit_while_awaiting_an_answer_fails: transit completes only a
// running task, so a command that exits with its question unanswered
// has failed.
func TestRun_exit_while_awaiting_an_answer_fails(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	require.NoError(t, runAgent(t, testAgent(t, `echo "?? shall I?"; sleep 0.3`), f))
	assert.Equal(t, "exit status 0 while awaiting a response to: shall I?", of[messages.TaskErrorPayload](t, f, messages.TaskFail).Error)
}

// TestRun_start_failure_fails_the_task.
func TestRun_start_failure_fails_the_task(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	a := testAgent(t, "true")
	a.cfg.Dir = filepath.Join(t.TempDir(), "gone")
	err := runAgent(t, a, f)
	require.Error(t, err)
	assert.Contains(t, of[messages.TaskErrorPayload](t, f, messages.TaskFail).Error, "gone")
}

// TestRun_once_with_nothing_to_lease_returns_at_once, after a heartbeat
// that names no task.
func TestRun_once_with_nothing_to_lease_returns_at_once(t *testing.T) {
	f := newFakeTransit(t)
	require.NoError(t, runAgent(t, testAgent(t, "true"), f))
	assert.Equal(t, []messages.Type{messages.TaskLease}, f.types())
	hb := f.sent()[0].Payload.(*messages.AgentHeartbeatPayload)
	assert.Empty(t, hb.CurrentTaskID)
	assert.True(t, hb.CanInteractive)
	assert.Equal(t, os.Getpid(), hb.PID)
}

// TestRun_heartbeats_name_the_running_task, which renews its lease.
func TestRun_heartbeats_name_the_running_task(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	require.NoError(t, runAgent(t, testAgent(t, "sleep 0.5", func(c *Config) {
		c.Heartbeat, c.Capabilities = 50*time.Millisecond, []string{"interactive", "go"}
	}), f))
	var current []string
	for _, c := range f.sent() {
		if hb, ok := c.Payload.(*messages.AgentHeartbeatPayload); ok {
			current = append(current, hb.CurrentTaskID)
			assert.Equal(t, []string{"interactive", "go"}, hb.Capabilities)
			if hb.CurrentTaskID != "" {
				assert.Equal(t, "web", hb.CurrentProjectID)
			}
		}
	}
	assert.Contains(t, current, "t-1")
	assert.Equal(t, "", current[0], "the first heartbeat comes before the lease")
}

// TestRun_lost_event_is_asked_for_again_with_the_same_ID: the command is
// sent again as it was, so transit applies it once and answers again;
// duplicate events are taken once.
func TestRun_lost_event_is_asked_for_again_with_the_same_ID(t *testing.T) {
	f := newFakeTransit(t, task("t-1"))
	var leases atomic.Int32
	f.drop = func(c messages.Command) bool { return c.Type == messages.TaskLease && leases.Add(1) == 1 }
	f.seen = func(c messages.Command) {
		if c.Type == messages.TaskStart {
			// Delivered twice, as SNS and SQS may.
			f.publish(c, messages.Out{Type: messages.TaskStarted, At: time.Now(), Payload: messages.TaskChangedPayload{OrgID: "acme", TaskID: "t-1", AgentID: "agent-1"}})
		}
	}
	ag := testAgent(t, "echo done")
	ag.resend = 300 * time.Millisecond
	require.NoError(t, runAgent(t, ag, f))
	var ids []string
	for _, c := range f.sent() {
		if c.Type == messages.TaskLease {
			ids = append(ids, c.ID)
		}
	}
	require.Len(t, ids, 2)
	assert.Equal(t, ids[0], ids[1], "sent again with the same ID")
	assert.Equal(t, "done", of[messages.TaskResultPayload](t, f, messages.TaskComplete).Result)
}

// TestRun_without_an_answer_times_out.
func TestRun_without_an_answer_times_out(t *testing.T) {
	f := newFakeTransit(t)
	f.drop = func(messages.Command) bool { return true }
	ag := testAgent(t, "true", func(c *Config) { c.Timeout = 500 * time.Millisecond })
	ag.resend = 200 * time.Millisecond
	err := runAgent(t, ag, f)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no event within 500ms")
	assert.GreaterOrEqual(t, len(f.types()), 2, "sent again meanwhile")
}

// TestNew_refuses_what_transit_would: IDs, capabilities, no command.
func TestNew_refuses_what_transit_would(t *testing.T) {
	for name, cfg := range map[string]Config{
		"org":          {OrgID: "no spaces", AgentID: "a", Exec: "true"},
		"agent":        {OrgID: "acme", AgentID: "", Exec: "true"},
		"capabilities": {OrgID: "acme", AgentID: "a", Exec: "true", Capabilities: []string{"has space"}},
		"exec":         {OrgID: "acme", AgentID: "a"},
		"dir":          {OrgID: "acme", AgentID: "a", Exec: "true", Dir: "/no/such/dir"},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
	}
}

// TestLimits_are_transits: the limits read from the catalogue are the
// ones task.progress is checked against.
func TestLimits_are_transits(t *testing.T) {
	l, err := progressLimits()
	require.NoError(t, err)
	line := messages.LogLine{At: time.Now(), Stream: "stdout", Level: "info", Line: strings.Repeat("é", l.LineLength)}
	progress := func(n int, line messages.LogLine) error {
		p := messages.TaskProgressPayload{TaskAgentPayload: messages.TaskAgentPayload{OrgID: "acme", TaskID: "t", AgentID: "a"}}
		for i := range n {
			line.Seq = int64(i)
			p.Lines = append(p.Lines, line)
		}
		return p.Validate()
	}
	assert.NoError(t, progress(l.Lines, line))
	assert.Error(t, progress(l.Lines+1, line))
	line.Line += "x"
	assert.Error(t, progress(1, line))
}

// TestOutput_lines_are_acceptable: control characters, escape
// sequences, long lines, a line without an end, questions only at the
// start of a stdout line.
func TestOutput_lines_are_acceptable(t *testing.T) {
	o := newOutput(limits{Lines: 90, LineLength: 16}, time.Now)
	w := o.writer(stdout)
	fmt.Fprint(w, "\x1b[32mgreen\x1b[0m and\x07 bell\r\n")
	fmt.Fprint(w, "0123456789abcdefghijklmnopqrstuvwxyzé\n")
	fmt.Fprint(w, "?? why? ")
	fmt.Fprint(w, "\n")
	fmt.Fprint(w, "no end")
	require.NoError(t, w.Close())
	o.writer(stderr).Write([]byte("?? not asked\n"))
	var texts []string
	for _, l := range o.take() {
		texts = append(texts, l.Line)
		p := messages.TaskProgressPayload{TaskAgentPayload: messages.TaskAgentPayload{OrgID: "o", TaskID: "t", AgentID: "a"}, Lines: []messages.LogLine{l}}
		assert.NoError(t, p.Validate(), "%q", l.Line)
	}
	assert.Equal(t, []string{"green and\ufffd bell"}, texts[:1])
	assert.Equal(t, []string{"0123456789abcdef", "ghijklmnopqrstuv", "wxyzé", "?? why? "}, texts[1:], "cut, the question's batch ends at its line")
	q, asked, ok := o.question()
	require.True(t, ok)
	assert.True(t, asked, "its line is taken")
	assert.Equal(t, "why?", q.text)
	o.asked()
	rest := o.take()
	require.Len(t, rest, 2)
	assert.Equal(t, "no end", rest[0].Line)
	assert.Equal(t, "?? not asked", rest[1].Line)
	_, _, ok = o.question()
	assert.False(t, ok, "stderr asks nothing")
}

func TestQueueName(t *testing.T) {
	stack := transport.Stack{Prefix: "transit"}
	assert.Equal(t, "transit-agent-acme-agent-1", QueueName(stack, "acme", "agent-1"))
	dotted := QueueName(stack, "acme.io", "laptop:7")
	assert.Regexp(t, `^transit-agent-acme_io-laptop_7-[0-9a-f]{12}$`, dotted)
	assert.NotEqual(t, dotted, QueueName(stack, "acme_io", "laptop_7"), "no two agents share a queue")
	long := QueueName(stack, strings.Repeat("o", 128), strings.Repeat("a", 128))
	assert.Len(t, long, 80)
	assert.Regexp(t, `^[A-Za-z0-9_-]+$`, long)
	assert.NotEqual(t, long, QueueName(stack, strings.Repeat("o", 128), strings.Repeat("a", 127)))
}

func indexOf(types []messages.Type, t messages.Type) int {
	for i, x := range types {
		if x == t {
			return i
		}
	}
	return -1
}

func indexOfCommand(cmds []messages.Command, t messages.Type) int {
	for i, c := range cmds {
		if c.Type == t {
			return i
		}
	}
	return -1
}

func actorOf(c messages.Command) messages.Actor {
	switch p := c.Payload.(type) {
	case *messages.TaskLeasePayload:
		return p.Actor
	case *messages.AgentHeartbeatPayload:
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
	}
	return ""
}
