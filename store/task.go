package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
	"transit/messages"
)

// Items of the task domain's tables (docs/tasks.md).

// Task is a task for a coding agent.
type Task struct {
	// PK is ORG#<orgId>, SK TASK#<taskId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is TASK#<taskId>.
	SK string `dynamodbav:"SK" json:"-"`
	// TaskID is the task's ID, unique within its org.
	TaskID string `dynamodbav:"taskId" json:"task_id"`
	// OrgID is the org the task belongs to.
	OrgID string `dynamodbav:"orgId" json:"org_id"`
	// ProjectID is the project the task works on.
	ProjectID string `dynamodbav:"projectId" json:"project_id"`
	// AgentID is the agent leasing the task; absent while it is queued.
	AgentID string `dynamodbav:"agentId,omitempty" json:"agent_id,omitempty"`
	// State is QUEUED, LEASED, RUNNING, AWAITING_RESPONSE, COMPLETED,
	// ERROR or CANCELLED.
	State string `dynamodbav:"state" json:"state"`
	// Title is the command's title, else the prompt's first line.
	Title string `dynamodbav:"title" json:"title"`
	// Prompt is what the agent is asked to do.
	Prompt string `dynamodbav:"prompt" json:"prompt"`
	// Priority is 0 to 100, higher is more urgent.
	Priority int `dynamodbav:"priority" json:"priority"`
	// CreatedAt is when the task was queued.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
	// UpdatedAt is when the task last changed.
	UpdatedAt string `dynamodbav:"updatedAt" json:"updated_at"`
	// StartedAt is when its agent started it.
	StartedAt string `dynamodbav:"startedAt,omitempty" json:"started_at,omitempty"`
	// EndedAt is when it completed, failed or was cancelled.
	EndedAt string `dynamodbav:"endedAt,omitempty" json:"ended_at,omitempty"`
	// Result is what the agent reported on completing it.
	Result string `dynamodbav:"result,omitempty" json:"result,omitempty"`
	// Error is why it failed: the agent's error, or the lease that ran out for the last time.
	Error string `dynamodbav:"error,omitempty" json:"error,omitempty"`
	// ClarificationQuestion is the agent's question while the task is
	// AWAITING_RESPONSE; ResponseText the user's last answer.
	ClarificationQuestion string `dynamodbav:"clarificationQuestion,omitempty" json:"clarification_question,omitempty"`
	// ResponseText is the user's last answer to the agent's question.
	ResponseText string `dynamodbav:"responseText,omitempty" json:"response_text,omitempty"`
	// CorrelationID is the task.queued command's, carried by every
	// TaskEvent and log line of the task.
	CorrelationID string `dynamodbav:"correlationId" json:"correlation_id"`
	// Model is the model the task runs with (the command's, else the
	// project's or the settings' default).
	Model string `dynamodbav:"model,omitempty" json:"model,omitempty"`
	// DesiredAgentID reserves the task for one agent.
	DesiredAgentID string `dynamodbav:"desiredAgentId,omitempty" json:"desired_agent_id,omitempty"`
	// CreatedBy is the user who queued the task; its notifications go to
	// that user.
	CreatedBy string `dynamodbav:"createdBy,omitempty" json:"created_by,omitempty"`
	// EventSeq is the number of the task's last TaskEvent: every
	// transition appends its events after it, and pins it.
	EventSeq int64 `dynamodbav:"eventSeq" json:"event_seq"`
	// Attempts is the number of the task's last lease, kept when it is
	// requeued.
	Attempts int `dynamodbav:"attempts,omitempty" json:"attempts,omitempty"`
}

// TaskClaim holds a task ID for one org, in the Tasks table: the task's
// events and log lines are keyed by its ID alone.
type TaskClaim struct {
	// PK is TASKID#<taskId>. The claim has none of the tasks' index
	// attributes, so it stays out of every index.
	PK string `dynamodbav:"PK"`
	// SK is CLAIM.
	SK string `dynamodbav:"SK"`
	// OrgID is the org whose task the ID names.
	OrgID string `dynamodbav:"orgId"`
}

// QueueItem is a task's place in its org's queue, from queued until the
// task ends.
type QueueItem struct {
	// PK is ORG#<orgId>, SK QUEUE#<createdAt>#<taskId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is QUEUE#<createdAt>#<taskId>.
	SK string `dynamodbav:"SK" json:"-"`
	// TaskID is the task waiting or leased.
	TaskID string `dynamodbav:"taskId" json:"task_id"`
	// ProjectID is the task's project.
	ProjectID string `dynamodbav:"projectId" json:"project_id"`
	// DesiredAgentID, when set, is the only agent that may lease it.
	DesiredAgentID string `dynamodbav:"desiredAgentId,omitempty" json:"desired_agent_id,omitempty"`
	// LeaseOwner is the agent holding the lease, until LeaseExpiresAt.
	LeaseOwner string `dynamodbav:"leaseOwner,omitempty" json:"lease_owner,omitempty"`
	// LeaseExpiresAt is when the current lease runs out unless a heartbeat renews it.
	LeaseExpiresAt string `dynamodbav:"leaseExpiresAt,omitempty" json:"lease_expires_at,omitempty"`
	// Attempts counts the task's leases.
	Attempts int `dynamodbav:"attempts" json:"attempts"`
	// NextVisibleAt is when the item may be leased again.
	NextVisibleAt string `dynamodbav:"nextVisibleAt" json:"next_visible_at"`
	// Priority is the task's, 0 to 100.
	Priority int `dynamodbav:"priority" json:"priority"`
	// ReadyKey, present only while the item waits for a lease, is the
	// ready-index sort key: 100 - priority (three digits), createdAt and
	// taskId, so the index lists the most urgent first, then the oldest.
	ReadyKey string `dynamodbav:"readyKey,omitempty" json:"-"`
}

// TaskEvent is one entry of a task's history.
type TaskEvent struct {
	// PK is TASK#<taskId>, SK EVT#<createdAt>#<seq>: seq is the task's
	// eventSeq, six digits, so a task's events sort in the order made.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is EVT#<createdAt>#<seq>.
	SK string `dynamodbav:"SK" json:"-"`
	// Type is CREATED, QUEUED, LEASED, STARTED, PROGRESS, LOG_BATCH,
	// AWAITING_RESPONSE, RESPONSE_RECEIVED, COMPLETED, ERROR, CANCELLED,
	// RETRIED or REQUEUED.
	Type string `dynamodbav:"type" json:"type"`
	// Message describes the entry for people.
	Message string `dynamodbav:"message" json:"message"`
	// Level is info, warn or error.
	Level string `dynamodbav:"level" json:"level"`
	// Payload holds the entry's details, strings by name.
	Payload map[string]string `dynamodbav:"payload,omitempty" json:"payload,omitempty"`
	// Actor is user:<id>, agent:<id> or system.
	Actor string `dynamodbav:"actor" json:"actor"`
	// CorrelationID is the task's (its task.queued command's).
	CorrelationID string `dynamodbav:"correlationId" json:"correlation_id"`
	// CreatedAt is when the transition that appended it happened.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
}

// LogEntry is one line of an agent's output for a task.
type LogEntry struct {
	// PK is TASK#<taskId>, SK LOG#<the line's time>#<the agent's seq,
	// twelve digits>: a redelivered batch rewrites the same items.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is LOG#<at>#<seq>.
	SK string `dynamodbav:"SK" json:"-"`
	// Stream is stdout, stderr or system; Level debug, info, warn or error.
	Stream string `dynamodbav:"stream" json:"stream"`
	// Line is the output line.
	Line string `dynamodbav:"line" json:"line"`
	// Level is debug, info, warn or error.
	Level string `dynamodbav:"level" json:"level"`
	// CorrelationID is the task's (its task.queued command's).
	CorrelationID string `dynamodbav:"correlationId" json:"correlation_id"`
	// CreatedAt is the line's time as the agent reported it.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
}

// Agent is a coding agent on a developer's machine, as its last heartbeat
// said.
type Agent struct {
	// PK is ORG#<orgId>, SK AGENT#<agentId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is AGENT#<agentId>.
	SK string `dynamodbav:"SK" json:"-"`
	// AgentID is the agent's ID.
	AgentID string `dynamodbav:"agentId" json:"agent_id"`
	// OrgID is the org the agent works for.
	OrgID string `dynamodbav:"orgId" json:"org_id"`
	// Host is the machine the agent runs on.
	Host string `dynamodbav:"host" json:"host"`
	// PID is the agent's process ID there.
	PID int `dynamodbav:"pid" json:"pid"`
	// Cwd is the agent's working directory.
	Cwd string `dynamodbav:"cwd" json:"cwd"`
	// Status is online, stale or offline.
	Status string `dynamodbav:"status" json:"status"`
	// LastHeartbeatAt is when its last heartbeat was recorded.
	LastHeartbeatAt string `dynamodbav:"lastHeartbeatAt" json:"last_heartbeat_at"`
	// CurrentProjectID is the project of the task it runs, if any.
	CurrentProjectID string `dynamodbav:"currentProjectId,omitempty" json:"current_project_id,omitempty"`
	// CurrentTaskID is the task it runs, if any.
	CurrentTaskID string `dynamodbav:"currentTaskId,omitempty" json:"current_task_id,omitempty"`
	// Version is the agent's software version.
	Version string `dynamodbav:"version" json:"version"`
	// Capabilities are what the agent says it can do.
	Capabilities []string `dynamodbav:"capabilities" json:"capabilities"`
	// CanInteractive says whether the agent can ask its user questions.
	CanInteractive bool `dynamodbav:"canInteractive" json:"can_interactive"`
	// TTL removes the item an hour after the last heartbeat (Unix
	// seconds).
	TTL int64 `dynamodbav:"ttl" json:"ttl"`
}

// Notification tells a user (or, with no UserID, everyone in the org)
// what needs their attention.
type Notification struct {
	// PK is ORG#<orgId>, SK NOTIF#<createdAt>#<notificationId>.
	PK string `dynamodbav:"PK" json:"-"`
	// SK is NOTIF#<createdAt>#<notificationId>.
	SK string `dynamodbav:"SK" json:"-"`
	// NotificationID is a UUIDv5 of the command that sent it.
	NotificationID string `dynamodbav:"notificationId" json:"notification_id"`
	// UserID is the recipient; absent for one sent to the whole org.
	UserID string `dynamodbav:"userId,omitempty" json:"user_id,omitempty"`
	// Type is TASK_AWAITING_RESPONSE, TASK_ERROR, TASK_COMPLETED,
	// AGENT_OFFLINE or QUEUE_STUCK.
	Type string `dynamodbav:"type" json:"type"`
	// Title is the notification's headline.
	Title string `dynamodbav:"title" json:"title"`
	// Message is its text.
	Message string `dynamodbav:"message" json:"message"`
	// Severity is info, warning or error.
	Severity string `dynamodbav:"severity" json:"severity"`
	// TaskID is the task it is about, if any.
	TaskID string `dynamodbav:"taskId,omitempty" json:"task_id,omitempty"`
	// ProjectID is that task's project.
	ProjectID string `dynamodbav:"projectId,omitempty" json:"project_id,omitempty"`
	// AgentID is the agent it is about, if any.
	AgentID string `dynamodbav:"agentId,omitempty" json:"agent_id,omitempty"`
	// Read says whether its recipient marked it read.
	Read bool `dynamodbav:"read" json:"read"`
	// CreatedAt is when it was sent.
	CreatedAt string `dynamodbav:"createdAt" json:"created_at"`
	// TTL removes the item seven days after it was sent (Unix seconds).
	TTL int64 `dynamodbav:"ttl" json:"ttl"`
}

// sent is the write of a notification a transition sends with it: the
// notification machine's send, its ID derived from the command, so a
// notification is sent once.
func (s *Store) sent(n Notification) (joined, error) {
	row, err := rawItem(n)
	if err != nil {
		return joined{}, err
	}
	st := step[machine.TaskInput]{m: machine.Notification, t: machine.Notification.Transition(machine.NotificationSend),
		table: s.notifications, key: machine.Item{"PK": row["PK"], "SK": row["SK"]}, in: machine.TaskInput{Row: row}}
	j, _, err := join(st, nil)
	return j, err
}

// NotificationRetention is how long a notification is kept.
const NotificationRetention = 7 * 24 * time.Hour

func taskKey(orgID, taskID string) machine.Item { return orgItemKey(orgID, "TASK#"+taskID) }

func taskEntity(orgID, taskID string) string { return "TASK#" + orgID + "/" + taskID }

func agentEntity(orgID, agentID string) string { return "AGENT#" + orgID + "/" + agentID }

func (s *Store) taskStep(name, orgID, taskID string, in machine.TaskInput) step[machine.TaskInput] {
	return step[machine.TaskInput]{m: machine.Task, t: machine.Task.Transition(name), table: s.tasks,
		key: taskKey(orgID, taskID), in: in, entity: taskEntity(orgID, taskID)}
}

func (s *Store) queueStep(name string, key machine.Item, in machine.TaskInput) step[machine.TaskInput] {
	return step[machine.TaskInput]{m: machine.Queue, t: machine.Queue.Transition(name), table: s.queue, key: key, in: in}
}

// readyKey sorts a waiting queue item: the most urgent, then the oldest.
func readyKey(priority int, createdAt, taskID string) string {
	return fmt.Sprintf("%03d#%s#%s", messages.MaxPriority-priority, createdAt, taskID)
}

func queueKey(orgID, createdAt, taskID string) machine.Item {
	return orgItemKey(orgID, "QUEUE#"+createdAt+"#"+taskID)
}

// event is one TaskEvent a transition appends.
type event struct {
	typ, message, level string
	payload             map[string]string
}

// appended are the writes of events appended to the task as read: each
// takes the next number after the task's eventSeq, at the transition's
// time.
func (s *Store) appended(task Task, at string, actor messages.Actor, events ...event) ([]joined, error) {
	js := make([]joined, len(events))
	for i, e := range events {
		item := TaskEvent{
			PK: "TASK#" + task.TaskID, SK: fmt.Sprintf("EVT#%s#%06d", at, task.EventSeq+int64(i)+1),
			Type: e.typ, Message: e.message, Level: cmp.Or(e.level, "info"), Payload: e.payload,
			Actor: string(actor), CorrelationID: task.CorrelationID, CreatedAt: at,
		}
		// Its number is the task's next, pinned by the transition: no
		// other transaction writes this key.
		put, err := plainPut(s.taskEvents, item)
		if err != nil {
			return nil, err
		}
		js[i] = joined{item: put}
	}
	return js, nil
}

// transitionTime is when a transition of task happens: now, or the
// task's last change if a clock behind it says earlier, so its events
// stay in order.
func transitionTime(task Task, now time.Time) string {
	at := iso(now)
	if task.UpdatedAt > at {
		return task.UpdatedAt
	}
	return at
}

// QueueTask queues a task: the Task QUEUED, its queue item, and the
// CREATED and QUEUED events, in one transaction that also holds the
// actor (a user allowed to queue), the project, and the model's place in
// the settings' allow-lists.
func (s *Store) QueueTask(ctx context.Context, cmd Cmd, p messages.TaskQueuePayload) (Task, error) {
	now := iso(cmd.At)
	task := Task{PK: "ORG#" + p.OrgID, SK: "TASK#" + p.TaskID, TaskID: p.TaskID, OrgID: p.OrgID, ProjectID: p.ProjectID,
		State: machine.TaskQueued, Title: p.Title, Prompt: p.Prompt, Priority: *p.Priority, CreatedAt: now, UpdatedAt: now,
		CorrelationID: cmd.CorrelationID, Model: p.Model, DesiredAgentID: p.DesiredAgentID, CreatedBy: p.Actor.User()}
	st := s.taskStep(machine.TaskQueue, p.OrgID, p.TaskID, machine.TaskInput{Now: now})
	err := applyJoined(ctx, s, cmd, st, func(_ machine.Item, in *machine.TaskInput) ([]joined, machine.Outcome, error) {
		var project Project
		js, out, err := joins(
			func() ([]joined, machine.Outcome, error) { return s.actorJoin(ctx, p.Actor, p.OrgID, machine.Workers) },
			func() ([]joined, machine.Outcome, error) {
				key := orgItemKey(p.OrgID, "PROJ#"+p.ProjectID)
				read, err := getRaw(ctx, s.db, s.projects, key)
				if err != nil {
					return nil, machine.Outcome{}, err
				}
				if err := attributevalue.UnmarshalMap(read, &project); err != nil {
					return nil, machine.Outcome{}, fmt.Errorf("decode project %s: %w", p.ProjectID, err)
				}
				j, out, err := join(orgStep(machine.Project, machine.ProjectExists, s.projects, key, "", machine.OrgInput{}), read)
				return []joined{j}, out, err
			},
		)
		if err != nil || !out.Applies() {
			return nil, out, err
		}
		task.Model = p.Model // the defaults are settled again on each read
		allowed, out, err := s.modelAllowed(ctx, p.OrgID, p.Actor.User(), p.ProjectID, &task, project)
		if err != nil || !out.Applies() {
			return nil, out, err
		}
		events, err := s.appended(Task{TaskID: p.TaskID, CorrelationID: cmd.CorrelationID}, now, p.Actor,
			event{typ: "CREATED", message: "task created: " + task.Title, payload: map[string]string{"project_id": p.ProjectID, "model": task.Model}},
			event{typ: "QUEUED", message: fmt.Sprintf("queued at priority %d", task.Priority)})
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		task.EventSeq = int64(len(events))
		row, err := rawItem(task)
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		in.Row = row
		qRow, err := rawItem(QueueItem{PK: task.PK, SK: "QUEUE#" + now + "#" + p.TaskID, TaskID: p.TaskID, ProjectID: p.ProjectID,
			DesiredAgentID: p.DesiredAgentID, NextVisibleAt: now, Priority: task.Priority, ReadyKey: readyKey(task.Priority, now, p.TaskID)})
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		enqueue, err := transitionWrite(s.queueStep(machine.QueueEnqueue, queueKey(p.OrgID, now, p.TaskID), machine.TaskInput{Row: qRow}), nil)
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		claimRow, err := rawItem(TaskClaim{PK: "TASKID#" + p.TaskID, SK: "CLAIM", OrgID: p.OrgID})
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		// Not read first: the task's own put refuses an ID the org used,
		// the claim one another org used, decided on what DynamoDB returns.
		claim, _, err := join(step[machine.TaskInput]{m: machine.TaskClaim, t: machine.TaskClaim.Transition(machine.TaskClaimTake),
			table: s.tasks, key: machine.Item{"PK": claimRow["PK"], "SK": claimRow["SK"]}, in: machine.TaskInput{Row: claimRow}}, nil)
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		return append(append(append(js, allowed...), claim, joined{item: enqueue}), events...), machine.Outcome{}, nil
	}, &task)
	return task, wrap(err, "queue task %s", p.TaskID)
}

// modelAllowed settles the task's model (the command's, else the
// project's default, else the most specific settings' default) and holds
// it allowed: the most specific scope with an allow-list has it, and
// every more specific scope is held without one.
func (s *Store) modelAllowed(ctx context.Context, orgID, userID, projectID string, task *Task, project Project) ([]joined, machine.Outcome, error) {
	scopes := []string{settingsSK(messages.ScopeProject, "", projectID)}
	if userID != "" {
		scopes = append(scopes, settingsSK(messages.ScopeUser, userID, ""))
	}
	scopes = append(scopes, settingsSK(messages.ScopeGlobal, "", ""))
	reads := make([]machine.Item, len(scopes))
	for i, sk := range scopes {
		read, err := getRaw(ctx, s.db, s.settings, orgItemKey(orgID, sk))
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		reads[i] = read
		var set ScopeSettings
		if err := attributevalue.UnmarshalMap(read, &set); err != nil {
			return nil, machine.Outcome{}, fmt.Errorf("decode settings %s: %w", sk, err)
		}
		task.Model = cmp.Or(task.Model, project.DefaultModel, set.DefaultModel)
	}
	var js []joined
	for i, sk := range scopes {
		in := machine.OrgInput{Model: task.Model}
		step := orgStep(machine.Settings, machine.SettingsUnlisted, s.settings, orgItemKey(orgID, sk), "", in)
		if _, listed := reads[i]["modelAllowList"]; listed {
			step = orgStep(machine.Settings, machine.SettingsAllows, s.settings, orgItemKey(orgID, sk), "", in)
		}
		j, out, err := join(step, reads[i])
		if err != nil || !out.Applies() {
			return nil, out, err
		}
		js = append(js, j)
		if step.t.Name == machine.SettingsAllows {
			break
		}
	}
	return js, machine.Outcome{}, nil
}

// Lease is a task leased: the task and its lease, decided at DecidedAt.
// With no task, it is the answer that none was to lease.
type Lease struct {
	Task           Task   `json:"task"`
	Attempts       int    `json:"attempts"`
	LeaseExpiresAt string `json:"lease_expires_at"`
	DecidedAt      string `json:"decided_at"`
}

// ErrNothingToLease means no task of the org was leasable by the agent.
var ErrNothingToLease = fmt.Errorf("no task to lease")

// LeaseTask leases the org's most urgent visible task the agent may take:
// it reads ready-index (priority, then age) page by page, decides each
// waiting item with the queue machine, and takes the first whose lease
// and task transition commit; one another agent took meanwhile sends it
// to the next. Nothing to lease is recorded as the outcome and returned
// as ErrNothingToLease.
func (s *Store) LeaseTask(ctx context.Context, cmd Cmd, p messages.TaskLeasePayload, leaseFor time.Duration) (Lease, error) {
	var lease Lease
	if done, err := s.recorded(ctx, cmd, &lease); done {
		if err != nil {
			return Lease{}, err
		}
		return orNothing(lease)
	}
	now := iso(cmd.At)
	in := machine.TaskInput{Now: now, Agent: p.AgentID, LeaseExpiresAt: iso(cmd.At.Add(leaseFor)), Events: 1}
	kc := expression.Key("PK").Equal(expression.Value("ORG#" + p.OrgID))
	var start map[string]types.AttributeValue
	for {
		page, next, err := queryRaw(ctx, s.db, s.queue, "ready-index", kc, 25, start)
		if err != nil {
			return Lease{}, fmt.Errorf("lease for %s: %w", p.AgentID, err)
		}
		for _, item := range page {
			lease, ok, err := s.leaseCandidate(ctx, cmd, p, in, item)
			if err != nil || ok {
				return lease, err
			}
		}
		if next == nil {
			break
		}
		start = next
	}
	lease = Lease{DecidedAt: now}
	var recorded Lease
	replayed, err := s.record(ctx, cmd, agentEntity(p.OrgID, p.AgentID), Applied, "empty", lease, &recorded)
	if err != nil {
		return Lease{}, fmt.Errorf("lease for %s: %w", p.AgentID, err)
	}
	if replayed {
		lease = recorded
	}
	return orNothing(lease)
}

// orNothing is ErrNothingToLease, with the lease saying when, for an
// empty lease, recorded or not.
func orNothing(lease Lease) (Lease, error) {
	if lease.Task.TaskID == "" {
		return lease, ErrNothingToLease
	}
	return lease, nil
}

// leaseRounds bounds how often a candidate is decided again on a fresh
// read before it is passed over like one another agent took.
const leaseRounds = 3

// leaseCandidate tries to lease a waiting item the index listed. The
// index is eventually consistent: when the item turns out to have changed
// since its copy there (a requeue counted an attempt), it is decided
// again on the item itself rather than passed over.
func (s *Store) leaseCandidate(ctx context.Context, cmd Cmd, p messages.TaskLeasePayload, in machine.TaskInput, item machine.Item) (Lease, bool, error) {
	var (
		lease             Lease
		ok, reread, stale bool
	)
	err := retry(ctx, "lease", leaseRounds, func() (err error) {
		if reread {
			if item, err = getRaw(ctx, s.db, s.queue, machine.Item{"PK": item["PK"], "SK": item["SK"]}); err != nil {
				return err
			}
		}
		reread, stale = true, false
		if item == nil {
			// Gone since: nothing of it to lease.
			lease, ok = Lease{}, false
			return nil
		}
		lease, ok, err = s.leaseOne(ctx, cmd, p, in, item)
		stale = errors.Is(err, errStale)
		return err
	})
	if stale && errors.Is(err, errConflict) {
		// Changed under each of its leaseRounds decisions: passed over
		// for the next candidate.
		return Lease{}, false, nil
	}
	return lease, ok, err
}

// leaseOne tries to lease the waiting item as read. ok is false when the
// item, or its task, is not (or no longer) the agent's to take; errStale
// when the item changed since it was read.
func (s *Store) leaseOne(ctx context.Context, cmd Cmd, p messages.TaskLeasePayload, in machine.TaskInput, item machine.Item) (Lease, bool, error) {
	qStep := s.queueStep(machine.QueueLease, machine.Item{"PK": item["PK"], "SK": item["SK"]}, in)
	if !machine.Queue.Decide(qStep.t, item, item, in).Applies() {
		return Lease{}, false, nil
	}
	var q QueueItem
	if err := attributevalue.UnmarshalMap(item, &q); err != nil {
		return Lease{}, false, fmt.Errorf("decode queue item: %w", err)
	}
	st := s.taskStep(machine.TaskLease, p.OrgID, q.TaskID, in)
	read, err := getRaw(ctx, s.db, st.table, st.key)
	if err != nil {
		return Lease{}, false, err
	}
	var task Task
	if err := attributevalue.UnmarshalMap(read, &task); err != nil {
		return Lease{}, false, fmt.Errorf("decode task %s: %w", q.TaskID, err)
	}
	events := []event{{typ: "LEASED", message: "leased by " + p.AgentID, payload: map[string]string{"agent_id": p.AgentID}}}
	if q.Attempts > 0 {
		events = append(events, event{typ: "RETRIED", message: fmt.Sprintf("attempt %d", q.Attempts+1)})
	}
	st.in.Events, st.in.Attempts = len(events), q.Attempts+1
	at := transitionTime(task, cmd.At)
	st.in.Now = at
	lq, out, err := join(qStep, item)
	if err != nil || !out.Applies() {
		return Lease{}, false, err
	}
	appended, err := s.appended(task, at, messages.Actor("agent:"+p.AgentID), events...)
	if err != nil {
		return Lease{}, false, err
	}
	st.with = append([]joined{lq}, appended...)
	decided := machine.Task.Decide(st.t, read, read, st.in)
	if !decided.Applies() {
		return Lease{}, false, nil
	}
	var leased Task
	if err := attributevalue.UnmarshalMap(decided.Next, &leased); err != nil {
		return Lease{}, false, fmt.Errorf("decode task %s: %w", q.TaskID, err)
	}
	lease := Lease{Task: leased, Attempts: q.Attempts + 1, LeaseExpiresAt: in.LeaseExpiresAt, DecidedAt: in.Now}
	st.details = lease
	var recorded Lease
	out, err = write(ctx, s, cmd, st, read, &recorded)
	switch {
	case err != nil || !out.Applies():
		return Lease{}, false, err
	case recorded.DecidedAt != "":
		// Another delivery of the command decided first: its answer,
		// whatever it was, is this one's.
		lease, err := orNothing(recorded)
		return lease, true, err
	}
	return lease, true, nil
}

// TaskChange is a task changed by a command: the task after it.
type TaskChange struct {
	Task Task `json:"task"`
}

// TaskStep is one command on one task: which transition, by whom, with
// what; the store reads the task, decides, and writes it with its events,
// log lines, notification and queue change.
type TaskStep struct {
	OrgID, TaskID string
	Transition    string
	Actor         messages.Actor
	In            machine.TaskInput
	// Event is the TaskEvent appended (its type is the transition's);
	// Lines the log lines written with it.
	Message string
	Payload map[string]string
	Lines   []messages.LogLine
	// Notify, when set, is the notification sent: its type, title,
	// message and severity.
	Notify *Notification
	// Queue, when set, is the queue item's transition in the same
	// transaction: removed when the task ends, requeued or given up when
	// its lease runs out.
	Queue string
	// Roles, when set, are the roles a user must hold to take the step
	// (the system may always; an agent never may).
	Roles []string
}

// ChangeTask applies a task command. Transitions by a user hold the user
// allowed to act (a worker of the org); those that end the task remove
// its queue item.
func (s *Store) ChangeTask(ctx context.Context, cmd Cmd, ts TaskStep) (TaskChange, error) {
	st := s.taskStep(ts.Transition, ts.OrgID, ts.TaskID, ts.In)
	var change TaskChange
	err := applyJoined(ctx, s, cmd, st, func(read machine.Item, in *machine.TaskInput) ([]joined, machine.Outcome, error) {
		var task Task
		if err := attributevalue.UnmarshalMap(read, &task); err != nil {
			return nil, machine.Outcome{}, fmt.Errorf("decode task %s: %w", ts.TaskID, err)
		}
		var js []joined
		if ts.Roles != nil {
			actor, out, err := s.actorJoin(ctx, ts.Actor, ts.OrgID, ts.Roles)
			if err != nil || !out.Applies() {
				return nil, out, err
			}
			js = actor
		}
		at := transitionTime(task, cmd.At)
		in.Now = at
		kinds := machine.TaskEventTypes[ts.Transition]
		if len(ts.Lines) > 0 {
			kinds = []string{"LOG_BATCH"}
		} else if kinds == nil {
			kinds = []string{"PROGRESS"}
		}
		events := make([]event, len(kinds))
		for i, typ := range kinds {
			events[i] = event{typ: typ, message: ts.Message, payload: ts.Payload, level: levelOf(typ)}
		}
		in.Events = len(events)
		decided := st.m.Decide(st.t, read, read, *in)
		if !decided.Applies() {
			return nil, decided, nil
		}
		appended, err := s.appended(task, at, ts.Actor, events...)
		if err != nil {
			return nil, machine.Outcome{}, err
		}
		js = append(js, appended...)
		for _, l := range ts.Lines {
			// Keyed by the agent's time and number: a line sent again is
			// the same item.
			put, err := plainPut(s.logs, LogEntry{PK: "TASK#" + ts.TaskID, SK: fmt.Sprintf("LOG#%s#%012d", iso(l.At), l.Seq),
				Stream: l.Stream, Line: l.Line, Level: l.Level, CorrelationID: task.CorrelationID, CreatedAt: iso(l.At)})
			if err != nil {
				return nil, machine.Outcome{}, err
			}
			js = append(js, joined{item: put})
		}
		if ts.Notify != nil {
			n := *ts.Notify
			n.NotificationID = messages.DerivedID(cmd.ID, messages.Type(n.Type), ts.TaskID)
			n.PK, n.SK = "ORG#"+ts.OrgID, "NOTIF#"+at+"#"+n.NotificationID
			n.UserID, n.TaskID, n.ProjectID, n.AgentID = task.CreatedBy, ts.TaskID, task.ProjectID, task.AgentID
			n.CreatedAt, n.TTL = at, cmd.At.Add(NotificationRetention).Unix()
			put, err := s.sent(n)
			if err != nil {
				return nil, machine.Outcome{}, err
			}
			js = append(js, put)
		}
		if ts.Queue != "" {
			key := queueKey(ts.OrgID, task.CreatedAt, ts.TaskID)
			read, err := getRaw(ctx, s.db, s.queue, key)
			if err != nil {
				return nil, machine.Outcome{}, err
			}
			qin := *in
			qin.ReadyKey = readyKey(task.Priority, task.CreatedAt, task.TaskID)
			q, out, err := join(s.queueStep(ts.Queue, key, qin), read)
			if err != nil || !out.Applies() {
				return nil, out, err
			}
			js = append(js, q)
		}
		return js, machine.Outcome{}, nil
	}, &change.Task)
	if err != nil {
		return TaskChange{}, wrap(err, "%s task %s", ts.Transition, ts.TaskID)
	}
	return change, nil
}

func levelOf(typ string) string {
	if typ == "ERROR" {
		return "error"
	}
	return "info"
}

// CurrentLease reads a task's queue item as it is: its lease, if any.
func (s *Store) CurrentLease(ctx context.Context, orgID, taskID string) (QueueItem, bool, error) {
	task, found, err := s.GetTask(ctx, orgID, taskID)
	if err != nil || !found {
		return QueueItem{}, false, err
	}
	return getItem[QueueItem](ctx, s.db, s.queue, queueKey(orgID, task.CreatedAt, taskID))
}

// GetAgent reads an agent.
func (s *Store) GetAgent(ctx context.Context, orgID, agentID string) (Agent, bool, error) {
	return getItem[Agent](ctx, s.db, s.agents, orgItemKey(orgID, "AGENT#"+agentID))
}

// GetTask reads a task.
func (s *Store) GetTask(ctx context.Context, orgID, taskID string) (Task, bool, error) {
	return getItem[Task](ctx, s.db, s.tasks, taskKey(orgID, taskID))
}

// TaskHistory reads a task's events and log lines, each in order.
func (s *Store) TaskHistory(ctx context.Context, taskID string) ([]TaskEvent, []LogEntry, error) {
	return s.TaskHistorySince(ctx, taskID, "", "")
}

// Notifications reads an org's notifications, oldest first.
func (s *Store) Notifications(ctx context.Context, orgID string) ([]Notification, error) {
	kc := expression.Key("PK").Equal(expression.Value("ORG#" + orgID)).And(expression.Key("SK").BeginsWith("NOTIF#"))
	return query[Notification](ctx, s.db, s.notifications, "", kc, nil, 0)
}

// ExpireLease ends a lease its timer says may have run out: unless the
// owner's heartbeats renewed it (renewed) or the task moved on
// (not_leaseholder, ended), the task is requeued, or, when that was its
// last attempt, ends in ERROR with a QUEUE_STUCK notification. Which of
// the two is the queue item's to say (attempts), read first and pinned.
func (s *Store) ExpireLease(ctx context.Context, cmd Cmd, p messages.TaskLeaseExpiredPayload, maxAttempts int) (TaskChange, error) {
	task, found, err := s.GetTask(ctx, p.OrgID, p.TaskID)
	if err != nil {
		return TaskChange{}, fmt.Errorf("expire lease of %s: %w", p.TaskID, err)
	}
	in := machine.TaskInput{Now: iso(cmd.At), Agent: p.AgentID, MaxAttempts: maxAttempts,
		Error: fmt.Sprintf("no agent finished it: the lease of its last attempt (%d of %d) ran out", maxAttempts, maxAttempts)}
	ts := TaskStep{OrgID: p.OrgID, TaskID: p.TaskID, Actor: p.Actor, In: in,
		Transition: machine.TaskRequeue, Queue: machine.QueueRequeue, Message: "lease of " + p.AgentID + " expired"}
	if found {
		read, err := getRaw(ctx, s.db, s.queue, queueKey(p.OrgID, task.CreatedAt, p.TaskID))
		if err != nil {
			return TaskChange{}, fmt.Errorf("expire lease of %s: %w", p.TaskID, err)
		}
		if machine.Queue.Decide(machine.Queue.Transition(machine.QueueRequeue), read, read, in).Reason == machine.ReasonAttemptsSpent {
			ts.Transition, ts.Queue, ts.Message = machine.TaskStuck, machine.QueueGiveUp, in.Error
			ts.Notify = &Notification{Type: "QUEUE_STUCK", Title: "A task is stuck", Severity: "error",
				Message: fmt.Sprintf("%s: no agent finished it in %d attempts", task.Title, maxAttempts)}
		}
	}
	return s.ChangeTask(ctx, cmd, ts)
}

// Heartbeat is an agent's heartbeat as applied: the agent, and whether it
// renewed the lease of its current task, until when.
type Heartbeat struct {
	Agent          Agent  `json:"agent"`
	Renewed        bool   `json:"renewed,omitempty"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
}

// AgentRetention is how long an agent's item outlives its last heartbeat.
const AgentRetention = time.Hour

// RecordHeartbeat writes the agent online as its heartbeat says and, when
// it names a current task whose lease it holds, renews that lease until
// leaseFor from now. A lease it no longer holds is not renewed; the
// heartbeat counts all the same.
func (s *Store) RecordHeartbeat(ctx context.Context, cmd Cmd, p messages.AgentHeartbeatPayload, leaseFor time.Duration) (Heartbeat, error) {
	now := iso(cmd.At)
	agent := Agent{PK: "ORG#" + p.OrgID, SK: "AGENT#" + p.AgentID, AgentID: p.AgentID, OrgID: p.OrgID, Host: p.Host, PID: p.PID,
		Cwd: p.Cwd, Status: machine.AgentOnline, LastHeartbeatAt: now, CurrentProjectID: p.CurrentProjectID,
		CurrentTaskID: p.CurrentTaskID, Version: p.Version, Capabilities: p.Capabilities, CanInteractive: p.CanInteractive,
		TTL: cmd.At.Add(AgentRetention).Unix()}
	if agent.Capabilities == nil {
		agent.Capabilities = []string{}
	}
	row, err := rawItem(agent)
	if err != nil {
		return Heartbeat{}, err
	}
	in := machine.TaskInput{Now: now, Agent: p.AgentID, Row: row, LeaseExpiresAt: iso(cmd.At.Add(leaseFor))}
	st := step[machine.TaskInput]{m: machine.Agent, t: machine.Agent.Transition(machine.AgentHeartbeat), table: s.agents,
		key: orgItemKey(p.OrgID, agent.SK), in: in, entity: agentEntity(p.OrgID, p.AgentID)}
	var hb, recorded Heartbeat
	err = retrying(ctx, st, func() error {
		hb = Heartbeat{Agent: agent}
		st.with = nil
		if p.CurrentTaskID != "" {
			renew, ok, err := s.renewal(ctx, p, in)
			if err != nil {
				return err
			}
			if ok {
				st.with = []joined{renew}
				hb.Renewed, hb.LeaseExpiresAt = true, in.LeaseExpiresAt
			}
		}
		st.details = hb
		_, err := write(ctx, s, cmd, st, nil, &recorded)
		return err
	})
	if recorded.Agent.AgentID != "" {
		hb = recorded // a delivery before this one decided
	}
	return hb, wrap(err, "heartbeat of %s", p.AgentID)
}

// renewal is the renewal of the agent's lease on its current task, when
// it holds it. A renewal refused at the write (the lease expired and was
// taken meanwhile) is no rejection: the heartbeat is tried again without.
func (s *Store) renewal(ctx context.Context, p messages.AgentHeartbeatPayload, in machine.TaskInput) (joined, bool, error) {
	task, found, err := s.GetTask(ctx, p.OrgID, p.CurrentTaskID)
	if err != nil || !found {
		return joined{}, false, err
	}
	key := queueKey(p.OrgID, task.CreatedAt, task.TaskID)
	read, err := getRaw(ctx, s.db, s.queue, key)
	if err != nil {
		return joined{}, false, err
	}
	j, out, err := join(s.queueStep(machine.QueueRenew, key, in), read)
	if err != nil || !out.Applies() {
		return joined{}, false, err
	}
	j.refused = func(machine.Item) machine.Outcome { return machine.Outcome{Stale: true} }
	return j, true, nil
}

// AgentSilence applies an agent's silence timer: an agent that has not
// heartbeat since heard turns stale, a stale one offline, with an
// AGENT_OFFLINE notification for the whole org. One heard from since is
// a *Rejection (heard), as is one already offline (wrong_state).
func (s *Store) AgentSilence(ctx context.Context, cmd Cmd, p messages.AgentSilentPayload) (Agent, error) {
	key := orgItemKey(p.OrgID, "AGENT#"+p.AgentID)
	var agent Agent
	name := machine.AgentGoStale
	read, err := getRaw(ctx, s.db, s.agents, key)
	if err != nil {
		return Agent{}, err
	}
	if status, _ := read[machine.Agent.State].(*types.AttributeValueMemberS); status != nil && status.Value == machine.AgentStale {
		name = machine.AgentGoOffline
	}
	st := step[machine.TaskInput]{m: machine.Agent, t: machine.Agent.Transition(name), table: s.agents, key: key,
		in: machine.TaskInput{Heard: p.LastHeartbeatAt}, entity: agentEntity(p.OrgID, p.AgentID)}
	if name == machine.AgentGoOffline {
		n := Notification{PK: "ORG#" + p.OrgID, Type: "AGENT_OFFLINE", Title: "An agent went offline", Severity: "warning",
			Message: fmt.Sprintf("agent %s has not been heard from since %s", p.AgentID, p.LastHeartbeatAt), AgentID: p.AgentID,
			CreatedAt: iso(cmd.At), TTL: cmd.At.Add(NotificationRetention).Unix()}
		n.NotificationID = messages.DerivedID(cmd.ID, messages.AgentOffline, p.AgentID)
		n.SK = "NOTIF#" + n.CreatedAt + "#" + n.NotificationID
		put, err := s.sent(n)
		if err != nil {
			return Agent{}, err
		}
		st.with = []joined{put}
	}
	if err := apply(ctx, s, cmd, st, &agent); err != nil {
		return Agent{}, fmt.Errorf("%s %s: %w", name, p.AgentID, err)
	}
	return agent, nil
}

// ReadNotification marks a notification read, by its recipient (anyone of
// the org for one sent to all).
func (s *Store) ReadNotification(ctx context.Context, cmd Cmd, p messages.NotificationReadPayload) (Notification, error) {
	key := orgItemKey(p.OrgID, "NOTIF#"+p.CreatedAt+"#"+p.NotificationID)
	st := step[machine.TaskInput]{m: machine.Notification, t: machine.Notification.Transition(machine.NotificationRead),
		table: s.notifications, key: key, in: machine.TaskInput{User: p.Actor.User()}, entity: "NOTIFICATION#" + p.OrgID + "/" + p.NotificationID}
	var n Notification
	err := applyJoined(ctx, s, cmd, st, func(machine.Item, *machine.TaskInput) ([]joined, machine.Outcome, error) {
		return s.actorJoin(ctx, p.Actor, p.OrgID, []string{messages.RoleOwner, messages.RoleAdmin, messages.RoleMember, messages.RoleViewer})
	}, &n)
	return n, wrap(err, "read notification %s", p.NotificationID)
}

// Task listings' indexes, by what they select on.
const (
	ByProject = "project-tasks"
	ByAgent   = "agent-tasks"
	ByState   = "state-queue"
)

// ListTasks lists tasks of a project, of an agent or in a state (index
// ByProject, ByAgent or ByState and its key) of one org (every org's for
// orgID ""), the most recently changed (or, by state, created) first, a
// page of at most limit read from the index. The indexes are the
// design's, keyed without the org, and project and agent IDs are unique
// only within one: the org is a filter.
func (s *Store) ListTasks(ctx context.Context, orgID, index, key string, limit int32, cursor string) (Page[Task], error) {
	attr := map[string]string{ByProject: "projectId", ByAgent: "agentId", ByState: "state"}[index]
	if attr == "" {
		return Page[Task]{}, fmt.Errorf("list tasks: no index %q", index)
	}
	return newestFirst[Task](ctx, s.db, s.tasks, index, expression.Key(attr).Equal(expression.Value(key)), inOrg(orgID), limit, cursor)
}

// ListAgents lists the agents in a status (online, stale or offline) of
// one org (every org's for orgID ""), the most recently heard from first.
func (s *Store) ListAgents(ctx context.Context, orgID, status string, limit int32, cursor string) (Page[Agent], error) {
	return newestFirst[Agent](ctx, s.db, s.agents, "status-index", expression.Key("status").Equal(expression.Value(status)), inOrg(orgID), limit, cursor)
}

// inOrg filters a listing on one org; nil (none) for orgID "".
func inOrg(orgID string) *expression.ConditionBuilder {
	if orgID == "" {
		return nil
	}
	f := expression.Name("orgId").Equal(expression.Value(orgID))
	return &f
}

// ListNotifications lists a user's notifications, newest first.
func (s *Store) ListNotifications(ctx context.Context, userID string, limit int32, cursor string) (Page[Notification], error) {
	return newestFirst[Notification](ctx, s.db, s.notifications, "user-notifications", expression.Key("userId").Equal(expression.Value(userID)), nil, limit, cursor)
}

// TaskLine is one of a task's events or log lines, as a tail shows it.
type TaskLine struct {
	// Event is true for an event, false for a log line.
	Event bool
	At    string
	// Kind is an event's type, or a log line's stream.
	Kind, Text string
	// Actor is who caused an event; empty for a log line.
	Actor string
}

// Interleave merges a task's events and log lines, each in order, by
// time, an event first on a tie.
func Interleave(events []TaskEvent, logs []LogEntry) []TaskLine {
	var out []TaskLine
	i, j := 0, 0
	for i < len(events) || j < len(logs) {
		if j == len(logs) || (i < len(events) && events[i].CreatedAt <= logs[j].CreatedAt) {
			e := events[i]
			out = append(out, TaskLine{Event: true, At: e.CreatedAt, Kind: e.Type, Text: e.Message, Actor: e.Actor})
			i++
			continue
		}
		l := logs[j]
		out = append(out, TaskLine{At: l.CreatedAt, Kind: l.Stream, Text: l.Line})
		j++
	}
	return out
}

// TaskHistorySince reads a task's events and log lines after the sort
// keys given ("" for all), each in order: what a tail has not shown yet.
func (s *Store) TaskHistorySince(ctx context.Context, taskID, eventsAfter, logsAfter string) ([]TaskEvent, []LogEntry, error) {
	after := func(sk string) expression.KeyConditionBuilder {
		kc := expression.Key("PK").Equal(expression.Value("TASK#" + taskID))
		if sk == "" {
			return kc // a key condition cannot compare with an empty string
		}
		return kc.And(expression.Key("SK").GreaterThan(expression.Value(sk)))
	}
	events, err := query[TaskEvent](ctx, s.db, s.taskEvents, "", after(eventsAfter), nil, 0)
	if err != nil {
		return nil, nil, err
	}
	logs, err := query[LogEntry](ctx, s.db, s.logs, "", after(logsAfter), nil, 0)
	return events, logs, err
}
