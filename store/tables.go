package store

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table describes a DynamoDB table. It is the single definition read by
// provisioning, the store and the tests.
type Table struct {
	// Name is the table's name before the stack prefix.
	Name          string
	PartitionKey  Attribute
	SortKey       Attribute
	GlobalIndexes []Index
	// LocalIndexes share the table's partition key; only their sort key
	// is given.
	LocalIndexes []Index
	// TTLAttribute, when set, is the epoch-seconds attribute DynamoDB
	// expires items by.
	TTLAttribute string
	// Stream, when set, enables the table's stream with this view.
	Stream types.StreamViewType
	// Capacity is the table's read and write units when the tables are
	// provisioned (Capacity.Provisioned); auto-scaling may raise it.
	Capacity Throughput
}

// Attribute is a key attribute and its scalar type.
type Attribute struct {
	Name string
	Type types.ScalarAttributeType
}

// Index is a secondary index.
type Index struct {
	Name         string
	PartitionKey Attribute
	SortKey      Attribute
	// Include names the attributes the index carries besides the keys;
	// none means all of them. A write that changes none of its
	// attributes costs the index nothing.
	Include []string
	// Capacity is a global index's units when the tables are
	// provisioned; zero takes its table's (Capacity.index). Its writes
	// must be at least its table's: every table write that touches the
	// index costs it a write too, and an index short of write units
	// throttles the table's writes.
	Capacity Throughput
}

// Projection is the index's projection as DynamoDB takes it.
func (ix Index) Projection() *types.Projection {
	if len(ix.Include) == 0 {
		return &types.Projection{ProjectionType: types.ProjectionTypeAll}
	}
	return &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ix.Include}
}

func str(name string) Attribute { return Attribute{Name: name, Type: types.ScalarAttributeTypeS} }
func num(name string) Attribute { return Attribute{Name: name, Type: types.ScalarAttributeTypeN} }

// SandboxPool is the sandbox broker's table (docs/sandbox.md).
var SandboxPool = Table{
	Name:         "SandboxPool",
	PartitionKey: str("PK"),
	SortKey:      str("SK"),
	GlobalIndexes: []Index{
		{Name: "StatusIndex", PartitionKey: str("status"), SortKey: num("allocated_at"), Capacity: sandboxIndexCapacity},
		{Name: "TrackIndex", PartitionKey: str("allocated_to_track"), SortKey: num("allocated_at"), Capacity: sandboxIndexCapacity},
		{Name: "IdempotencyIndex", PartitionKey: str("idempotency_key"), SortKey: num("allocated_at"), Capacity: sandboxIndexCapacity},
	},
	Stream: types.StreamViewTypeNewAndOldImages,
	// The sandbox table's design sets about 10 write units for the table
	// and 20 read units for each index; it names no table reads, so they
	// match its writes.
	Capacity: Throughput{Read: 10, Write: 10},
}

// sandboxIndexCapacity is each SandboxPool index's: the design's 20 reads,
// and the table's writes, which every write to the table also costs the
// index.
var sandboxIndexCapacity = Throughput{Read: 20, Write: 10}

// Audit records the outcome of every command of every domain
// (docs/delivery.md). The item is keyed by command ID so that
// writing it in a transition's transaction makes the transition
// effectively-once; see DECISIONS.md.
var Audit = Table{
	Name:         "Audit",
	PartitionKey: str("pk"),
	SortKey:      str("sk"),
	GlobalIndexes: []Index{
		// The global chronological view, spread over AuditGlobalKeys
		// keys so no single partition takes every write.
		{Name: "GlobalIndex", PartitionKey: str("gsi1pk"), SortKey: str("gsi1sk")},
		// Logs by entity: what happened to one sandbox, layer or timer.
		{Name: "EntityIndex", PartitionKey: str("entity"), SortKey: str("gsi1sk")},
		// A correlation's outcomes in time order, for `transit trace`.
		// Sparse: only commands in a chain they did not start carry
		// chain (DECISIONS.md).
		{Name: "CorrelationIndex", PartitionKey: str("chain"), SortKey: str("gsi1sk")},
	},
	TTLAttribute: "expire_at",
	Capacity:     defaultCapacity,
}

// Layers holds layer versions and builds (docs/layers.md):
// pk/sk patterns, the v0 pointer items, and two sparse GSIs on dplySts
// (only active layer versions carry it). Its stream feeds the fan-in,
// which turns a layer version's TTL removal into layer.removed.
var Layers = Table{
	Name:         "Layers",
	PartitionKey: str("pk"),
	SortKey:      str("sk"),
	GlobalIndexes: []Index{
		{Name: "PackageStatusIndex", PartitionKey: str("pckg"), SortKey: str("dplySts")},
		{Name: "RegionStatusIndex", PartitionKey: str("rgn"), SortKey: str("dplySts")},
	},
	TTLAttribute: "ttl",
	Stream:       types.StreamViewTypeNewAndOldImages,
	Capacity:     defaultCapacity,
}

// Timers holds the durable timers and their shards, as
// docs/timers.md shows: one partition per shard (shard_id), the shard's
// ownership record at sort_key SHARD and its timers at TIMER#<timer_id>.
// ExecuteAtIndex orders a shard's timers by due time; its sort key
// carries the timer's uuid after the time, so two timers due in the same
// millisecond are distinct and a page boundary never splits a tie. Shard
// records have no such attribute and stay out of the index. The index
// carries what a poll sends and `transit query timers` lists, not the
// firing hold, so taking a firing writes the table alone.
var Timers = Table{
	Name:         "timers",
	PartitionKey: num("shard_id"),
	SortKey:      str("sort_key"),
	LocalIndexes: []Index{
		{Name: "ExecuteAtIndex", SortKey: str("timer_execute_at_with_uuid"), Include: []string{
			"timer_id", "timer_uuid", "timer_execute_at", "timer_attempts", "timer_callback_url", "timer_correlation_id", "timer_created_by",
		}},
	},
	Capacity: defaultCapacity,
}

// The agent-task system's tables, named, keyed and indexed as the
// system's design names them (docs/orgs.md, docs/tasks.md): the
// directory of orgs, users, projects, settings and secrets, then the
// work. Attributes are camelCase, as that design has them. Their
// provisioned figures are that design's; each index takes its table's.
var (
	// Users holds users at USER#<userId> and, at EMAIL#<orgId>#<email>,
	// the claims that keep an email unique within its org.
	Users = Table{
		Name:          "Users",
		PartitionKey:  str("PK"),
		GlobalIndexes: []Index{{Name: "email-index", PartitionKey: str("orgId"), SortKey: str("email")}},
		Capacity:      Throughput{Read: 5, Write: 5},
	}
	Orgs     = Table{Name: "Orgs", PartitionKey: str("PK"), Capacity: Throughput{Read: 5, Write: 5}}
	Projects = Table{
		Name:          "Projects",
		PartitionKey:  str("PK"),
		SortKey:       str("SK"),
		GlobalIndexes: []Index{{Name: "project-lookup", PartitionKey: str("projectId")}},
		Capacity:      Throughput{Read: 10, Write: 5},
	}
	Settings = Table{Name: "Settings", PartitionKey: str("PK"), SortKey: str("SK"), Capacity: Throughput{Read: 5, Write: 5}}
	Secrets  = Table{Name: "Secrets", PartitionKey: str("PK"), SortKey: str("SK"), Capacity: Throughput{Read: 5, Write: 5}}
	// Agents expire an hour after an agent's last heartbeat.
	Agents = Table{
		Name:          "Agents",
		PartitionKey:  str("PK"),
		SortKey:       str("SK"),
		GlobalIndexes: []Index{{Name: "status-index", PartitionKey: str("status"), SortKey: str("lastHeartbeatAt")}},
		TTLAttribute:  "ttl",
		Capacity:      Throughput{Read: 10, Write: 20},
	}
	Tasks = Table{
		Name:         "Tasks",
		PartitionKey: str("PK"),
		SortKey:      str("SK"),
		GlobalIndexes: []Index{
			{Name: "project-tasks", PartitionKey: str("projectId"), SortKey: str("updatedAt")},
			{Name: "agent-tasks", PartitionKey: str("agentId"), SortKey: str("updatedAt")},
			{Name: "state-queue", PartitionKey: str("state"), SortKey: str("createdAt")},
		},
		Capacity: Throughput{Read: 20, Write: 20},
	}
	// Queue's sort key orders an org's items by age alone; ready-index,
	// sparse (only items waiting for a lease carry readyKey), orders them
	// by priority, then age, so a lease reads the most urgent first
	// (DECISIONS.md).
	Queue = Table{
		Name:         "Queue",
		PartitionKey: str("PK"),
		SortKey:      str("SK"),
		GlobalIndexes: []Index{
			{Name: "lease-expiry", PartitionKey: str("leaseOwner"), SortKey: str("leaseExpiresAt")},
			{Name: "ready-index", PartitionKey: str("PK"), SortKey: str("readyKey")},
		},
		Capacity: Throughput{Read: 20, Write: 20},
	}
	TaskEvents = Table{Name: "TaskEvents", PartitionKey: str("PK"), SortKey: str("SK"), Capacity: Throughput{Read: 50, Write: 50}}
	Logs       = Table{Name: "Logs", PartitionKey: str("PK"), SortKey: str("SK"), Capacity: Throughput{Read: 100, Write: 100}}
	// Notifications expire seven days after they are sent.
	Notifications = Table{
		Name:          "Notifications",
		PartitionKey:  str("PK"),
		SortKey:       str("SK"),
		GlobalIndexes: []Index{{Name: "user-notifications", PartitionKey: str("userId"), SortKey: str("createdAt")}},
		TTLAttribute:  "ttl",
		Capacity:      Throughput{Read: 20, Write: 20},
	}
)

// The Nucleus platform's tables (docs/nucleus.md), keyed as its design
// has them: accounts, schedules and their targeted resources in one
// table, and the audit trail of every change and execution, kept 30 days.
var (
	NucleusApp = Table{
		Name:         "NucleusAppTable",
		PartitionKey: str("pk"),
		SortKey:      str("sk"),
		// GSI1 lists accounts and schedules by name (TYPE#ACCOUNT,
		// TYPE#SCHEDULE) and an account's resources (ACCOUNT#<id>).
		GlobalIndexes: []Index{{Name: "GSI1", PartitionKey: str("gsi1pk"), SortKey: str("gsi1sk")}},
		Capacity:      defaultCapacity,
	}
	NucleusAudit = Table{
		Name:         "NucleusAuditTable",
		PartitionKey: str("pk"),
		SortKey:      str("sk"),
		// GSI1 is the global chronological view, spread over
		// AuditGlobalKeys partition keys (DECISIONS.md).
		GlobalIndexes: []Index{{Name: "GSI1", PartitionKey: str("gsi1pk"), SortKey: str("gsi1sk")}},
		TTLAttribute:  "expire_at",
		Capacity:      defaultCapacity,
	}
)

// Tables lists every table transit provisions.
var Tables = []Table{SandboxPool, Audit, Layers, StreamLeases, Timers,
	Users, Orgs, Projects, Settings, Secrets, Agents, Tasks, Queue, TaskEvents, Logs, Notifications,
	NucleusApp, NucleusAudit}

// TableName is the full name of t in the stack named by prefix.
func TableName(prefix string, t Table) string { return prefix + "-" + t.Name }

// TableNames names every table of Tables in the stack named by prefix.
func TableNames(prefix string) []string {
	names := make([]string, len(Tables))
	for i, t := range Tables {
		names[i] = TableName(prefix, t)
	}
	return names
}
