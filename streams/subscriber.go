package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

var _ message.Subscriber = (*Subscriber)(nil)

// ErrNoStream is returned by Subscribe for a table without a stream.
var ErrNoStream = errors.New("table has no stream")

// Subscriber is a Watermill message.Subscriber over DynamoDB Streams: the
// topic is a table name, and each change to the table's items becomes a
// message whose payload is a Record.
//
// Within a shard, records are delivered in order and one at a time: the
// next only after the previous one is acked; a nacked record is delivered
// again after a backoff. A child shard is read only once its parent is
// finished. Acks are checkpointed in the lease store in batches, and
// before a shard is handed back, so a clean restart resumes after the
// last acked record and a crash re-reads at most one batch (see
// SubscriberConfig.CheckpointEvery); instances of one consumer group
// split the shards between them by leases: a shard is read by one
// instance at a time.
type Subscriber struct {
	config SubscriberConfig
	logger watermill.LoggerAdapter

	mu      sync.Mutex
	streams map[string]*stream
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	// draining is closed by Drain: every stream hands its shards back
	// and reads no more, its channel open until Close.
	draining  chan struct{}
	drainOnce sync.Once

	trimmed atomic.Int64
}

// NewSubscriber returns a subscriber configured by config (defaults filled
// in, then validated). A nil logger logs nothing.
func NewSubscriber(config SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("streams subscriber config: %w", err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &Subscriber{
		config:   config,
		logger:   logger.With(watermill.LogFields{"consumer_group": config.ConsumerGroup, "owner": config.OwnerID}),
		streams:  map[string]*stream{},
		closing:  make(chan struct{}),
		draining: make(chan struct{}),
	}, nil
}

// Subscribe reads the stream of the table named topic. It returns once the
// stream and the lease store answered. Each topic can be subscribed once
// per Subscriber at a time.
//
// It keeps Watermill's Subscriber contract (message/pubsub.go):
//   - Each message's context carries ctx's values and is cancelled when
//     ctx is, when the message is acked or nacked, and when the subscriber
//     stops waiting for its verdict (see Close; a lost lease).
//   - Once ctx is cancelled or Close has begun, no record is handed out:
//     the record already delivered may still be acked (up to
//     CloseTimeout), then the shards are handed back and the channel is
//     closed. The topic is released before the channel closes, so the
//     table may be subscribed again as soon as the channel is closed.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return nil, errors.New("streams subscriber closed")
	case <-s.draining:
		return nil, errors.New("streams subscriber draining")
	default:
	}
	if _, ok := s.streams[topic]; ok {
		return nil, fmt.Errorf("table %s: already subscribed", topic)
	}
	arn, err := s.streamARN(ctx, topic)
	if err != nil {
		return nil, err
	}
	st := newStream(s, topic, arn, ctx)
	if err := st.start(ctx); err != nil {
		st.cancel()
		return nil, fmt.Errorf("table %s: %w", topic, err)
	}
	s.streams[topic] = st
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		st.run()
		// Released before the channel closes: a Subscribe made once the
		// channel is seen closed must not find the topic still taken.
		s.mu.Lock()
		delete(s.streams, topic)
		s.mu.Unlock()
		close(st.out)
	}()
	return st.out, nil
}

func (s *Subscriber) streamARN(ctx context.Context, table string) (string, error) {
	out, err := s.config.Tables.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", table, err)
	}
	t := out.Table
	if t == nil || aws.ToString(t.LatestStreamArn) == "" ||
		(t.StreamSpecification != nil && !aws.ToBool(t.StreamSpecification.StreamEnabled)) {
		return "", fmt.Errorf("table %s: %w (enable one with a NEW_AND_OLD_IMAGES view)", table, ErrNoStream)
	}
	return aws.ToString(t.LatestStreamArn), nil
}

// Drain stops reading every stream and returns once each shard's
// delivered record has its verdict and checkpoint (waiting up to
// CloseTimeout for it, as Close does) and the shards are handed back, or
// when ctx ends. The channels stay open until Close. The router's
// shutdown drains it beside the SQS subscriber, so a fan-in handler in
// flight finishes with its publisher and context intact.
func (s *Subscriber) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.drainOnce.Do(func() { close(s.draining) })
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	// At once, not when each coordinator next looks: from here no record
	// is handed out.
	for _, st := range streams {
		st.stopWorkers()
	}
	for _, st := range streams {
		select {
		case <-st.drained:
		case <-ctx.Done():
			return fmt.Errorf("drain streams: %w", ctx.Err())
		}
	}
	return nil
}

// Close stops reading every stream: from its start no record is handed
// out; each shard waits up to CloseTimeout for its delivered record to be
// acked and checkpointed (the record's context stays live meanwhile, and
// is cancelled when the wait ends), then its lease is released (best
// effort) so another instance takes it at once. Close returns when every
// output channel is closed, within a bound: CloseTimeout for the verdicts,
// then the lease store writes of handing the shards back, each bounded by
// the smaller of 10s and half LeaseDuration (a failing checkpoint is
// retried only while the lease lasts).
func (s *Subscriber) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.closing)
		for _, st := range s.streams {
			st.cancel()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return nil
}

// ShardLag is how far behind its table's changes the reading of one
// shard is.
type ShardLag struct {
	Table, ShardID string
	// Lag is the age of the record being delivered, zero once a read of
	// the shard found no record (caught up). It is as precise as the
	// records' creation times: AWS rounds them to the second, DynamoDB
	// Local to the minute.
	Lag time.Duration
}

// Lags lists the shards this instance reads now, over every table, each
// with its lag as of now.
func (s *Subscriber) Lags() []ShardLag {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var lags []ShardLag
	for _, st := range s.streams {
		st.mu.Lock()
		for id, w := range st.workers {
			lag := ShardLag{Table: st.table, ShardID: id}
			if since := w.behindSince.Load(); since != 0 {
				lag.Lag = max(now.Sub(time.Unix(0, since)), 0)
			}
			lags = append(lags, lag)
		}
		st.mu.Unlock()
	}
	return lags
}

// TrimmedCount counts the gaps of trimmed records met so far (see
// SubscriberConfig.OnTrimmed).
func (s *Subscriber) TrimmedCount() int64 { return s.trimmed.Load() }

func (s *Subscriber) reportTrimmed(t Trimmed) {
	s.trimmed.Add(1)
	s.logger.Error("Stream records were trimmed before they were read; they are lost, reading goes on from the oldest record left", t.Err,
		watermill.LogFields{"table": t.Table, "shard_id": t.ShardID, "after_sequence_number": t.After})
	if s.config.OnTrimmed != nil {
		s.config.OnTrimmed(t)
	}
}
