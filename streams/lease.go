package streams

import (
	"context"
	"errors"
	"time"
)

// ShardEnd is the checkpoint of a finished shard: read to its end, every
// record acked and checkpointed. Its children may then be read.
const ShardEnd = "SHARD_END"

// ErrLeaseLost is returned by a LeaseStore write whose condition failed:
// the lease has moved on (another owner took it, or it was renewed or
// released since it was read). The caller must stop reading the shard.
var ErrLeaseLost = errors.New("shard lease lost")

// Lease is one shard's lease in one consumer group.
type Lease struct {
	// Group is the consumer group; StreamARN the stream; ShardID the shard.
	Group, StreamARN, ShardID string
	// Owner is the instance holding the lease, "" when it is free.
	Owner string
	// Version is bumped by every write, and every write is conditioned on
	// it; 0 means no lease was ever stored for the shard.
	Version int64
	// ExpiresAt is when the lease lapses unless renewed; after it another
	// instance may take the shard.
	ExpiresAt time.Time
	// Checkpoint is the sequence number of the last acked record as of the
	// last checkpoint (acks are written in batches), ShardEnd once the
	// shard is finished, or "" before the first checkpoint.
	Checkpoint string
}

// Snapshot is everything a LeaseStore holds for one group and stream.
type Snapshot struct {
	// Leases by shard ID.
	Leases map[string]Lease
	// Owners maps each instance that has announced itself with Heartbeat
	// to when its heartbeat lapses.
	Owners map[string]time.Time
}

// LeaseStore keeps shard leases and checkpoints, shared by every instance
// of a consumer group. Every write but Heartbeat is conditional: it
// succeeds only if the lease is still as given (same Version, and for
// Renew, Checkpoint and Release, same Owner), and returns ErrLeaseLost
// otherwise. Implementations must be safe for concurrent use.
type LeaseStore interface {
	// List reads the leases and heartbeats of group on streamARN,
	// strongly consistent.
	List(ctx context.Context, group, streamARN string) (Snapshot, error)
	// Take gives seen's shard to owner until expires. seen is the lease as
	// read (Version 0: none stored yet); it must be free (no owner, or
	// expired) at the time of the write.
	Take(ctx context.Context, seen Lease, owner string, expires time.Time) (Lease, error)
	// Renew extends a held lease to expires.
	Renew(ctx context.Context, held Lease, expires time.Time) (Lease, error)
	// Checkpoint records sequenceNumber (or ShardEnd) on a held lease and
	// extends it to expires.
	Checkpoint(ctx context.Context, held Lease, sequenceNumber string, expires time.Time) (Lease, error)
	// Release frees a held lease, keeping its checkpoint, so another
	// instance may take it at once.
	Release(ctx context.Context, held Lease) error
	// Heartbeat announces owner as a live instance of group on streamARN
	// until expires; a past expires withdraws it.
	Heartbeat(ctx context.Context, group, streamARN, owner string, expires time.Time) error
}
