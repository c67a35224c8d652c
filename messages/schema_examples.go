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
}
