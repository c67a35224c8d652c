package messages

import (
	"encoding/json"
	"time"
)

// Examples in the schemas, by schema ID. The catalogue tests check each
// against its schema, and each command's against Decode.

var exampleTime = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	exampleSandboxID = "0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"
	exampleTimerUUID = "9b2c4e1a-7d3f-4a8b-8c6e-5f1d2a3b4c5d"
	exampleARN       = "arn:aws:lambda:eu-west-1:123456789012:layer:requests:3"
	exampleHash      = "sha256:9f2c1b7e"
)

var exampleLayer = LayerVersionPayload{Region: "eu-west-1", Package: "requests", Version: 3}

// The org and task domains' examples: one org, its owner, a project, an
// agent and a task. Their times are as stored: RFC 3339, UTC, milliseconds.
const (
	exampleOrgID   = "org-acme"
	exampleUserID  = "u-1"
	exampleUser    = Actor("user:" + exampleUserID)
	exampleProject = "proj-web"
	exampleAgentID = "agent-7"
	exampleTaskID  = "task-42"
	exampleAt      = "2030-01-02T03:04:05.000Z"
	exampleLeaseAt = "2030-01-02T03:09:05.000Z"
	exampleModel   = "claude-sonnet-4-5"
	exampleQuest   = "Should the migration also drop the legacy sessions table?"
)

var exampleTaskAgent = TaskAgentPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID}

// The nucleus domain's examples: one account and its role, a schedule
// that runs its resources on weekdays, Berlin time, and an EC2 instance
// and an RDS DB instance it targets. Times are as stored.
const (
	exampleAccountID    = "123456789012"
	exampleAccountName  = "Development"
	exampleRoleARN      = "arn:aws:iam::123456789012:role/nucleus-scheduler"
	exampleScheduleID   = "sch-dev-nights"
	exampleScheduleName = "Dev environment nights"
	exampleStartCron    = "0 8 * * 1-5"
	exampleEndCron      = "0 19 * * 1-5"
	exampleZone         = "Europe/Berlin"
	exampleInstanceARN  = "arn:aws:ec2:eu-central-1:123456789012:instance/i-0abc123def4567890"
	exampleDBARN        = "arn:aws:rds:eu-central-1:123456789012:db:dev-orders"
	// The next windows after exampleAt: 08:00 and 19:00 in Berlin (UTC+1).
	exampleNextStart = "2030-01-02T07:00:00.000Z"
	exampleNextStop  = "2030-01-02T18:00:00.000Z"
)

var exampleSchedulePayload = SchedulePayload{ScheduleID: exampleScheduleID, ScheduleName: exampleScheduleName,
	StartCron: exampleStartCron, EndCron: exampleEndCron, Timezone: exampleZone, Enabled: true,
	NextStartAt: exampleNextStart, NextStopAt: exampleNextStop, UpdatedAt: exampleAt}

var exampleResourceEvent = ResourceEventPayload{ScheduleID: exampleScheduleID, ResourceARN: exampleInstanceARN,
	ResourceType: ResourceEC2Instance, Region: "eu-central-1", AccountID: exampleAccountID, At: exampleAt}

var examples = map[string]any{
	SchemaID(CommandSchema, SandboxAllocate):     SandboxAllocatePayload{TrackID: "track-42"},
	SchemaID(CommandSchema, SandboxMarkDeletion): SandboxMarkDeletionPayload{SandboxID: exampleSandboxID, TrackID: "track-42"},
	SchemaID(CommandSchema, SandboxExpire):       SandboxExpirePayload{SandboxID: exampleSandboxID},
	SchemaID(CommandSchema, SandboxCleanup):      SandboxCleanupPayload{},
	SchemaID(CommandSchema, SandboxSync): SandboxSyncPayload{Inventory: []InventoryItem{
		{ExternalID: "ext-1", Name: "lab-1", LabDurationHours: 4},
		{ExternalID: "ext-2", Name: "lab-2", LabDurationHours: 0.5},
	}},
	SchemaID(CommandSchema, SandboxReinstate): SandboxReinstatePayload{SandboxID: exampleSandboxID},
	SchemaID(CommandSchema, SandboxRetire):    SandboxRetirePayload{SandboxID: exampleSandboxID},
	SchemaID(CommandSchema, LayerPublished):   LayerPublishedPayload{LayerVersionPayload: exampleLayer, ARN: exampleARN, RequirementsHash: exampleHash},
	SchemaID(CommandSchema, BuildRecorded): BuildRecordedPayload{Package: "requests", Version: 3,
		Requirements: "urllib3==2.2.1\ncertifi==2024.7.4\n", RequirementsHash: exampleHash},
	SchemaID(CommandSchema, LayerDeleteRequested): LayerVersionPayload{Region: "eu-west-1", Package: "requests", Version: 2},
	SchemaID(CommandSchema, LayerRemoved):         LayerRemovedPayload{LayerVersionPayload: exampleLayer, ARN: exampleARN},
	SchemaID(CommandSchema, TimerCreate): TimerCreatePayload{
		TimerID: "order-42:reminder", GroupID: "orders", ExecuteAt: exampleTime,
		Callback: "https://hooks.example.com/due?order=42", Payload: json.RawMessage(`{"order":42}`),
		CallbackTimeout: Duration(5 * time.Second),
		RetryPolicy:     &RetryPolicy{MaxAttempts: 3, InitialInterval: Duration(time.Second), Multiplier: 2, MaxInterval: Duration(time.Minute)},
	},
	SchemaID(CommandSchema, TimerDelete): TimerDeletePayload{TimerID: "order-42:reminder"},
	SchemaID(CommandSchema, TimerDue):    TimerDuePayload{Shard: 3, TimerID: "order-42:reminder", TimerUUID: exampleTimerUUID, ExecuteAt: exampleTime},

	SchemaID(CommandSchema, OrgCreate): OrgCreatePayload{OrgID: exampleOrgID, Name: "Acme Corp", Plan: "pro", Actor: "system"},
	SchemaID(CommandSchema, UserRegister): UserRegisterPayload{OrgID: exampleOrgID, UserID: exampleUserID, Email: "ada@acme.example",
		Password: "correct horse battery staple", DisplayName: "Ada Lovelace", Role: RoleOwner, Actor: "system"},
	SchemaID(CommandSchema, UserSuspend): UserSuspendPayload{OrgID: exampleOrgID, UserID: "u-2", Actor: exampleUser},
	SchemaID(CommandSchema, ProjectCreate): ProjectCreatePayload{OrgID: exampleOrgID, ProjectID: exampleProject, Name: "Web app",
		LocalPathHint: "/Users/ada/src/web", DefaultModel: exampleModel, Actor: exampleUser},
	SchemaID(CommandSchema, SettingsUpdate): SettingsUpdatePayload{OrgID: exampleOrgID, Scope: ScopeProject, ProjectID: exampleProject,
		DefaultModel: exampleModel, ModelAllowList: []string{exampleModel, "claude-opus-4-1"}, AnthropicKeyRef: "secret-anthropic",
		NotifyPrefs: map[string]string{"task.awaiting-response": "email"}, Actor: exampleUser},
	SchemaID(CommandSchema, SecretStore): SecretStorePayload{OrgID: exampleOrgID, SecretID: "secret-anthropic", SecretType: "anthropic_key",
		Value: "sk-ant-api03-EXAMPLE", Actor: exampleUser},
	SchemaID(CommandSchema, SecretRotate): SecretRotatePayload{OrgID: exampleOrgID, SecretID: "secret-anthropic", Value: "sk-ant-api03-ROTATED", Actor: exampleUser},

	SchemaID(CommandSchema, TaskQueue): TaskQueuePayload{OrgID: exampleOrgID, TaskID: exampleTaskID, ProjectID: exampleProject,
		Prompt: "Add a migration that indexes sessions by user_id, then run the test suite.", Priority: new(70), Actor: exampleUser},
	SchemaID(CommandSchema, TaskLease): TaskLeasePayload{OrgID: exampleOrgID, AgentID: exampleAgentID, Capabilities: []string{"interactive", "git"}},
	SchemaID(CommandSchema, TaskStart): exampleTaskAgent,
	SchemaID(CommandSchema, TaskProgress): TaskProgressPayload{TaskAgentPayload: exampleTaskAgent, Message: "running the test suite",
		Lines: []LogLine{
			{Seq: 41, At: exampleTime, Stream: "stdout", Line: "ok   web/sessions 0.412s", Level: "info"},
			{Seq: 42, At: exampleTime.Add(250 * time.Millisecond), Stream: "stderr", Line: "warning: 2 deprecated calls", Level: "warn"},
		}},
	SchemaID(CommandSchema, TaskAwaitResponse): TaskQuestionPayload{TaskAgentPayload: exampleTaskAgent, Question: exampleQuest},
	SchemaID(CommandSchema, TaskRespond):       TaskResponsePayload{OrgID: exampleOrgID, TaskID: exampleTaskID, Response: "No, keep it for now.", Actor: exampleUser},
	SchemaID(CommandSchema, TaskComplete):      TaskResultPayload{TaskAgentPayload: exampleTaskAgent, Result: "Added migration 0042; 318 tests pass."},
	SchemaID(CommandSchema, TaskFail):          TaskErrorPayload{TaskAgentPayload: exampleTaskAgent, Error: "test suite failed: 3 of 318 tests"},
	SchemaID(CommandSchema, TaskCancel):        TaskCancelPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, Actor: exampleUser},
	SchemaID(CommandSchema, TaskLeaseExpire):   TaskLeaseExpiredPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID, Actor: "system"},
	SchemaID(CommandSchema, AgentHeartbeat): AgentHeartbeatPayload{OrgID: exampleOrgID, AgentID: exampleAgentID, Host: "ada-mbp.local",
		PID: 48213, Cwd: "/Users/ada/src/web", Version: "1.4.2", Capabilities: []string{"interactive", "git"}, CanInteractive: true,
		CurrentTaskID: exampleTaskID, CurrentProjectID: exampleProject},
	SchemaID(CommandSchema, AgentSilence):         AgentSilentPayload{OrgID: exampleOrgID, AgentID: exampleAgentID, LastHeartbeatAt: exampleAt, Actor: "system"},
	SchemaID(CommandSchema, NotificationMarkRead): NotificationReadPayload{OrgID: exampleOrgID, NotificationID: "notif-9", CreatedAt: exampleAt, Actor: exampleUser},

	SchemaID(CommandSchema, AccountRegister): AccountRegisterPayload{AccountID: exampleAccountID, AccountName: exampleAccountName,
		RoleARN: exampleRoleARN, UserID: exampleUserID},
	SchemaID(CommandSchema, AccountUpdate): AccountUpdatePayload{AccountID: exampleAccountID, AccountName: "Development (eu-central-1)", UserID: exampleUserID},
	SchemaID(CommandSchema, AccountTest):   AccountTestPayload{AccountID: exampleAccountID, UserID: exampleUserID},
	SchemaID(CommandSchema, ScheduleUpsert): ScheduleUpsertPayload{ScheduleID: exampleScheduleID, ScheduleName: exampleScheduleName,
		StartCron: exampleStartCron, EndCron: exampleEndCron, Timezone: exampleZone, Enabled: new(true), UserID: exampleUserID},
	SchemaID(CommandSchema, ScheduleDisable):   ScheduleRefPayload{ScheduleID: exampleScheduleID, UserID: exampleUserID},
	SchemaID(CommandSchema, ScheduleEnable):    ScheduleRefPayload{ScheduleID: exampleScheduleID, UserID: exampleUserID},
	SchemaID(CommandSchema, ScheduleDelete):    ScheduleRefPayload{ScheduleID: exampleScheduleID, UserID: exampleUserID},
	SchemaID(CommandSchema, ResourceAttach):    ResourcePayload{ScheduleID: exampleScheduleID, ResourceARN: exampleInstanceARN, UserID: exampleUserID},
	SchemaID(CommandSchema, ResourceDetach):    ResourcePayload{ScheduleID: exampleScheduleID, ResourceARN: exampleInstanceARN, UserID: exampleUserID},
	SchemaID(CommandSchema, ScheduleWindowDue): ScheduleWindowPayload{ScheduleID: exampleScheduleID, Edge: EdgeStop, WindowAt: exampleNextStop, UserID: "system"},

	SchemaID(EventSchema, SandboxAllocated): SandboxAllocatedPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1", Name: "lab-1",
		TrackID: "track-42", IdempotencyKey: "track-42", AllocatedAt: 1893553445, ExpiresAt: 1893567845},
	SchemaID(EventSchema, SandboxAllocationRejected): SandboxAllocationRejectedPayload{TrackID: "track-42", IdempotencyKey: "track-42", Reason: ReasonPoolExhausted},
	SchemaID(EventSchema, SandboxDeletionMarked): SandboxDeletionMarkedPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1",
		TrackID: "track-42", DeletionRequestedAt: 1893557045},
	SchemaID(EventSchema, SandboxDeletionRejected): SandboxDeletionRejectedPayload{SandboxID: exampleSandboxID, TrackID: "track-7", Reason: ReasonNotOwner},
	SchemaID(EventSchema, SandboxExpired): SandboxExpiredPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1", TrackID: "track-42",
		AllocatedAt: 1893553445, DeletionRequestedAt: 1893567845},
	SchemaID(EventSchema, SandboxDeleted): SandboxDeletedPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1"},
	SchemaID(EventSchema, SandboxDeletionFailed): SandboxDeletionFailedPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1",
		DeletionRetryCount: 2, Reason: "provider answered 503"},
	SchemaID(EventSchema, SandboxSynced): SandboxSyncedPayload{Added: []string{exampleSandboxID}, Staled: []string{}},
	SchemaID(EventSchema, SandboxCleanupStuck): SandboxCleanupStuckPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1",
		DeletionRetryCount: 10, LastError: "provider answered 503"},
	SchemaID(EventSchema, SandboxReinstated):        SandboxReinstatedPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1", Name: "lab-1"},
	SchemaID(EventSchema, SandboxReinstateRejected): SandboxRejectedPayload{SandboxID: exampleSandboxID, Reason: ReasonWrongState},
	SchemaID(EventSchema, SandboxRetired):           SandboxRetiredPayload{SandboxID: exampleSandboxID, ExternalID: "ext-1"},
	SchemaID(EventSchema, SandboxRetireRejected):    SandboxRejectedPayload{SandboxID: exampleSandboxID, Reason: ReasonListed},

	SchemaID(EventSchema, LayerPublishedEvent):  LayerPublishedEventPayload{LayerVersionPayload: exampleLayer, ARN: exampleARN, Latest: true, Deprecated: 2},
	SchemaID(EventSchema, LayerPublishRejected): LayerRejectedPayload{Region: "eu-west-1", Package: "requests", Version: 3, Reason: ReasonAlreadyRecorded},
	SchemaID(EventSchema, BuildRecordedEvent):   BuildRecordedEventPayload{Package: "requests", Version: 3, RequirementsHash: exampleHash, Latest: true},
	SchemaID(EventSchema, BuildRecordRejected):  LayerRejectedPayload{Package: "requests", Version: 3, Reason: ReasonAlreadyRecorded},
	SchemaID(EventSchema, LayerDeletionMarked):  LayerVersionPayload{Region: "eu-west-1", Package: "requests", Version: 2},
	SchemaID(EventSchema, LayerDeleteRejected):  LayerRejectedPayload{Region: "eu-west-1", Package: "requests", Version: 3, Reason: ReasonIsLatest},
	SchemaID(EventSchema, LayerVersionDeleted): LayerRemovedPayload{LayerVersionPayload: LayerVersionPayload{Region: "eu-west-1", Package: "requests", Version: 2},
		ARN: "arn:aws:lambda:eu-west-1:123456789012:layer:requests:2"},
	SchemaID(EventSchema, LayerVersionDeleteFail): LayerRejectedPayload{Region: "eu-west-1", Package: "requests", Version: 2, Reason: "AccessDeniedException: not authorized to perform lambda:DeleteLayerVersion"},

	SchemaID(EventSchema, TimerCreated): TimerCreatedPayload{TimerID: "order-42:reminder", TimerUUID: exampleTimerUUID, GroupID: "orders",
		Shard: 3, ExecuteAt: exampleTime, Callback: "https://hooks.example.com/due?order=42"},
	SchemaID(EventSchema, TimerDeleted): TimerDeletedPayload{TimerID: "order-42:reminder", TimerUUID: exampleTimerUUID, Shard: 3},
	SchemaID(EventSchema, TimerFired): TimerFiredPayload{TimerID: "order-42:reminder", TimerUUID: exampleTimerUUID, Shard: 3,
		ExecuteAt: exampleTime, FiredAt: exampleTime.Add(120 * time.Millisecond), Attempts: 1},
	SchemaID(EventSchema, TimerFailed): TimerFailedPayload{TimerID: "order-42:reminder", TimerUUID: exampleTimerUUID, Shard: 3,
		ExecuteAt: exampleTime.Add(7 * time.Second), Attempts: 3, LastError: "callback answered 404"},

	SchemaID(EventSchema, OrgEventCreated): OrgCreatedPayload{OrgID: exampleOrgID, Name: "Acme Corp", Plan: "pro", CreatedAt: exampleAt},
	SchemaID(EventSchema, UserRegistered): UserRegisteredPayload{OrgID: exampleOrgID, UserID: exampleUserID, Email: "ada@acme.example",
		DisplayName: "Ada Lovelace", Role: RoleOwner, CreatedAt: exampleAt},
	SchemaID(EventSchema, UserSuspended): UserSuspendedPayload{OrgID: exampleOrgID, UserID: "u-2", By: exampleUser},
	SchemaID(EventSchema, ProjectCreated): ProjectCreatedPayload{OrgID: exampleOrgID, ProjectID: exampleProject, Name: "Web app",
		LocalPathHint: "/Users/ada/src/web", DefaultModel: exampleModel, CreatedAt: exampleAt},
	SchemaID(EventSchema, SettingsUpdated): SettingsUpdatedPayload{OrgID: exampleOrgID, Scope: ScopeProject, ProjectID: exampleProject,
		DefaultModel: exampleModel, ModelAllowList: []string{exampleModel, "claude-opus-4-1"}, UpdatedAt: exampleAt},
	SchemaID(EventSchema, SecretStored):  SecretStoredPayload{OrgID: exampleOrgID, SecretID: "secret-anthropic", SecretType: "anthropic_key", Encrypted: true, UpdatedAt: exampleAt},
	SchemaID(EventSchema, SecretRotated): SecretStoredPayload{OrgID: exampleOrgID, SecretID: "secret-anthropic", SecretType: "anthropic_key", Encrypted: true, UpdatedAt: exampleAt},
	SchemaID(EventSchema, OrgRejected):   OrgRejectedPayload{Command: UserRegister, OrgID: exampleOrgID, ID: "u-3", Actor: exampleUser, Reason: ReasonEmailTaken},

	SchemaID(EventSchema, TaskQueued): TaskQueuedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, ProjectID: exampleProject,
		Title: "Add a migration that indexes sessions by user_id, then run the test suite.", Priority: 70, Model: exampleModel, CreatedAt: exampleAt},
	SchemaID(EventSchema, TaskLeased): TaskLeasedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID, ProjectID: exampleProject,
		Title: "Add a migration that indexes sessions by user_id, then run the test suite.", Prompt: "Add a migration that indexes sessions by user_id, then run the test suite.",
		Priority: 70, Model: exampleModel, Attempts: 1, LeaseExpiresAt: exampleLeaseAt, CorrelationID: "4b6c1f0e-8d2a-4c55-9b1e-2f7a9d3c6e10"},
	SchemaID(EventSchema, TaskLeaseEmpty): TaskLeaseEmptyPayload{OrgID: exampleOrgID, AgentID: exampleAgentID},
	SchemaID(EventSchema, TaskStarted): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "RUNNING", At: exampleAt, By: "agent:" + exampleAgentID},
	SchemaID(EventSchema, TaskProgressed): TaskProgressedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		Message: "running the test suite", Lines: 2, FirstSeq: 41, LastSeq: 42, At: exampleAt},
	SchemaID(EventSchema, TaskAwaitingResponse): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "AWAITING_RESPONSE", At: exampleAt, By: "agent:" + exampleAgentID, Question: exampleQuest},
	SchemaID(EventSchema, TaskResponseReceived): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "RUNNING", At: exampleAt, By: exampleUser, Response: "No, keep it for now."},
	SchemaID(EventSchema, TaskCompleted): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "COMPLETED", At: exampleAt, By: "agent:" + exampleAgentID, Result: "Added migration 0042; 318 tests pass."},
	SchemaID(EventSchema, TaskFailed): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "ERROR", At: exampleAt, By: "agent:" + exampleAgentID, Error: "test suite failed: 3 of 318 tests"},
	SchemaID(EventSchema, TaskCancelled): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "CANCELLED", At: exampleAt, By: exampleUser},
	SchemaID(EventSchema, TaskRequeued): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "QUEUED", At: exampleLeaseAt, By: "system", Attempts: 1},
	SchemaID(EventSchema, TaskStuck): TaskChangedPayload{OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: exampleAgentID,
		State: "ERROR", At: exampleLeaseAt, By: "system", Error: "lease expired after the last attempt", Attempts: 3},
	SchemaID(EventSchema, AgentStale):   AgentStatusPayload{OrgID: exampleOrgID, AgentID: exampleAgentID, Status: "stale", LastHeartbeatAt: exampleAt},
	SchemaID(EventSchema, AgentOffline): AgentStatusPayload{OrgID: exampleOrgID, AgentID: exampleAgentID, Status: "offline", LastHeartbeatAt: exampleAt},
	SchemaID(EventSchema, TaskRejected): TaskRejectedPayload{Command: TaskComplete, OrgID: exampleOrgID, TaskID: exampleTaskID, AgentID: "agent-8",
		Actor: "agent:agent-8", Reason: ReasonNotLeaseholder},

	SchemaID(EventSchema, AccountRegistered): AccountPayload{AccountID: exampleAccountID, AccountName: exampleAccountName,
		RoleARN: exampleRoleARN, Status: AccountPending, CreatedAt: exampleAt, UpdatedAt: exampleAt},
	SchemaID(EventSchema, AccountUpdated): AccountPayload{AccountID: exampleAccountID, AccountName: "Development (eu-central-1)",
		RoleARN: exampleRoleARN, Status: AccountActive, CreatedAt: exampleAt, UpdatedAt: exampleNextStart},
	SchemaID(EventSchema, AccountTested): AccountTestedPayload{AccountID: exampleAccountID, Status: AccountActive,
		Identity: "arn:aws:sts::123456789012:assumed-role/nucleus-scheduler/transit-nucleus", TestedAt: exampleAt},
	SchemaID(EventSchema, ScheduleUpserted): exampleSchedulePayload,
	SchemaID(EventSchema, ScheduleEnabled):  exampleSchedulePayload,
	SchemaID(EventSchema, ScheduleDisabled): SchedulePayload{ScheduleID: exampleScheduleID, ScheduleName: exampleScheduleName,
		StartCron: exampleStartCron, EndCron: exampleEndCron, Timezone: exampleZone, UpdatedAt: exampleAt},
	SchemaID(EventSchema, ScheduleDeleted):  ScheduleDeletedPayload{ScheduleID: exampleScheduleID, ScheduleName: exampleScheduleName, Resources: 2, DeletedAt: exampleAt},
	SchemaID(EventSchema, ResourceAttached): exampleResourceEvent,
	SchemaID(EventSchema, ResourceDetached): exampleResourceEvent,
	SchemaID(EventSchema, ScheduleWindowExecuted): WindowExecutedPayload{ScheduleID: exampleScheduleID, Edge: EdgeStop, WindowAt: exampleNextStop,
		Results: []ExecutionResult{
			{ResourceARN: exampleInstanceARN, ResourceType: ResourceEC2Instance, Status: ExecSuccess},
			{ResourceARN: exampleDBARN, ResourceType: ResourceRDSInstance, Status: ExecFail,
				Error: "stop " + exampleDBARN + ": operation error RDS: StopDBInstance, https response error StatusCode: 400, " +
					"RequestID: 5d3c7b2e-9a41-4f6e-8c0d-2b7e1f4a9c53, InvalidDBInstanceState: Instance dev-orders is not in available state."},
		},
		NextAt: "2030-01-03T18:00:00.000Z"},
	SchemaID(EventSchema, NucleusRejected): NucleusRejectedPayload{Command: ResourceAttach, ID: exampleScheduleID, UserID: exampleUserID,
		Reason: ReasonAccountNotFound, Detail: "arn:aws:ec2:eu-central-1:210987654321:instance/i-0fed987cba6543210"},
}
