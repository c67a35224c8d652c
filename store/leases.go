package store

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// StreamLeases holds the shard leases and checkpoints of the DynamoDB
// Streams fan-in (package streams), for every consumer group and stream.
//
//   - pk = "<consumer group>#<stream ARN>": one partition per group and
//     stream, so a subscriber reads everything it coordinates on with one
//     Query, and a re-enabled stream (a new ARN) starts with fresh leases.
//   - sk = "shard#<shard ID>": a shard's lease: owner (absent when free),
//     version (bumped by every write; each write is conditioned on the
//     version it read), lease_expires_at (Unix milliseconds) and checkpoint
//     (the sequence number of the last acked record written, in batches,
//     or SHARD_END once the shard is finished).
//   - sk = "owner#<owner ID>": an instance's heartbeat (lease_expires_at),
//     so instances know how many share the stream and split its shards.
//
// expire_at (Unix seconds) is set only on finished leases and heartbeats,
// long after the stream has dropped the shard (24 h retention), so the
// table does not grow forever.
var StreamLeases = Table{
	Name:         "StreamLeases",
	PartitionKey: str("pk"),
	SortKey:      str("sk"),
	TTLAttribute: "expire_at",
	Capacity:     defaultCapacity,
}

// ProvisionTable creates the one table t named name, with its indexes,
// stream and TTL, on demand, and waits until it is active; as Provision
// does for every table of Tables. For tests and tools that need a single
// table.
func ProvisionTable(ctx context.Context, db *dynamodb.Client, name string, t Table) error {
	return provisionTable(ctx, db, name, t, Capacity{})
}
