package machine

import (
	"transit/messages"
)

// Task states: the values of a task item's state attribute.
const (
	TaskQueued           = "QUEUED"
	TaskLeased           = "LEASED"
	TaskRunning          = "RUNNING"
	TaskAwaitingResponse = "AWAITING_RESPONSE"
	TaskCompleted        = "COMPLETED"
	TaskError            = "ERROR"
	TaskCancelled        = "CANCELLED"
)

// TaskClaimed is the one state of a task ID's claim.
const TaskClaimed = "claimed"

// States of the queue item, the agent and the notification. A queue item
// exists while its task has not ended (a lease is its owner, a guard); a
// notification exists once sent (read is a flag, not a state).
const (
	QueueWaiting     = "waiting"
	AgentOnline      = "online"
	AgentStale       = "stale"
	AgentOffline     = "offline"
	NotificationSent = "sent"
)

// Reasons that choose between transitions or candidates and never reach
// a producer: a queue item another agent leased, one not visible yet or
// reserved for another agent; a lease renewed since its timer was armed;
// an agent heard from since its silence timer was armed. (A lease with
// attempts left or spent reuses the sandbox's ReasonAttemptsLeft and
// ReasonAttemptsSpent.)
const (
	ReasonLeased     = "leased"
	ReasonNotVisible = "not_visible"
	ReasonReserved   = "reserved"
	ReasonRenewed    = "renewed"
	ReasonHeard      = "heard"
)

// TaskInput is what a task-domain transition decides on besides the item.
type TaskInput struct {
	// Now is the command's decision time as stored (ISO 8601, UTC, ms).
	Now string
	// Row is the item a creation or replacement writes, as stored.
	Row Item
	// Agent is the agent acting, or whose lease expired.
	Agent string
	// What the transition records on the task.
	Question, Response, Result, Error string
	// Events is how many TaskEvents the transition appends: the task's
	// eventSeq advances by it. Attempts is a lease's number.
	Events, Attempts int
	// LeaseExpiresAt is a new lease's end (as stored); MaxAttempts how
	// many leases a task gets; ReadyKey a waiting item's ready-index key.
	LeaseExpiresAt string
	MaxAttempts    int
	ReadyKey       string
	// Heard is the lastHeartbeatAt a silence timer was armed for; User the
	// user acting.
	Heard, User string
}

// Names of the task transitions.
const (
	TaskQueue    = "queue"
	TaskLease    = "lease"
	TaskStart    = "start"
	TaskProgress = "progress"
	TaskAsk      = "ask"
	TaskAnswer   = "answer"
	TaskComplete = "complete"
	TaskFail     = "fail"
	TaskCancel   = "cancel"
	TaskRequeue  = "requeue"
	TaskStuck    = "stuck"
)

// The TaskEvents item types each transition appends, in order (a lease of
// a task leased before appends RETRIED too, and progress with log lines
// LOG_BATCH instead of PROGRESS).
var TaskEventTypes = map[string][]string{
	TaskQueue: {"CREATED", "QUEUED"}, TaskLease: {"LEASED"}, TaskStart: {"STARTED"},
	TaskAsk: {"AWAITING_RESPONSE"}, TaskAnswer: {"RESPONSE_RECEIVED"}, TaskComplete: {"COMPLETED"},
	TaskFail: {"ERROR"}, TaskCancel: {"CANCELLED"}, TaskRequeue: {"REQUEUED"}, TaskStuck: {"ERROR"},
}

var (
	live  = []string{TaskLeased, TaskRunning, TaskAwaitingResponse}
	ended = map[string]string{TaskCompleted: messages.ReasonEnded, TaskError: messages.ReasonEnded, TaskCancelled: messages.ReasonEnded}
)

// sequenced is what every task transition does besides its own: pin the
// event sequence it read (its TaskEvents take the next numbers), advance
// it and stamp updatedAt.
var sequenced = Guard[TaskInput]{Name: "events unchanged", Attr: "eventSeq", Op: Eq, Value: func(_ TaskInput, read Item) any {
	return readNumber(read, "eventSeq")
}}

func advance(more ...Assign[TaskInput]) []Assign[TaskInput] {
	return append(more,
		Assign[TaskInput]{"eventSeq", func(in TaskInput, read Item) any { return int64(number(read, "eventSeq")) + int64(in.Events) }},
		Assign[TaskInput]{"updatedAt", taskNow})
}

func taskNow(in TaskInput, _ Item) any { return in.Now }

func taskText(f func(TaskInput) string) func(TaskInput, Item) any {
	return func(in TaskInput, _ Item) any { return f(in) }
}

var leaseholder = Guard[TaskInput]{Name: "leaseholder", Reason: messages.ReasonNotLeaseholder, Attr: "agentId", Op: Eq,
	Value: func(in TaskInput, _ Item) any { return in.Agent }}

// Task is the machine of a task item: queued, leased by an agent, run by
// it (asking its user and waiting for the answer on the way) until it
// completes or fails; its user may cancel it until it ends, and a lease
// that runs out requeues it or, after the last attempt, ends it stuck.
var Task = &Machine[TaskInput]{
	Name: "task", State: "state", Key: "PK",
	States: []string{TaskQueued, TaskLeased, TaskRunning, TaskAwaitingResponse, TaskCompleted, TaskError, TaskCancelled},
	Transitions: []Transition[TaskInput]{
		{
			Name: TaskQueue, Command: messages.TaskQueue, From: []string{Absent}, To: TaskQueued,
			Set: copyFrom([]string{"PK", "SK", "taskId", "orgId", "projectId", "title", "prompt", "priority", "model",
				"desiredAgentId", "createdBy", "createdAt", "updatedAt", "correlationId", "eventSeq"}, func(in TaskInput) Item { return in.Row }),
			Event: messages.TaskQueued, Rejected: messages.TaskRejected,
			Refuse: map[string]string{TaskQueued: messages.ReasonAlreadyExists, TaskLeased: messages.ReasonAlreadyExists,
				TaskRunning: messages.ReasonAlreadyExists, TaskAwaitingResponse: messages.ReasonAlreadyExists,
				TaskCompleted: messages.ReasonAlreadyExists, TaskError: messages.ReasonAlreadyExists, TaskCancelled: messages.ReasonAlreadyExists},
		},
		{
			Name: TaskLease, Command: messages.TaskLease, Doc: "the most urgent visible task the agent may take",
			From: []string{TaskQueued}, To: TaskLeased, Guards: []Guard[TaskInput]{sequenced},
			Set: advance(Assign[TaskInput]{"agentId", taskText(func(in TaskInput) string { return in.Agent })},
				Assign[TaskInput]{"attempts", func(in TaskInput, _ Item) any { return in.Attempts }}),
			Event: messages.TaskLeased, Refuse: ended,
		},
		{
			Name: TaskStart, Command: messages.TaskStart, From: []string{TaskLeased}, To: TaskRunning,
			Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(Assign[TaskInput]{"startedAt", taskNow}),
			Event:  messages.TaskStarted, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskProgress, Command: messages.TaskProgress, Doc: "log lines and a message",
			From: []string{TaskRunning, TaskAwaitingResponse}, To: Same, Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:   advance(),
			Event: messages.TaskProgressed, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskAsk, Command: messages.TaskAwaitResponse, From: []string{TaskRunning}, To: TaskAwaitingResponse,
			Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(Assign[TaskInput]{"clarificationQuestion", taskText(func(in TaskInput) string { return in.Question })}),
			Event:  messages.TaskAwaitingResponse, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskAnswer, Command: messages.TaskRespond, Doc: "its user answers",
			From: []string{TaskAwaitingResponse}, To: TaskRunning, Guards: []Guard[TaskInput]{sequenced},
			Set:    advance(Assign[TaskInput]{"responseText", taskText(func(in TaskInput) string { return in.Response })}),
			Remove: []string{"clarificationQuestion"},
			Event:  messages.TaskResponseReceived, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskComplete, Command: messages.TaskComplete, From: []string{TaskRunning}, To: TaskCompleted,
			Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(Assign[TaskInput]{"result", taskText(func(in TaskInput) string { return in.Result })}, Assign[TaskInput]{"endedAt", taskNow}),
			Event:  messages.TaskCompleted, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskFail, Command: messages.TaskFail, From: live, To: TaskError,
			Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(Assign[TaskInput]{"error", taskText(func(in TaskInput) string { return in.Error })}, Assign[TaskInput]{"endedAt", taskNow}),
			Remove: []string{"clarificationQuestion"},
			Event:  messages.TaskFailed, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskCancel, Command: messages.TaskCancel, Doc: "its user cancels it",
			From: append([]string{TaskQueued}, live...), To: TaskCancelled, Guards: []Guard[TaskInput]{sequenced},
			Set:    advance(Assign[TaskInput]{"endedAt", taskNow}),
			Remove: []string{"clarificationQuestion"},
			Event:  messages.TaskCancelled, Rejected: messages.TaskRejected, Refuse: ended,
		},
		{
			Name: TaskRequeue, Command: messages.TaskLeaseExpire, Doc: "the lease ran out, attempts are left",
			From: live, To: TaskQueued, Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(),
			Remove: []string{"agentId", "clarificationQuestion"},
			Event:  messages.TaskRequeued, Refuse: ended,
		},
		{
			Name: TaskStuck, Command: messages.TaskLeaseExpire, Doc: "the lease of the last attempt ran out",
			From: live, To: TaskError, Guards: []Guard[TaskInput]{leaseholder, sequenced},
			Set:    advance(Assign[TaskInput]{"error", taskText(func(in TaskInput) string { return in.Error })}, Assign[TaskInput]{"endedAt", taskNow}),
			Remove: []string{"clarificationQuestion"},
			Event:  messages.TaskStuck, Refuse: ended,
		},
	},
}

// TaskClaimTake names the claim's one transition.
const TaskClaimTake = "claim"

// TaskClaim is the machine of a task ID's claim: a task's events and log
// lines are keyed by its ID alone, so one org queuing an ID another org
// already used is refused (already_exists) rather than writing into that
// task's history. The claim is taken in the queuing's transaction.
var TaskClaim = &Machine[TaskInput]{
	Name: "task-claim", State: "claimState", Key: "PK", Unset: TaskClaimed, States: []string{TaskClaimed},
	Transitions: []Transition[TaskInput]{{
		Name: TaskClaimTake, Command: messages.TaskQueue, From: []string{Absent}, To: TaskClaimed,
		Set:      copyFrom([]string{"PK", "SK", "orgId"}, func(in TaskInput) Item { return in.Row }),
		Rejected: messages.TaskRejected, Refuse: map[string]string{TaskClaimed: messages.ReasonAlreadyExists},
	}},
}

// Names of the queue item transitions.
const (
	QueueEnqueue = "enqueue"
	QueueLease   = "lease"
	QueueRenew   = "renew"
	QueueRequeue = "requeue"
	QueueGiveUp  = "give-up"
	QueueRemove  = "remove"
)

var (
	ownedLease = Guard[TaskInput]{Name: "lease owner", Reason: messages.ReasonNotLeaseholder, Attr: "leaseOwner", Op: Eq,
		Value: func(in TaskInput, _ Item) any { return in.Agent }}
	runOut = Guard[TaskInput]{Name: "run out", Reason: ReasonRenewed, Attr: "leaseExpiresAt", Op: Le, Value: taskNow}
	// attemptsUnchanged pins the attempt count a lease or its expiry
	// decided on.
	attemptsUnchanged = Guard[TaskInput]{Name: "attempts unchanged", Attr: "attempts", Op: Eq, Value: func(_ TaskInput, read Item) any {
		return readNumber(read, "attempts")
	}}
	maxAttempts = func(in TaskInput, _ Item) any { return in.MaxAttempts }
)

// Queue is the machine of a task's queue item. It waits in the org's
// ready-index (by priority, then age) until an agent leases it; the lease
// takes it out of the index, the owner's heartbeats renew it, and a lease
// that runs out puts it back, or after the last attempt gives up. The item
// goes when its task ends.
var Queue = &Machine[TaskInput]{
	Name: "queue", State: "queueState", Key: "PK", Unset: QueueWaiting, States: []string{QueueWaiting},
	Transitions: []Transition[TaskInput]{
		{
			Name: QueueEnqueue, Command: messages.TaskQueue, From: []string{Absent}, To: QueueWaiting,
			Set: copyFrom([]string{"PK", "SK", "taskId", "projectId", "desiredAgentId", "attempts", "nextVisibleAt", "priority", "readyKey"},
				func(in TaskInput) Item { return in.Row }),
			Refuse: map[string]string{QueueWaiting: messages.ReasonAlreadyExists},
		},
		{
			Name: QueueLease, Command: messages.TaskLease, From: []string{QueueWaiting}, To: QueueWaiting,
			Guards: []Guard[TaskInput]{
				{Name: "free", Reason: ReasonLeased, Attr: "leaseOwner", Op: NotExists},
				{Name: "visible", Reason: ReasonNotVisible, Attr: "nextVisibleAt", Op: Le, OrAbsent: true, Value: taskNow},
				{Name: "for this agent", Reason: ReasonReserved, Attr: "desiredAgentId", Op: Eq, OrAbsent: true,
					Value: func(in TaskInput, _ Item) any { return in.Agent }},
				attemptsUnchanged,
			},
			Set: []Assign[TaskInput]{
				{"leaseOwner", func(in TaskInput, _ Item) any { return in.Agent }},
				{"leaseExpiresAt", func(in TaskInput, _ Item) any { return in.LeaseExpiresAt }},
				{"nextVisibleAt", func(in TaskInput, _ Item) any { return in.LeaseExpiresAt }},
				{"attempts", func(_ TaskInput, read Item) any { return int64(number(read, "attempts")) + 1 }},
			},
			Remove: []string{"readyKey"},
		},
		{
			Name: QueueRenew, Command: messages.AgentHeartbeat, Doc: "its owner's heartbeat",
			From: []string{QueueWaiting}, To: QueueWaiting, Guards: []Guard[TaskInput]{ownedLease},
			Set: []Assign[TaskInput]{
				{"leaseExpiresAt", func(in TaskInput, _ Item) any { return in.LeaseExpiresAt }},
				{"nextVisibleAt", func(in TaskInput, _ Item) any { return in.LeaseExpiresAt }},
			},
		},
		{
			Name: QueueRequeue, Command: messages.TaskLeaseExpire, Doc: "attempts are left",
			From: []string{QueueWaiting}, To: QueueWaiting,
			Guards: []Guard[TaskInput]{ownedLease, runOut, attemptsUnchanged,
				{Name: "attempts left", Reason: ReasonAttemptsSpent, Attr: "attempts", Op: Lt, Value: maxAttempts}},
			Set: []Assign[TaskInput]{
				{"nextVisibleAt", taskNow},
				{"readyKey", func(in TaskInput, _ Item) any { return in.ReadyKey }},
			},
			Remove: []string{"leaseOwner", "leaseExpiresAt"},
		},
		{
			Name: QueueGiveUp, Command: messages.TaskLeaseExpire, Doc: "the last attempt's lease ran out",
			From: []string{QueueWaiting}, To: Absent,
			Guards: []Guard[TaskInput]{ownedLease, runOut, attemptsUnchanged,
				{Name: "attempts spent", Reason: ReasonAttemptsLeft, Attr: "attempts", Op: Ge, Value: maxAttempts}},
		},
		{
			Name: QueueRemove, Command: messages.TaskComplete, Doc: "or task.failed or task.cancelled: its task ended",
			From: []string{QueueWaiting}, To: Absent,
		},
	},
}

// Names of the agent transitions.
const (
	AgentHeartbeat = "heartbeat"
	AgentGoStale   = "go-stale"
	AgentGoOffline = "go-offline"
)

var notHeard = Guard[TaskInput]{Name: "not heard since", Reason: ReasonHeard, Attr: "lastHeartbeatAt", Op: Eq,
	Value: func(in TaskInput, _ Item) any { return in.Heard }}

// Agent is the machine of an agent's item: every heartbeat writes it
// whole, online; its silence timer turns it stale, then offline, unless a
// heartbeat came since the timer was armed.
var Agent = &Machine[TaskInput]{
	Name: "agent", State: "status", Key: "PK", States: []string{AgentOnline, AgentStale, AgentOffline},
	Transitions: []Transition[TaskInput]{
		{
			Name: AgentHeartbeat, Command: messages.AgentHeartbeat, From: []string{Absent, AgentOnline, AgentStale, AgentOffline}, To: AgentOnline,
			Set: copyFrom([]string{"PK", "SK", "agentId", "orgId", "host", "pid", "cwd", "lastHeartbeatAt", "currentProjectId",
				"currentTaskId", "version", "capabilities", "canInteractive", "ttl"}, func(in TaskInput) Item { return in.Row }),
		},
		{
			Name: AgentGoStale, Command: messages.AgentSilence, Doc: "silent since the timer was armed",
			From: []string{AgentOnline}, To: AgentStale, Guards: []Guard[TaskInput]{notHeard},
			Event: messages.AgentStale,
		},
		{
			Name: AgentGoOffline, Command: messages.AgentSilence, Doc: "still silent",
			From: []string{AgentStale}, To: AgentOffline, Guards: []Guard[TaskInput]{notHeard},
			Event: messages.AgentOffline,
		},
	},
}

// Names of the notification transitions.
const (
	NotificationSend = "send"
	NotificationRead = "read"
)

// Notification is the machine of a user's notification: sent once by the
// transition it reports, marked read by its recipient (anyone in the org
// for one sent to all).
var Notification = &Machine[TaskInput]{
	Name: "notification", State: "notificationState", Key: "PK", Unset: NotificationSent, States: []string{NotificationSent},
	Transitions: []Transition[TaskInput]{
		{
			Name: NotificationSend, Doc: "the transition it reports", From: []string{Absent}, To: NotificationSent,
			Set: copyFrom([]string{"PK", "SK", "notificationId", "userId", "type", "title", "message", "severity", "taskId",
				"projectId", "agentId", "read", "createdAt", "ttl"}, func(in TaskInput) Item { return in.Row }),
		},
		{
			Name: NotificationRead, Command: messages.NotificationMarkRead, From: []string{NotificationSent}, To: NotificationSent,
			Guards: []Guard[TaskInput]{{Name: "recipient", Reason: messages.ReasonNotRecipient, Attr: "userId", Op: Eq, OrAbsent: true,
				Value: func(in TaskInput, _ Item) any { return in.User }}},
			Set:      []Assign[TaskInput]{{"read", func(TaskInput, Item) any { return true }}},
			Rejected: messages.TaskRejected,
		},
	},
}
