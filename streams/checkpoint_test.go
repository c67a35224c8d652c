package streams_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// countingLeases records every checkpoint its store accepted, in order.
type countingLeases struct {
	streams.LeaseStore
	mu          sync.Mutex
	checkpoints []string
}

func (c *countingLeases) Checkpoint(ctx context.Context, held streams.Lease, seq string, expires time.Time) (streams.Lease, error) {
	l, err := c.LeaseStore.Checkpoint(ctx, held, seq, expires)
	if err == nil {
		c.mu.Lock()
		c.checkpoints = append(c.checkpoints, seq)
		c.mu.Unlock()
	}
	return l, err
}

func (c *countingLeases) written() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.checkpoints...)
}

// batchConfig checkpoints every n acks or after interval, with renewals
// too rare to carry a checkpoint within a test.
func batchConfig(c *fakeClient, leases streams.LeaseStore, n int, interval time.Duration) streams.SubscriberConfig {
	cfg := fastConfig(c, leases, "a")
	cfg.LeaseDuration, cfg.RenewInterval = 20*time.Second, 5*time.Second
	cfg.CheckpointEvery, cfg.CheckpointInterval = n, interval
	return cfg
}

func TestSubscriber_batches_checkpoints(t *testing.T) {
	t.Run("every_n_acks_then_on_release", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 12)
		mem := newMemLeases()
		leases := &countingLeases{LeaseStore: mem}
		sub := newSubscriber(t, batchConfig(f.client("a"), leases, 5, time.Hour), nil)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "12 acks", 5*time.Second, func() bool { return len(j.acked("")) == len(ids) })
		time.Sleep(100 * time.Millisecond) // room for a wrong extra write
		assert.Equal(t, []string{seqOf(5), seqOf(10)}, leases.written(), "12 acks, 2 checkpoints")

		closeWithin(t, sub)
		waitClosed(t, done)
		assert.Equal(t, []string{seqOf(5), seqOf(10), seqOf(12)}, leases.written(), "the release puts the last 2 acks on record first")
		l := mem.get("test", f.arn, "shard-0")
		assert.Equal(t, seqOf(12), l.Checkpoint)
		assert.Empty(t, l.Owner, "released")
	})

	t.Run("interval_flushes_a_partial_batch", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 3)
		leases := &countingLeases{LeaseStore: newMemLeases()}
		sub := newSubscriber(t, batchConfig(f.client("a"), leases, 100, 300*time.Millisecond), nil)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "3 acks", 5*time.Second, func() bool { return len(j.acked("")) == len(ids) })
		lastAck := time.Now()
		assert.Empty(t, leases.written(), "3 of 100 acks: nothing written before the interval")
		waitFor(t, "the interval's checkpoint", 2*time.Second, func() bool { return len(leases.written()) > 0 })
		assert.Equal(t, []string{seqOf(3)}, leases.written())
		firstAck := j.snapshot()[0].ackedAt
		assert.GreaterOrEqual(t, time.Since(firstAck), 300*time.Millisecond, "written once the first ack was an interval old")
		assert.Less(t, time.Since(lastAck), time.Second, "and not much later")
		closeWithin(t, sub)
		waitClosed(t, done)
		assert.Equal(t, []string{seqOf(3)}, leases.written(), "nothing pending at release: no second write")
	})

	t.Run("a_renewal_carries_the_pending_acks", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 3)
		leases := &countingLeases{LeaseStore: newMemLeases()}
		cfg := batchConfig(f.client("a"), leases, 100, time.Hour)
		cfg.LeaseDuration, cfg.RenewInterval = time.Second, 100*time.Millisecond
		sub := newSubscriber(t, cfg, nil)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "3 acks", 5*time.Second, func() bool { return len(j.acked("")) == len(ids) })
		waitFor(t, "the renewal's checkpoint", 2*time.Second, func() bool { return len(leases.written()) > 0 })
		assert.Equal(t, []string{seqOf(3)}, leases.written(), "written by the renewal, long before the hour")
		closeWithin(t, sub)
		waitClosed(t, done)
	})

	t.Run("shard_end_flushes_before_the_child_is_read", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		parent := f.put("shard-0", 7)
		f.closeShard("shard-0")
		f.addShard("shard-1", "shard-0")
		child := f.put("shard-1", 2)
		mem := newMemLeases()
		leases := &countingLeases{LeaseStore: mem}
		sub := newSubscriber(t, batchConfig(f.client("a"), leases, 5, time.Hour), nil)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "every record", 5*time.Second, func() bool { return len(j.acked("")) == len(parent)+len(child) })
		closeWithin(t, sub)
		waitClosed(t, done)

		var got []string
		for _, d := range j.snapshot() {
			got = append(got, d.record.EventID)
		}
		assert.Equal(t, append(parent, child...), got, "the child after its whole parent")
		assert.Equal(t, streams.ShardEnd, mem.get("test", f.arn, "shard-0").Checkpoint)
		assert.Equal(t, []string{seqOf(5), streams.ShardEnd, seqOf(9)}, leases.written(),
			"the parent's last 2 acks go on record with SHARD_END, the child's 2 at release")
	})

	t.Run("lease_lost_mid_batch", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 20)
		mem := newMemLeases()
		leases := &countingLeases{LeaseStore: mem}
		sub := newSubscriber(t, batchConfig(f.client("a"), leases, 5, time.Hour), nil)
		j := newJournal()
		handle := j.handler("a", 0)
		done := consume(subscribe(t, sub, "items"), func(m *message.Message) {
			if m.UUID == ids[6] {
				mem.steal("test", f.arn, "shard-0", "thief")
			}
			handle(m)
		})
		// The 10th ack's checkpoint finds the loss; nothing after it.
		waitFor(t, "10 acks", 5*time.Second, func() bool { return len(j.acked("")) == 10 })
		time.Sleep(300 * time.Millisecond)
		assert.Len(t, j.snapshot(), 10, "no record delivered once the checkpoint found the lease gone")
		closeWithin(t, sub)
		waitClosed(t, done)
		l := mem.get("test", f.arn, "shard-0")
		assert.Equal(t, "thief", l.Owner)
		assert.Equal(t, seqOf(5), l.Checkpoint, "nothing written past the last checkpoint while the lease was ours")
		assert.Equal(t, []string{seqOf(5)}, leases.written())
	})
}

// A crashed instance writes nothing more: its successor re-reads exactly
// the records acked since the last checkpoint, and none before.
func TestSubscriber_crash_rereads_the_uncheckpointed_window(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	ids := f.put("shard-0", 20)
	mem := newMemLeases()
	f.guard = mem.holderGuard("test", f.arn)
	counted := &countingLeases{LeaseStore: mem}
	cutOff := &flakyLeases{LeaseStore: counted}

	cfgA := fastConfig(f.client("a"), cutOff, "a")
	// No renewal (which would carry pending acks) before the crash: the
	// first comes after 2 s, long after the 12 acks.
	cfgA.LeaseDuration, cfgA.RenewInterval = 4*time.Second, 2*time.Second
	cfgA.CheckpointEvery, cfgA.CheckpointInterval = 5, time.Hour
	a := newSubscriber(t, cfgA, nil)
	var ackedA atomic.Int32
	crashed := make(chan struct{})
	doneA := consume(subscribe(t, a, "items"), func(m *message.Message) {
		if ackedA.Load() < 12 {
			ackedA.Add(1)
			m.Ack()
			return
		}
		// The process dies holding the 13th record: no write reaches
		// the lease store from here on, no flush, no release.
		cutOff.cut()
		close(crashed)
		<-m.Context().Done()
	})
	select {
	case <-crashed:
	case <-time.After(5 * time.Second):
		t.Fatal("the 13th record never came")
	}
	assert.Equal(t, []string{seqOf(5), seqOf(10)}, counted.written(), "12 acks, 2 checkpoints")
	require.Equal(t, seqOf(10), mem.get("test", f.arn, "shard-0").Checkpoint)

	b := newSubscriber(t, fastConfig(f.client("b"), mem, "b"), nil)
	j := newJournal()
	doneB := consume(subscribe(t, b, "items"), j.handler("b", 0))
	waitFor(t, "b reading to the end", 10*time.Second, func() bool { return len(j.acked("b")) >= 10 })
	time.Sleep(100 * time.Millisecond) // room for a wrong extra delivery
	closeWithin(t, b)
	closeWithin(t, a)
	waitClosed(t, doneA)
	waitClosed(t, doneB)

	var fromB []string
	for _, d := range j.snapshot() {
		fromB = append(fromB, d.record.EventID)
	}
	assert.Equal(t, ids[10:], fromB, "b re-reads the 2 acked but unrecorded records and the unacked rest, nothing checkpointed")
	assert.Empty(t, f.guardViolations(), "a shard read by an instance not holding a live lease")
}
