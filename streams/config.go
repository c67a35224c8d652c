package streams

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/google/uuid"
)

// TableAPI is the part of the DynamoDB client the subscriber uses: it
// finds a table's stream.
type TableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// StreamsAPI is the part of the DynamoDB Streams client the subscriber
// uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Trimmed reports records the stream dropped (its 24 h retention) before
// this consumer group read them. They are lost; reading goes on from the
// oldest record still in the shard.
type Trimmed struct {
	// Table, StreamARN and ShardID say where.
	Table, StreamARN, ShardID string
	// After is the last sequence number read from the shard before the
	// gap, "" if none was.
	After string
	// Err is the error that revealed it (a TrimmedDataAccessException, or a
	// ResourceNotFoundException for a shard the stream no longer has).
	Err error
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Tables looks up each subscribed table's stream (a *dynamodb.Client).
	// Required.
	Tables TableAPI
	// Streams reads the streams (a *dynamodbstreams.Client). Required.
	Streams StreamsAPI
	// Leases keeps shard leases and checkpoints, shared by every instance
	// of the consumer group (NewDynamoDBLeaseStore). Required.
	Leases LeaseStore
	// ConsumerGroup names the consumers that share a stream's records
	// between them: each record goes to one instance of a group, and each
	// group keeps its own checkpoints. Required.
	ConsumerGroup string
	// OwnerID identifies this instance in leases; it must differ between
	// instances running at the same time. Default: hostname and a random
	// suffix.
	OwnerID string

	// LeaseDuration is how long a shard lease lasts without renewal: how
	// long a crashed instance's shards wait before another takes them.
	// Instances' clocks must agree to well within a tenth of it. Default 20s.
	LeaseDuration time.Duration
	// RenewInterval is how often leases are renewed and the shards
	// re-balanced between instances; less than half LeaseDuration.
	// Default 5s.
	RenewInterval time.Duration
	// DiscoveryInterval is how often the stream is described to find new
	// shards. Default 5s.
	DiscoveryInterval time.Duration
	// PollInterval is the wait after a read that returned no records.
	// DynamoDB Streams allows about 5 reads a second per shard. Default 1s.
	PollInterval time.Duration
	// BatchSize is the most records one read returns (1 to 1000). Default
	// 1000.
	BatchSize int32
	// NackBackoff is the wait before a nacked record is delivered again;
	// it doubles with each nack of the same record up to MaxNackBackoff.
	// Defaults 1s and 30s.
	NackBackoff    time.Duration
	MaxNackBackoff time.Duration
	// CheckpointEvery and CheckpointInterval batch checkpoints: the acks
	// of a shard are written to its lease once CheckpointEvery of them
	// are pending or the first of them is CheckpointInterval old,
	// whichever comes first, and always at the shard's end and before
	// its lease is handed back (Close, Drain, re-balancing). A crash
	// loses at most that window of checkpoints, and the new holder
	// delivers those records again: fine for consumers idempotent by
	// the message UUID (the event ID), as transit's fan-in rules are. A
	// lease renewal carries the pending acks, so the window is never
	// older than RenewInterval either. CheckpointEvery 1 checkpoints
	// every ack. Defaults 100 and 1s.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// CloseTimeout bounds how long Close (or a shard handed to another
	// instance) waits for a delivered record to be acked. Default 30s.
	CloseTimeout time.Duration
	// OnTrimmed, when set, is called (from the shard's goroutine) for
	// every gap of trimmed records; Subscriber.TrimmedCount counts them too.
	OnTrimmed func(Trimmed)
}

func (c *SubscriberConfig) setDefaults() {
	if c.OwnerID == "" {
		host, _ := os.Hostname()
		c.OwnerID = host + "-" + uuid.NewString()[:8]
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 20 * time.Second
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = 5 * time.Second
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 5 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.NackBackoff == 0 {
		c.NackBackoff = time.Second
	}
	if c.MaxNackBackoff == 0 {
		c.MaxNackBackoff = 30 * time.Second
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 100
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
}

// Validate reports every problem with the configuration at once.
func (c SubscriberConfig) Validate() error {
	var errs []error
	if c.Tables == nil {
		errs = append(errs, errors.New("missing Tables (a DynamoDB client)"))
	}
	if c.Streams == nil {
		errs = append(errs, errors.New("missing Streams (a DynamoDB Streams client)"))
	}
	if c.Leases == nil {
		errs = append(errs, errors.New("missing Leases (a lease store)"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("missing ConsumerGroup"))
	}
	if c.OwnerID == "" {
		errs = append(errs, errors.New("missing OwnerID"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration}, {"RenewInterval", c.RenewInterval},
		{"DiscoveryInterval", c.DiscoveryInterval}, {"PollInterval", c.PollInterval},
		{"NackBackoff", c.NackBackoff}, {"MaxNackBackoff", c.MaxNackBackoff}, {"CloseTimeout", c.CloseTimeout},
		{"CheckpointInterval", c.CheckpointInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	// Two renewals per lease: one failed write must not lose the lease.
	if c.RenewInterval > 0 && c.LeaseDuration > 0 && 2*c.RenewInterval > c.LeaseDuration {
		errs = append(errs, fmt.Errorf("RenewInterval (%s) must be at most half LeaseDuration (%s)", c.RenewInterval, c.LeaseDuration))
	}
	if c.NackBackoff > 0 && c.MaxNackBackoff > 0 && c.MaxNackBackoff < c.NackBackoff {
		errs = append(errs, fmt.Errorf("MaxNackBackoff (%s) must be at least NackBackoff (%s)", c.MaxNackBackoff, c.NackBackoff))
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("BatchSize must be 1 to 1000, got %d", c.BatchSize))
	}
	if c.CheckpointEvery < 1 {
		errs = append(errs, fmt.Errorf("CheckpointEvery must be at least 1, got %d", c.CheckpointEvery))
	}
	return errors.Join(errs...)
}
