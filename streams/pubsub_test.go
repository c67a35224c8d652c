package streams_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/store"
	"transit/streams"
)

// TestSubscriber_universal_suite runs Watermill's universal Pub/Sub suite
// against the subscriber, on moto (one shard per stream) or the user's
// TRANSIT_TEST_ENDPOINT. A table is a topic; itemPublisher stands in for
// the Publisher: each message becomes an item carrying its UUID, payload
// and metadata, and suiteSubscriber puts them back on the message the
// subscriber hands out (its payload is otherwise a Record of the change).
// Everything else (acks, nacks, contexts, closing) is the subscriber's own.
func TestSubscriber_universal_suite(t *testing.T) {
	features, constructor, groupConstructor := universalSuite(t)
	tests.TestPubSub(t, features, constructor, groupConstructor)
}

// universalSuite provisions the suite's lease table (deleted, with every
// topic's table, when t ends) and returns its Features and constructors.
func universalSuite(t *testing.T) (tests.Features, tests.PubSubConstructor, tests.ConsumerGroupPubSubConstructor) {
	url, isMoto := suiteEmulator(t)
	db, st := clients(url)
	ctx := context.Background()
	prefix := names.Prefix()
	tables := &topicTables{db: db}
	leases := prefix + "-leases"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		assert.NoError(t, tables.deleteAll(ctx))
		assert.NoError(t, store.DeprovisionTable(ctx, db, leases))
	})
	require.NoError(t, store.ProvisionTable(ctx, db, leases, store.StreamLeases))

	constructor := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		cfg := emulatorConfig(db, st, leases, group, "")
		// The cases run side by side on one emulator, dozens of
		// subscribers and streams at once: idle shards are polled, and
		// leases renewed, less often than in the other tests (a record
		// waiting is read at once however long the poll interval).
		cfg.PollInterval = 250 * time.Millisecond
		cfg.LeaseDuration, cfg.RenewInterval, cfg.DiscoveryInterval = 10*time.Second, 2*time.Second, 5*time.Second
		// TestMessageCtx closes with a message never acked: Close waits
		// this long for it.
		cfg.CloseTimeout = 2 * time.Second
		sub, err := streams.NewSubscriber(cfg, nil)
		require.NoError(t, err)
		return &itemPublisher{tables: tables}, &suiteSubscriber{Subscriber: sub, tables: tables, closing: make(chan struct{})}
	}
	features := tests.Features{
		// Each consumer group keeps its own checkpoints and reads every
		// record; the instances of one group share the shards.
		ConsumerGroups: true,
		// Records are delivered in order within a shard, and a shard is
		// read by one instance of a group at a time, so the order holds
		// across instances too. moto gives a stream one shard; DynamoDB
		// spreads a table over several, each in order, none across.
		GuaranteedOrder: isMoto,
		// Checkpoints are shared by the group's instances: a new instance
		// resumes after the last acked record...
		Persistent: true,
		// ...so a new subscriber of the same group does not receive what
		// the group already acked (a new group reads the stream from its
		// oldest record, as TestConsumerGroups checks).
		NewSubscriberReceivesOldMessages: false,
		// At least once: a record not yet checkpointed when its shard
		// changes hands is delivered again.
		ExactlyOnceDelivery: false,
		// An item has no place for a Go context.
		ContextPreserved: false,
		// No RestartServiceCommand, so TestReconnect is skipped: a moto
		// restart loses every table and stream, and the emulator is
		// shared by the package's tests. ForceShort: the full sizes
		// (10 000 messages written one item at a time, fifty instances)
		// take the emulator many minutes; the short ones keep every
		// case.
		ForceShort: true,
		GenerateTopicFunc: func(tests.TestContext) string {
			return names.Prefix() + "-topic"
		},
	}
	return features, func(t *testing.T) (message.Publisher, message.Subscriber) { return constructor(t, "suite") }, constructor
}

// suiteEmulator is the user's endpoint when set, else moto.
func suiteEmulator(t *testing.T) (url string, isMoto bool) {
	if url := emulator.Endpoint(); url != "" {
		isMoto, err := emulator.Probe(context.Background(), url)
		require.NoError(t, err)
		return url, isMoto
	}
	return motoURL(t), true
}

// topicTables creates each topic's table on first use, once, and deletes
// them all at the end.
type topicTables struct {
	db *dynamodb.Client

	mu      sync.Mutex
	created map[string]*tableOnce
}

type tableOnce struct {
	once sync.Once
	err  error
}

func (tt *topicTables) ensure(topic string) error {
	tt.mu.Lock()
	if tt.created == nil {
		tt.created = map[string]*tableOnce{}
	}
	o, ok := tt.created[topic]
	if !ok {
		o = &tableOnce{}
		tt.created[topic] = o
	}
	tt.mu.Unlock()
	o.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		o.err = store.ProvisionTable(ctx, tt.db, topic, itemsTable)
	})
	return o.err
}

func (tt *topicTables) deleteAll(ctx context.Context) error {
	tt.mu.Lock()
	var all []string
	for name := range tt.created {
		all = append(all, name)
	}
	tt.mu.Unlock()
	var errs []error
	for _, name := range all {
		if err := store.DeprovisionTable(ctx, tt.db, name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// itemPublisher writes each message as an item of the topic's table, in
// order, one at a time.
type itemPublisher struct{ tables *topicTables }

func (p *itemPublisher) Publish(topic string, msgs ...*message.Message) error {
	if err := p.tables.ensure(topic); err != nil {
		return err
	}
	for _, m := range msgs {
		item := map[string]types.AttributeValue{
			"pk":   &types.AttributeValueMemberS{Value: m.UUID},
			"sk":   &types.AttributeValueMemberS{Value: "msg"},
			"uuid": &types.AttributeValueMemberS{Value: m.UUID},
		}
		if len(m.Payload) > 0 {
			item["payload"] = &types.AttributeValueMemberB{Value: m.Payload}
		}
		if len(m.Metadata) > 0 {
			md := map[string]types.AttributeValue{}
			for k, v := range m.Metadata {
				md[k] = &types.AttributeValueMemberS{Value: v}
			}
			item["metadata"] = &types.AttributeValueMemberM{Value: md}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.tables.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(topic), Item: item})
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *itemPublisher) Close() error { return nil }

// suiteSubscriber is the subscriber, with the published message put back
// on each message it hands out (in place: the same message, so its acks
// and context are the subscriber's), and the topic's table created by
// SubscribeInitialize.
type suiteSubscriber struct {
	*streams.Subscriber
	tables *topicTables

	closeOnce sync.Once
	closing   chan struct{}
	forwards  sync.WaitGroup
}

func (s *suiteSubscriber) SubscribeInitialize(topic string) error { return s.tables.ensure(topic) }

func (s *suiteSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	in, err := s.Subscriber.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	s.forwards.Add(1)
	go func() {
		defer s.forwards.Done()
		defer close(out)
		for m := range in {
			asPublished(m)
			select {
			case out <- m:
			case <-s.closing:
				// Taken from the subscriber, never handed on: the
				// subscriber must not wait for it.
				m.Nack()
			case <-ctx.Done():
				m.Nack()
			}
		}
	}()
	return out, nil
}

// Close closes the subscriber, and returns once every channel it handed
// out is closed, as the subscriber's Close does.
func (s *suiteSubscriber) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.Subscriber.Close()
	s.forwards.Wait()
	return err
}

// asPublished sets m's UUID, payload and metadata to those of the message
// published as the item in its record. A message without them is left as
// it is (and fails the suite's comparisons).
func asPublished(m *message.Message) {
	var rec streams.Record
	if err := json.Unmarshal(m.Payload, &rec); err != nil {
		return
	}
	id, ok := rec.NewImage["uuid"].(string)
	if !ok {
		return
	}
	var payload []byte
	if b64, ok := rec.NewImage["payload"].(string); ok {
		var err error
		if payload, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return
		}
	}
	md := message.Metadata{}
	if fields, ok := rec.NewImage["metadata"].(map[string]any); ok {
		for k, v := range fields {
			s, _ := v.(string)
			md.Set(k, s)
		}
	}
	m.UUID, m.Payload, m.Metadata = id, payload, md
}
