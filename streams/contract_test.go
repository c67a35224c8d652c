package streams_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// The tests here hold the subscriber to Watermill's Subscriber contract
// (message/pubsub.go) where the universal suite (pubsub_test.go) does not
// look closely: message contexts, what is handed out once the
// subscription ends, how long Close takes, and subscribing again.

type ctxKey string

// collector reads a channel from the moment it is made, acking whatever
// it gets, and keeps it.
type collector struct {
	mu   sync.Mutex
	got  []*message.Message
	done chan struct{}
}

func collect(ch <-chan *message.Message) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for m := range ch {
			c.mu.Lock()
			c.got = append(c.got, m)
			c.mu.Unlock()
			m.Ack()
		}
	}()
	return c
}

func (c *collector) uuids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, m := range c.got {
		ids = append(ids, m.UUID)
	}
	return ids
}

func TestSubscriber_message_context(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	f.put("shard-0", 3)
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey("trace"), "t-1"))
	defer cancel()
	msgs, err := sub.Subscribe(ctx, "items")
	require.NoError(t, err)

	acked := receive(t, msgs)
	assert.Equal(t, "t-1", acked.Context().Value(ctxKey("trace")), "the Subscribe context's values")
	assert.NoError(t, acked.Context().Err(), "live until its verdict")
	acked.Ack()
	waitDone(t, acked.Context(), time.Second, "cancelled on Ack")

	nacked := receive(t, msgs)
	assert.Equal(t, "t-1", nacked.Context().Value(ctxKey("trace")))
	nacked.Nack()
	waitDone(t, nacked.Context(), time.Second, "cancelled on Nack")

	again := receive(t, msgs)
	assert.Equal(t, nacked.UUID, again.UUID, "the nacked record again")
	assert.NoError(t, again.Context().Err(), "a new delivery, a new context")
	cancel()
	waitDone(t, again.Context(), time.Second, "cancelled with the Subscribe context")
	again.Ack()
}

// TestSubscriber_close_with_an_unacked_message: Close waits CloseTimeout
// for the delivered record, and no longer; the record's context stays
// live meanwhile and ends with the wait; nothing is handed out after
// Close began; the record, never acked, is not checkpointed.
func TestSubscriber_close_with_an_unacked_message(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	f.put("shard-0", 5)
	leases := newMemLeases()
	cfg := fastConfig(f.client("a"), leases, "a")
	cfg.CloseTimeout = 400 * time.Millisecond
	sub, err := streams.NewSubscriber(cfg, nil)
	require.NoError(t, err)
	msgs := subscribe(t, sub, "items")
	outstanding := receive(t, msgs)
	after := collect(msgs)

	began := time.Now()
	closed := make(chan time.Duration)
	go func() {
		_ = sub.Close()
		closed <- time.Since(began)
	}()
	time.Sleep(cfg.CloseTimeout / 2)
	assert.NoError(t, outstanding.Context().Err(), "live while Close waits for its verdict")
	select {
	case took := <-closed:
		assert.GreaterOrEqual(t, took, cfg.CloseTimeout, "Close waits for the delivered record")
		// The bound: CloseTimeout, then the lease store writes of handing
		// the shard back (instant here).
		assert.Less(t, took, cfg.CloseTimeout+500*time.Millisecond, "Close returns within its bound")
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	waitDone(t, outstanding.Context(), time.Second, "cancelled once Close stopped waiting")
	waitClosed(t, after.done)
	assert.Empty(t, after.uuids(), "handed out after Close began")

	l := leases.get("test", f.arn, "shard-0")
	assert.Empty(t, l.Checkpoint, "the record never acked is not checkpointed")
	assert.Empty(t, l.Owner, "the lease is released")
}

// Drain is the router's shutdown: it waits for the delivered record's
// verdict with the record's context live, checkpoints it and hands the
// shard back, hands out nothing meanwhile, and leaves the channel open
// until Close.
func TestSubscriber_drain_waits_for_the_delivered_record(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	f.put("shard-0", 5)
	leases := newMemLeases()
	cfg := fastConfig(f.client("a"), leases, "a")
	cfg.CloseTimeout = 5 * time.Second
	sub, err := streams.NewSubscriber(cfg, nil)
	require.NoError(t, err)
	msgs := subscribe(t, sub, "items")
	outstanding := receive(t, msgs)
	after := collect(msgs)

	drained := make(chan error, 1)
	go func() { drained <- sub.Drain(context.Background()) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-drained:
		t.Fatalf("Drain returned with a record outstanding: %v", err)
	default:
	}
	assert.NoError(t, outstanding.Context().Err(), "live while the drain waits for its verdict")
	outstanding.Ack()
	select {
	case err := <-drained:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return once the record was acked")
	}
	l := leases.get("test", f.arn, "shard-0")
	assert.Equal(t, seqOf(1), l.Checkpoint, "the record acked during the drain is checkpointed")
	assert.Empty(t, l.Owner, "the shard is handed back")
	select {
	case <-after.done:
		t.Fatal("the channel closed before Close")
	default:
	}
	_, err = sub.Subscribe(context.Background(), "other")
	assert.ErrorContains(t, err, "draining")

	require.NoError(t, sub.Close())
	waitClosed(t, after.done)
	assert.Empty(t, after.uuids(), "handed out after the drain began")
}

// TestSubscriber_nothing_handed_out_once_the_subscription_ends: the
// delivered record is acked after Close began (or the Subscribe context
// was cancelled), with a consumer waiting on the channel; the next
// record must not be handed out, and the drain must not start over. Each
// case runs many times: a select that finds both the consumer and the
// end ready picks at random.
func TestSubscriber_nothing_handed_out_once_the_subscription_ends(t *testing.T) {
	const rounds = 20
	for _, end := range []string{"close", "context"} {
		t.Run(end, func(t *testing.T) {
			for range rounds {
				f := newFakeStream("items")
				f.addShard("shard-0", "")
				ids := f.put("shard-0", 3)
				leases := newMemLeases()
				cfg := fastConfig(f.client("a"), leases, "a")
				cfg.CloseTimeout = time.Second
				sub, err := streams.NewSubscriber(cfg, nil)
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				msgs, err := sub.Subscribe(ctx, "items")
				require.NoError(t, err)
				first := receive(t, msgs)
				after := collect(msgs)

				began := time.Now()
				closed := make(chan time.Duration, 1)
				if end == "close" {
					go func() {
						_ = sub.Close()
						closed <- time.Since(began)
					}()
					time.Sleep(20 * time.Millisecond) // Close has begun
				} else {
					cancel()
				}
				first.Ack()
				waitClosed(t, after.done)
				took := time.Since(began)
				cancel()
				if end == "close" {
					took = <-closed
				} else {
					closeWithin(t, sub)
				}

				require.Empty(t, after.uuids(), "handed out after the subscription ended")
				assert.Less(t, took, cfg.CloseTimeout/2, "the ack ends the drain; nothing starts it over")
				assert.Equal(t, seqOf(1), leases.get("test", f.arn, "shard-0").Checkpoint,
					"the record acked during the drain is checkpointed (%s)", ids[0])
			}
		})
	}
}

// TestSubscriber_subscribe_again_once_the_channel_closed: the table is
// released before the channel closes, so subscribing again at once works.
func TestSubscriber_subscribe_again_once_the_channel_closed(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	ids := f.put("shard-0", 1)
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		msgs, err := sub.Subscribe(ctx, "items")
		require.NoError(t, err, "subscription %d", i)
		if i == 0 {
			m := receive(t, msgs)
			assert.Equal(t, ids[0], m.UUID)
			m.Ack()
		}
		cancel()
		done := collect(msgs)
		waitClosed(t, done.done)
		require.Empty(t, done.uuids())
	}
}

func waitDone(t *testing.T, ctx context.Context, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("message context not %s within %s", what, within)
	}
}
