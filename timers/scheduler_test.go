package timers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/store"
)

// shardTable plays the shard records for the balancing logic alone; the
// DynamoDB side is tested against the emulators in service/.
type shardTable struct {
	mu     sync.Mutex
	shards []store.Shard
}

func newShardTable(n int) *shardTable {
	t := &shardTable{shards: make([]store.Shard, n)}
	for i := range t.shards {
		t.shards[i].ShardID = i
	}
	return t
}

func (t *shardTable) Shards(_ context.Context, n int) ([]store.Shard, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]store.Shard(nil), t.shards[:n]...), nil
}

func (t *shardTable) ShardVersion(_ context.Context, shard int) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.shards[shard].Version, nil
}

func (t *shardTable) write(seen store.Shard, next store.Shard, sameOwner bool) (store.Shard, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.shards[seen.ShardID]
	if cur.Version != seen.Version || (sameOwner && cur.Owner != seen.Owner) {
		return store.Shard{}, store.ErrShardMoved
	}
	t.shards[seen.ShardID] = next
	return next, nil
}

func (t *shardTable) ClaimShard(_ context.Context, seen store.Shard, owner, _ string, at time.Time) (store.Shard, error) {
	next := seen
	next.Version, next.Owner, next.ClaimedAt = seen.Version+1, owner, store.At(at)
	return t.write(seen, next, false)
}

func (t *shardTable) RenewShard(_ context.Context, held store.Shard, at time.Time) (store.Shard, error) {
	next := held
	next.ClaimedAt = store.At(at)
	return t.write(held, next, true)
}

func (t *shardTable) ReleaseShard(_ context.Context, held store.Shard) error {
	next := held
	next.Version, next.Owner = held.Version+1, ""
	_, err := t.write(held, next, true)
	return err
}

func (t *shardTable) DueTimers(context.Context, int, time.Time) ([]store.Timer, error) {
	return nil, nil
}

func newTestScheduler(table *shardTable, owner string) *Scheduler {
	cfg := Config{Shards: len(table.shards), Lease: time.Minute, PollInterval: time.Hour, OwnerID: owner}
	noSend := func(context.Context, []Due) error { return nil }
	return NewScheduler(cfg, table, noSend, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestBalance_instances_converge_on_even_shares(t *testing.T) {
	ctx := context.Background()
	table := newShardTable(10)
	var scheds []*Scheduler
	for i := range 3 {
		s := newTestScheduler(table, fmt.Sprintf("owner-%d", i))
		t.Cleanup(s.releaseAll)
		scheds = append(scheds, s)
		// Each newcomer balances a few times after joining, as its ticks would.
		for range 12 {
			for _, s := range scheds {
				require.NoError(t, s.balance(ctx))
			}
		}
	}
	total := 0
	for _, s := range scheds {
		n := len(s.Owned())
		assert.GreaterOrEqual(t, n, 3, "%s owns %v", s.cfg.OwnerID, s.Owned())
		assert.LessOrEqual(t, n, 4, "%s owns %v", s.cfg.OwnerID, s.Owned())
		total += n
	}
	assert.Equal(t, 10, total, "every shard served exactly once")
}

func TestBalance_a_claim_moved_on_is_dropped_at_once(t *testing.T) {
	ctx := context.Background()
	table := newShardTable(2)
	s := newTestScheduler(table, "owner-a")
	t.Cleanup(s.releaseAll)
	require.NoError(t, s.balance(ctx))
	require.Equal(t, []int{0, 1}, s.Owned())

	v, err := s.Version(ctx, 1)
	require.NoError(t, err)
	s.Moved(1, v-1)
	assert.Equal(t, []int{0, 1}, s.Owned(), "a refusal at an older version says nothing about the held claim")

	records, _ := table.Shards(ctx, 2)
	_, err = table.ClaimShard(ctx, records[1], "intruder", "", time.Now())
	require.NoError(t, err)
	s.Moved(1, v)
	assert.Equal(t, []int{0}, s.Owned(), "a write refused at the held version drops the shard")

	_, err = table.ClaimShard(ctx, records[0], "intruder", "", time.Now())
	require.NoError(t, err)
	require.NoError(t, s.balance(ctx))
	assert.NotContains(t, s.Owned(), 0, "the next balance sees the version moved and drops the shard")
}

// Firings that come due together, as a poll that frees held firings
// releases them (each from its own timer goroutine, microseconds apart),
// are sent ten to a request, each once.
func TestSend_firings_due_together_go_ten_to_a_request(t *testing.T) {
	const firings = 35
	var mu sync.Mutex
	var requests []int
	sent := map[string]int{}
	recordSend := func(_ context.Context, due []Due) error {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, len(due))
		for _, d := range due {
			sent[d.Payload.TimerID]++
		}
		return nil
	}
	s := NewScheduler(Config{Shards: 1, Lease: time.Minute, PollInterval: time.Hour, OwnerID: "a"}, newShardTable(1), recordSend,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, stop := context.WithCancel(context.Background())
	var senders sync.WaitGroup
	for range dueSenders {
		senders.Go(func() { s.send(ctx) })
	}
	var done sync.WaitGroup
	start := make(chan struct{})
	for i := range firings {
		done.Add(1)
		go func() {
			<-start
			s.enqueue(ctx, dueRequest{due: Due{Payload: messages.TimerDuePayload{TimerID: fmt.Sprint(i)}}, done: func(error) { done.Done() }})
		}()
	}
	close(start)
	done.Wait()
	stop()
	senders.Wait()
	assert.Len(t, sent, firings)
	for id, n := range sent {
		assert.Equal(t, 1, n, "firing %s sent once", id)
	}
	assert.LessOrEqual(t, len(requests), 5, "batches %v", requests)
}
