package messages

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// Task is the agent-task domain: tasks queued for coding agents, their
// leases and lifecycle, the agents' heartbeats and the users'
// notifications (docs/tasks.md).
const Task Domain = "task"

// Task commands.
var (
	TaskQueue            = command[TaskQueuePayload](Task, "task.queued")
	TaskLease            = command[TaskLeasePayload](Task, "task.lease")
	TaskStart            = command[TaskAgentPayload](Task, "task.started")
	TaskProgress         = command[TaskProgressPayload](Task, "task.progress")
	TaskAwaitResponse    = command[TaskQuestionPayload](Task, "task.awaiting-response")
	TaskRespond          = command[TaskResponsePayload](Task, "task.response")
	TaskComplete         = command[TaskResultPayload](Task, "task.completed")
	TaskFail             = command[TaskErrorPayload](Task, "task.failed")
	TaskCancel           = command[TaskCancelPayload](Task, "task.cancelled")
	TaskLeaseExpire      = command[TaskLeaseExpiredPayload](Task, "task.lease-expired")
	AgentHeartbeat       = command[AgentHeartbeatPayload](Task, "agent.heartbeat")
	AgentSilence         = command[AgentSilentPayload](Task, "agent.silent")
	NotificationMarkRead = command[NotificationReadPayload](Task, "notification.read")
)

// Task events. Every one carries the org_id and agent_id message
// attributes (RoutingAttributes), so an agent can subscribe its own queue
// to the topic with a filter policy and see only its own work.
var (
	TaskQueued           = event[TaskQueuedPayload](Task, "task.queued")
	TaskLeased           = event[TaskLeasedPayload](Task, "task.leased")
	TaskLeaseEmpty       = event[TaskLeaseEmptyPayload](Task, "task.lease-empty")
	TaskStarted          = event[TaskChangedPayload](Task, "task.started")
	TaskProgressed       = event[TaskProgressedPayload](Task, "task.progress")
	TaskAwaitingResponse = event[TaskChangedPayload](Task, "task.awaiting-response")
	TaskResponseReceived = event[TaskChangedPayload](Task, "task.response-received")
	TaskCompleted        = event[TaskChangedPayload](Task, "task.completed")
	TaskFailed           = event[TaskChangedPayload](Task, "task.failed")
	TaskCancelled        = event[TaskChangedPayload](Task, "task.cancelled")
	TaskRequeued         = event[TaskChangedPayload](Task, "task.requeued")
	TaskStuck            = event[TaskChangedPayload](Task, "task.stuck")
	AgentStale           = event[AgentStatusPayload](Task, "agent.stale")
	AgentOffline         = event[AgentStatusPayload](Task, "agent.offline")
	// TaskRejected answers any task-domain command refused.
	TaskRejected = event[TaskRejectedPayload](Task, "task.command-rejected")
)

// Task rejection reasons (with not_found, wrong_state, forbidden and
// already_exists).
const (
	// ReasonNotLeaseholder: an agent acting on a task it does not lease.
	ReasonNotLeaseholder = "not_leaseholder"
	// ReasonEnded: a task already completed, failed or cancelled.
	ReasonEnded = "ended"
	// ReasonNotRecipient: a user marking another user's notification.
	ReasonNotRecipient = "not_recipient"
)

// Routing attributes of task events.
const (
	OrgAttribute   = "org_id"
	AgentAttribute = "agent_id"
)

// Routed is a payload whose event carries message attributes besides the
// type, for subscribers' filter policies.
type Routed interface {
	RoutingAttributes() map[string]string
}

// Limits of the task domain.
const (
	maxPrompt = 32 << 10
	maxTitle  = 256
	maxText   = 16 << 10
	maxLine   = 8 << 10
	maxLines  = 90
	// MaxPriority is the most urgent a task may be (0 the least).
	MaxPriority = 100
	// DefaultPriority is a queued task's priority when none is given.
	DefaultPriority = 50
	maxCapability   = 64
	maxCapabilities = 32
)

var (
	streams   = []string{"stdout", "stderr", "system"}
	levels    = []string{"debug", "info", "warn", "error"}
	capabilty = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
)

// TaskQueuePayload queues a task for an org's agents.
type TaskQueuePayload struct {
	OrgID     string `json:"org_id"`
	TaskID    string `json:"task_id"`
	ProjectID string `json:"project_id"`
	Prompt    string `json:"prompt"`
	// Title defaults to the prompt's first line, cut to 80 characters.
	Title string `json:"title,omitempty"`
	// Priority is 0 to 100, higher is more urgent; default 50.
	Priority *int `json:"priority,omitempty"`
	// Model defaults to the project's default model; it must be in the
	// allow-list of the most specific settings scope that has one.
	Model string `json:"model,omitempty"`
	// DesiredAgentID, when set, reserves the task for that agent.
	DesiredAgentID string `json:"desired_agent_id,omitempty"`
	// Actor is the user queueing it (a viewer may not).
	Actor Actor `json:"actor"`
}

func (TaskQueuePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "task_id"))
	entityIDSchema(property(s, "project_id"))
	requiredProseSchema(property(s, "prompt"), maxPrompt)
	textSchema(property(s, "title"), maxTitle)
	nullable(property(s, "title"))
	pr := property(s, "priority")
	integerRange(pr, 0, MaxPriority)
	pr.Default = DefaultPriority
	nullable(pr)
	textSchema(property(s, "model"), maxModel)
	nullable(property(s, "model"))
	optionalEntityIDSchema(property(s, "desired_agent_id"))
	actorSchema(property(s, "actor"))
}

func (p *TaskQueuePayload) Validate() error {
	if p.Priority == nil {
		p.Priority = new(int)
		*p.Priority = DefaultPriority
	}
	if *p.Priority < 0 || *p.Priority > MaxPriority {
		return invalid("priority", "%d, want 0 to %d", *p.Priority, MaxPriority)
	}
	if p.Title == "" {
		p.Title = titleOf(p.Prompt)
	}
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("task_id", p.TaskID), checkEntityID("project_id", p.ProjectID),
		requiredProse("prompt", p.Prompt, maxPrompt), checkText("title", p.Title, maxTitle), checkText("model", p.Model, maxModel),
		checkOptionalEntityID("desired_agent_id", p.DesiredAgentID), checkActor(string(p.Actor)))
}

// titleOf is a prompt's first line, at most 80 characters, control
// characters dropped.
func titleOf(prompt string) string {
	var title []rune
	for _, r := range prompt {
		if r == '\n' || len(title) == 80 {
			break
		}
		if r >= 0x20 && r != 0x7f {
			title = append(title, r)
		}
	}
	return string(title)
}

// agentActor defaults an agent command's actor to the agent and refuses
// any other.
func agentActor(actor *Actor, agentID string) error {
	if err := checkEntityID("agent_id", agentID); err != nil {
		return err
	}
	want := Actor("agent:" + agentID)
	if *actor == "" {
		*actor = want
	}
	if *actor != want {
		return invalid("actor", "%q, want %q: an agent acts for itself", *actor, want)
	}
	return nil
}

// agentActorPattern is the only actor agentActor accepts, agent:<id>, or
// none.
var agentActorPattern = "^(?:agent:" + strings.TrimSuffix(strings.TrimPrefix(entityIDPattern.String(), "^"), "$") + ")?$"

func agentActorSchema(s *jsonschema.Schema) {
	a := property(s, "actor")
	a.Pattern = agentActorPattern
	a.MaxLength = count(len("agent:") + 128)
	a.Description = "actor is the agent itself, agent:<agent_id>, which is also the default."
	nullable(a)
	goOnly(s, "actor, when given, is agent:<agent_id>")
}

// TaskLeasePayload asks for the org's most urgent visible task an agent
// may take.
type TaskLeasePayload struct {
	OrgID   string `json:"org_id"`
	AgentID string `json:"agent_id"`
	// Capabilities are what the agent can do, e.g. interactive.
	Capabilities []string `json:"capabilities,omitempty"`
	Actor        Actor    `json:"actor,omitempty"`
}

func (TaskLeasePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "agent_id"))
	capabilitiesSchema(property(s, "capabilities"))
	agentActorSchema(s)
}

func (p *TaskLeasePayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), agentActor(&p.Actor, p.AgentID), checkCapabilities(p.Capabilities))
}

func capabilitiesSchema(p *jsonschema.Schema) {
	p.MaxItems = count(maxCapabilities)
	patternSchema(p.Items, capabilty, maxCapability)
	nullable(p)
}

func checkCapabilities(cs []string) error {
	if len(cs) > maxCapabilities {
		return invalid("capabilities", "%d, at most %d", len(cs), maxCapabilities)
	}
	for i, c := range cs {
		if !capabilty.MatchString(c) {
			return invalid(fmt.Sprintf("capabilities[%d]", i), "%q is not an identifier", c)
		}
	}
	return nil
}

// TaskAgentPayload is the leasing agent acting on its task: started.
type TaskAgentPayload struct {
	OrgID   string `json:"org_id"`
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Actor   Actor  `json:"actor,omitempty"`
}

func (TaskAgentPayload) JSONSchemaExtend(s *jsonschema.Schema) { taskAgentSchema(s) }

func taskAgentSchema(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "task_id"))
	entityIDSchema(property(s, "agent_id"))
	agentActorSchema(s)
}

func (p *TaskAgentPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("task_id", p.TaskID), agentActor(&p.Actor, p.AgentID))
}

// TaskProgressPayload reports progress: log lines, in the agent's order,
// and an optional message.
type TaskProgressPayload struct {
	TaskAgentPayload
	Message string `json:"message,omitempty"`
	// Lines are the agent's output lines, at most 90 a command, each
	// Seq greater than the one before it.
	Lines []LogLine `json:"lines,omitempty"`
}

// LogLine is one line of an agent's output.
type LogLine struct {
	// Seq is the agent's sequence number of the line within the task:
	// with At it keys the line, so a redelivery rewrites the same item.
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Stream is stdout, stderr or system; Level debug, info, warn or error.
	Stream string `json:"stream"`
	Line   string `json:"line"`
	Level  string `json:"level"`
}

func (TaskProgressPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	taskAgentSchema(s)
	proseSchema(property(s, "message"), maxText)
	nullable(property(s, "message"))
	lines := property(s, "lines")
	lines.MaxItems = count(maxLines)
	nullable(lines)
	goOnly(s, "each line's seq is greater than the one before it",
		"each line's at is not 0001-01-01T00:00:00Z, in any offset (Go's zero time)")
}

func (LogLine) JSONSchemaExtend(s *jsonschema.Schema) {
	// encoding/json reads a missing seq as 0, which the first line may have.
	optional(s, "seq", 0)
	seq := property(s, "seq")
	integerRange(seq, 0, maxSafeInteger)
	nullable(seq)
	property(s, "at").Pattern = dateTimePattern(`[0-9]{4}`)
	enumSchema(property(s, "stream"), streams)
	enumSchema(property(s, "level"), levels)
	// An empty line is a line; a missing one is read as empty.
	optional(s, "line", nil)
	line := property(s, "line")
	proseSchema(line, maxLine)
	nullable(line)
}

func (p *TaskProgressPayload) Validate() error {
	if err := first(p.TaskAgentPayload.Validate(), checkProse("message", p.Message, maxText)); err != nil {
		return err
	}
	if len(p.Lines) > maxLines {
		return invalid("lines", "%d, at most %d per command", len(p.Lines), maxLines)
	}
	for i, l := range p.Lines {
		field := fmt.Sprintf("lines[%d]", i)
		if l.Seq < 0 || l.Seq > maxSafeInteger || (i > 0 && l.Seq <= p.Lines[i-1].Seq) {
			return invalid(field+".seq", "%d: want increasing sequence numbers from 0", l.Seq)
		}
		if l.At.IsZero() {
			return invalid(field+".at", "required")
		}
		if err := first(checkOneOf(field+".stream", l.Stream, streams), checkOneOf(field+".level", l.Level, levels),
			checkProse(field+".line", l.Line, maxLine)); err != nil {
			return err
		}
	}
	return nil
}

// TaskQuestionPayload is the agent asking its user a question; the task
// waits for the answer.
type TaskQuestionPayload struct {
	TaskAgentPayload
	Question string `json:"question"`
}

func (TaskQuestionPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	taskAgentSchema(s)
	requiredProseSchema(property(s, "question"), maxText)
}

func (p *TaskQuestionPayload) Validate() error {
	return first(p.TaskAgentPayload.Validate(), requiredProse("question", p.Question, maxText))
}

// TaskResultPayload is the agent completing its task.
type TaskResultPayload struct {
	TaskAgentPayload
	Result string `json:"result"`
}

func (TaskResultPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	taskAgentSchema(s)
	optional(s, "result", nil)
	result := property(s, "result")
	proseSchema(result, maxText)
	nullable(result)
}

func (p *TaskResultPayload) Validate() error {
	return first(p.TaskAgentPayload.Validate(), checkProse("result", p.Result, maxText))
}

// TaskErrorPayload is the agent failing its task.
type TaskErrorPayload struct {
	TaskAgentPayload
	Error string `json:"error"`
}

func (TaskErrorPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	taskAgentSchema(s)
	requiredProseSchema(property(s, "error"), maxText)
}

func (p *TaskErrorPayload) Validate() error {
	return first(p.TaskAgentPayload.Validate(), requiredProse("error", p.Error, maxText))
}

// TaskResponsePayload is a user answering a task's question.
type TaskResponsePayload struct {
	OrgID    string `json:"org_id"`
	TaskID   string `json:"task_id"`
	Response string `json:"response"`
	Actor    Actor  `json:"actor"`
}

func (TaskResponsePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "task_id"))
	requiredProseSchema(property(s, "response"), maxText)
	actorSchema(property(s, "actor"))
}

func (p *TaskResponsePayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("task_id", p.TaskID),
		requiredProse("response", p.Response, maxText), checkActor(string(p.Actor)))
}

// TaskCancelPayload is a user cancelling a task that has not ended.
type TaskCancelPayload struct {
	OrgID  string `json:"org_id"`
	TaskID string `json:"task_id"`
	Actor  Actor  `json:"actor"`
}

func (TaskCancelPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "task_id"))
	actorSchema(property(s, "actor"))
}

func (p *TaskCancelPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("task_id", p.TaskID), checkActor(string(p.Actor)))
}

// TaskLeaseExpiredPayload is sent by the lease's timer when the lease
// may have run out: unless it was renewed since, the task is requeued
// (or, after its last attempt, ends stuck).
type TaskLeaseExpiredPayload struct {
	OrgID   string `json:"org_id"`
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Actor   Actor  `json:"actor,omitempty"`
}

func (TaskLeaseExpiredPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "task_id"))
	entityIDSchema(property(s, "agent_id"))
	systemActorSchema(s)
}

func (p *TaskLeaseExpiredPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("task_id", p.TaskID),
		checkEntityID("agent_id", p.AgentID), systemActor(&p.Actor))
}

// systemActor defaults a command transit sends itself to the system
// actor, and refuses any other.
func systemActor(actor *Actor) error {
	if *actor == "" {
		*actor = "system"
	}
	if *actor != "system" {
		return invalid("actor", "%q, want system", *actor)
	}
	return nil
}

func systemActorSchema(s *jsonschema.Schema) {
	a := property(s, "actor")
	defaultedEnumSchema(a, []string{"system"}, "system")
	a.Description = "actor is system, the default: transit sends this command to itself."
}

// AgentHeartbeatPayload keeps an agent online; with a current task it
// also renews that task's lease.
type AgentHeartbeatPayload struct {
	OrgID          string   `json:"org_id"`
	AgentID        string   `json:"agent_id"`
	Host           string   `json:"host"`
	PID            int      `json:"pid"`
	Cwd            string   `json:"cwd"`
	Version        string   `json:"version"`
	Capabilities   []string `json:"capabilities,omitempty"`
	CanInteractive bool     `json:"can_interactive"`
	// CurrentTaskID is the task the agent runs, if any; its lease is
	// renewed.
	CurrentTaskID    string `json:"current_task_id,omitempty"`
	CurrentProjectID string `json:"current_project_id,omitempty"`
	Actor            Actor  `json:"actor,omitempty"`
}

func (AgentHeartbeatPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "agent_id"))
	requiredTextSchema(property(s, "host"), maxName)
	// encoding/json reads a missing pid as 0, cwd and version as empty
	// and can_interactive as false; Validate accepts each.
	optional(s, "pid", 0)
	pid := property(s, "pid")
	integerRange(pid, 0, 1<<31-1)
	nullable(pid)
	for _, f := range []string{"cwd", "version"} {
		optional(s, f, nil)
	}
	textSchema(property(s, "cwd"), maxName*4)
	nullable(property(s, "cwd"))
	textSchema(property(s, "version"), maxModel)
	nullable(property(s, "version"))
	optional(s, "can_interactive", false)
	nullable(property(s, "can_interactive"))
	capabilitiesSchema(property(s, "capabilities"))
	optionalEntityIDSchema(property(s, "current_task_id"))
	optionalEntityIDSchema(property(s, "current_project_id"))
	agentActorSchema(s)
}

func (p *AgentHeartbeatPayload) Validate() error {
	if p.PID < 0 || p.PID > 1<<31-1 {
		return invalid("pid", "%d is not a process ID", p.PID)
	}
	return first(checkEntityID("org_id", p.OrgID), agentActor(&p.Actor, p.AgentID), required("host", p.Host, maxName),
		checkText("cwd", p.Cwd, maxName*4), checkText("version", p.Version, maxModel), checkCapabilities(p.Capabilities),
		checkOptionalEntityID("current_task_id", p.CurrentTaskID), checkOptionalEntityID("current_project_id", p.CurrentProjectID))
}

// AgentSilentPayload is sent by an agent's silence timer: unless the
// agent heartbeat since LastHeartbeatAt, it turns stale, and later
// offline.
type AgentSilentPayload struct {
	OrgID           string `json:"org_id"`
	AgentID         string `json:"agent_id"`
	LastHeartbeatAt string `json:"last_heartbeat_at"`
	Actor           Actor  `json:"actor,omitempty"`
}

func (AgentSilentPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "agent_id"))
	requiredTextSchema(property(s, "last_heartbeat_at"), 64)
	systemActorSchema(s)
}

func (p *AgentSilentPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("agent_id", p.AgentID),
		required("last_heartbeat_at", p.LastHeartbeatAt, 64), systemActor(&p.Actor))
}

// NotificationReadPayload marks a notification read, by its recipient.
type NotificationReadPayload struct {
	OrgID          string `json:"org_id"`
	NotificationID string `json:"notification_id"`
	// CreatedAt is the notification's created_at, part of its key.
	CreatedAt string `json:"created_at"`
	Actor     Actor  `json:"actor"`
}

func (NotificationReadPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	entityIDSchema(property(s, "org_id"))
	entityIDSchema(property(s, "notification_id"))
	requiredTextSchema(property(s, "created_at"), 64)
	actorSchema(property(s, "actor"))
}

func (p *NotificationReadPayload) Validate() error {
	return first(checkEntityID("org_id", p.OrgID), checkEntityID("notification_id", p.NotificationID),
		required("created_at", p.CreatedAt, 64), checkActor(string(p.Actor)))
}

// TaskQueuedPayload is a task queued.
type TaskQueuedPayload struct {
	OrgID          string `json:"org_id"`
	TaskID         string `json:"task_id"`
	ProjectID      string `json:"project_id"`
	Title          string `json:"title"`
	Priority       int    `json:"priority"`
	Model          string `json:"model,omitempty"`
	DesiredAgentID string `json:"desired_agent_id,omitempty"`
	CreatedAt      string `json:"created_at"`
}

func (p TaskQueuedPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.DesiredAgentID}
}

// TaskLeasedPayload is a task leased: what the agent needs to run it.
type TaskLeasedPayload struct {
	OrgID          string `json:"org_id"`
	TaskID         string `json:"task_id"`
	AgentID        string `json:"agent_id"`
	ProjectID      string `json:"project_id"`
	Title          string `json:"title"`
	Prompt         string `json:"prompt"`
	Priority       int    `json:"priority"`
	Model          string `json:"model,omitempty"`
	Attempts       int    `json:"attempts"`
	LeaseExpiresAt string `json:"lease_expires_at"`
	CorrelationID  string `json:"correlation_id"`
}

func (p TaskLeasedPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}

// TaskLeaseEmptyPayload is a lease request no task could answer.
type TaskLeaseEmptyPayload struct {
	OrgID   string `json:"org_id"`
	AgentID string `json:"agent_id"`
}

func (p TaskLeaseEmptyPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}

// TaskChangedPayload is a task's state changed: started, awaiting a
// response, answered, completed, failed, cancelled, requeued or stuck.
type TaskChangedPayload struct {
	OrgID  string `json:"org_id"`
	TaskID string `json:"task_id"`
	// AgentID is the agent that leased the task (empty when none did).
	AgentID string `json:"agent_id,omitempty"`
	State   string `json:"state"`
	At      string `json:"at"`
	// By is whose command made the change: the agent, a user, or system
	// for a lease that ran out.
	By Actor `json:"by"`
	// What the change carried, as the state says.
	Question string `json:"question,omitempty"`
	Response string `json:"response,omitempty"`
	Result   string `json:"result,omitempty"`
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
}

func (p TaskChangedPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}

// TaskProgressedPayload is progress recorded: how many log lines, which.
type TaskProgressedPayload struct {
	OrgID    string `json:"org_id"`
	TaskID   string `json:"task_id"`
	AgentID  string `json:"agent_id"`
	Message  string `json:"message,omitempty"`
	Lines    int    `json:"lines"`
	FirstSeq int64  `json:"first_seq,omitempty"`
	LastSeq  int64  `json:"last_seq,omitempty"`
	At       string `json:"at"`
}

func (p TaskProgressedPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}

// AgentStatusPayload is an agent gone quiet: stale, then offline.
type AgentStatusPayload struct {
	OrgID           string `json:"org_id"`
	AgentID         string `json:"agent_id"`
	Status          string `json:"status"`
	LastHeartbeatAt string `json:"last_heartbeat_at"`
}

func (p AgentStatusPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}

// TaskRejectedPayload is a task-domain command refused.
type TaskRejectedPayload struct {
	Command Type   `json:"command"`
	OrgID   string `json:"org_id"`
	TaskID  string `json:"task_id,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
	Actor   Actor  `json:"actor"`
	Reason  string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p TaskRejectedPayload) RejectionReason() string { return p.Reason }

func (p TaskRejectedPayload) RoutingAttributes() map[string]string {
	return map[string]string{OrgAttribute: p.OrgID, AgentAttribute: p.AgentID}
}
