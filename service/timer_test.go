package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/handlers"
	"transit/messages"
	"transit/service"
	"transit/store"
	"transit/timers"
	"transit/transport"
)

// callbacks is a real HTTP server playing the timers' callback receiver.
// It records every call and fails a timer's first calls on request.
type callbacks struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]callback // by timer ID
	fails map[string]int        // timer ID → calls to fail (-1: all)
}

type callback struct {
	At   time.Time
	Key  string // Idempotency-Key
	Body string
}

func newCallbacks(t *testing.T) *callbacks {
	c := &callbacks{calls: map[string][]callback{}, fails: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("Transit-Timer-Id")
		c.mu.Lock()
		c.calls[id] = append(c.calls[id], callback{At: time.Now(), Key: r.Header.Get(timers.IdempotencyHeader), Body: string(body)})
		fail := c.fails[id]
		if fail > 0 {
			c.fails[id]--
		}
		c.mu.Unlock()
		if fail != 0 {
			http.Error(w, "receiver unavailable", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *callbacks) failFirst(timerID string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fails[timerID] = n
}

func (c *callbacks) of(timerID string) []callback {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[timerID])
}

// waitCalled waits until every timer in ids was called at least once.
func (c *callbacks) waitCalled(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		missing := 0
		for _, id := range ids {
			if len(c.calls[id]) == 0 {
				missing++
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d timers not called back within %s", missing, len(ids), timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTimers sends one timer.create per entry of due (timer ID → execute
// time), each with payload {"timer": ID}, ten to a batch as the scheduler
// sends (transport.SendBatch).
func (s *stack) createTimers(callbackURL string, due map[string]time.Time, policy *messages.RetryPolicy) {
	var msgs []*message.Message
	for id, at := range due {
		msg, err := transport.NewCommand(uuid.NewString(), messages.TimerCreate, messages.TimerCreatePayload{
			TimerID: id, ExecuteAt: at, Callback: callbackURL,
			Payload: json.RawMessage(fmt.Sprintf(`{"timer":%q}`, id)), RetryPolicy: policy,
		}, time.Now())
		require.NoError(s.t, err)
		msgs = append(msgs, msg)
	}
	require.NoError(s.t, transport.SendBatch(context.Background(), s.svc.SQS, s.url(s.svc.Stack.CommandQueue(messages.Timer)), msgs))
}

// dueEvery names n timers prefix-000… and makes them due step apart from
// base, which it returns with them (truncated to the millisecond timers keep).
func dueEvery(prefix string, n int, lead, step time.Duration) (base time.Time, ids []string, due map[string]time.Time) {
	base = time.Now().Add(lead).Truncate(time.Millisecond)
	due = map[string]time.Time{}
	for i := range n {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		ids = append(ids, id)
		due[id] = base.Add(time.Duration(i) * step)
	}
	return base, ids, due
}

// timerEvents waits for n events of type typ and returns them by timer ID.
func (s *stack) timerEvents(typ messages.Type, n int, timeout time.Duration) map[string][]service.TapEvent {
	s.t.Helper()
	byTimer := func(evs []service.TapEvent) map[string][]service.TapEvent {
		out := map[string][]service.TapEvent{}
		for _, ev := range evs {
			if ev.Envelope.Type == typ {
				var p struct {
					TimerID string `json:"timer_id"`
				}
				require.NoError(s.t, json.Unmarshal(ev.Envelope.Payload, &p))
				out[p.TimerID] = append(out[p.TimerID], ev)
			}
		}
		return out
	}
	events := s.collect(timeout, func(evs []service.TapEvent) bool { return len(byTimer(evs)) >= n })
	return byTimer(events)
}

// eventIDs are the distinct IDs among events: a redelivered command
// re-emits its events with the same IDs (docs/delivery.md).
func eventIDs(events []service.TapEvent) map[string]bool {
	ids := map[string]bool{}
	for _, ev := range events {
		ids[ev.MessageID] = true
	}
	return ids
}

func percentile(ds []time.Duration, p float64) time.Duration {
	sorted := slices.Clone(ds)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func (s *stack) storedTimers() []store.Timer {
	var all []store.Timer
	for shard := range s.cfg.TimerShards {
		ts, err := s.svc.Store.DueTimers(context.Background(), shard, time.Now().AddDate(1, 0, 0))
		require.NoError(s.t, err)
		all = append(all, ts...)
	}
	return all
}

// seedTimers writes timers straight through the store, as the
// timer.create handler does, at the shard versions read once at the start
// (call it once every shard is claimed): the firing tests measure firing,
// not the emulator's pace at taking commands.
func (s *stack) seedTimers(callbackURL string, due map[string]time.Time) map[string]string {
	ctx := context.Background()
	records, err := s.svc.Store.Shards(ctx, s.cfg.TimerShards)
	require.NoError(s.t, err)
	var mu sync.Mutex
	uuids := map[string]string{}
	work := make(chan string)
	errs := make(chan error, len(due))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				shard := store.ShardOf(id, s.cfg.TimerShards)
				p := &messages.TimerCreatePayload{TimerID: id, ExecuteAt: due[id], Callback: callbackURL,
					Payload: json.RawMessage(fmt.Sprintf(`{"timer":%q}`, id))}
				if err := p.Validate(); err != nil {
					errs <- err
					continue
				}
				t, err := handlers.TimerRecord(shard, uuid.NewString(), p, time.Now())
				if err != nil {
					errs <- err
					continue
				}
				cmd := store.Cmd{ID: uuid.NewString(), Type: string(messages.TimerCreate), CorrelationID: "seed", At: time.Now()}
				if _, err := s.svc.Store.CreateTimer(ctx, cmd, records[shard].Version, t); err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				uuids[id] = t.UUID
				mu.Unlock()
			}
		})
	}
	for id := range due {
		work <- id
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.t, err)
	}
	return uuids
}

// waitShardsClaimed waits until every timer shard has a live owner.
func (s *stack) waitShardsClaimed() {
	require.Eventually(s.t, func() bool {
		records, err := s.svc.Store.Shards(context.Background(), s.cfg.TimerShards)
		require.NoError(s.t, err)
		for _, r := range records {
			if r.Owner == "" {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "every timer shard claimed")
}

// TestTimers_500_due_within_seconds_fire_exactly_once: every callback once,
// with its payload and the timer's uuid as Idempotency-Key; lateness
// reported.
func TestTimers_500_due_within_seconds_fire_exactly_once(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Concurrency = 8; c.TimerShards = 8 })
	cb := newCallbacks(t)
	s.serve(service.ServeOptions{})
	s.waitShardsClaimed()

	const n = 500
	base, ids, due := dueEvery("t", n, 20*time.Second, 6*time.Millisecond) // all within 3 s
	uuids := s.seedTimers(cb.URL+"/due", due)
	require.Less(t, time.Now(), base, "every timer stored before the first is due")

	defer func() {
		if t.Failed() {
			for _, tm := range s.storedTimers() {
				t.Logf("left: %+v", tm)
			}
			letters, err := transport.ListDeadLetters(context.Background(), s.svc.SQS, s.url(s.svc.Stack.DeadLetterQueue(messages.Timer)), 10)
			require.NoError(t, err)
			for _, l := range letters {
				t.Logf("dead letter: %+v", l)
			}
		}
	}()
	// Reading the events as they come keeps the tap queue short: moto's
	// SNS publish slows down with every message waiting in a subscriber.
	fired := s.timerEvents(messages.TimerFired, n, 120*time.Second)
	cb.waitCalled(t, ids, 10*time.Second)
	time.Sleep(2 * time.Second) // time for a second call, were there one

	var lateness []time.Duration
	for _, id := range ids {
		calls := cb.of(id)
		require.Len(t, calls, 1, "timer %s called once", id)
		assert.Equal(t, uuids[id], calls[0].Key, "Idempotency-Key is the timer's uuid")
		assert.JSONEq(t, fmt.Sprintf(`{"timer":%q}`, id), calls[0].Body)
		require.Len(t, eventIDs(fired[id]), 1, "one timer.fired for %s", id)
		ev := payloadOf[messages.TimerFiredPayload](t, fired[id][0])
		assert.Equal(t, 1, ev.Attempts)
		assert.True(t, ev.ExecuteAt.Equal(due[id]), "%s fired for %s, due %s", id, ev.ExecuteAt, due[id])
		assert.False(t, calls[0].At.Before(due[id]), "%s called before it was due", id)
		lateness = append(lateness, calls[0].At.Sub(due[id]))
	}
	assert.Empty(t, s.storedTimers(), "fired timers are deleted")
	t.Logf("timers=%d fired=%d lateness p50=%s p99=%s max=%s", n, len(fired),
		percentile(lateness, 0.5), percentile(lateness, 0.99), percentile(lateness, 1))
}

// TestTimers_retry_policy: a callback failing twice fires three times on
// the backoff schedule; one always failing ends in timer.failed.
func TestTimers_retry_policy(t *testing.T) {
	s := newStack(t)
	cb := newCallbacks(t)
	s.serve(service.ServeOptions{})
	cb.failFirst("flaky", 2)
	cb.failFirst("broken", -1)
	policy := &messages.RetryPolicy{MaxAttempts: 3, InitialInterval: messages.Duration(600 * time.Millisecond),
		Multiplier: 2, MaxInterval: messages.Duration(5 * time.Second)}
	at := time.Now().Add(2 * time.Second)
	s.createTimers(cb.URL, map[string]time.Time{"flaky": at, "broken": at}, policy)

	fired := s.timerEvents(messages.TimerFired, 1, 30*time.Second)["flaky"]
	require.Len(t, fired, 1)
	assert.Equal(t, 3, payloadOf[messages.TimerFiredPayload](t, fired[0]).Attempts)
	calls := cb.of("flaky")
	require.Len(t, calls, 3)
	for i, wantGap := range []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond} {
		gap := calls[i+1].At.Sub(calls[i].At)
		assert.GreaterOrEqual(t, gap, wantGap, "retry %d waits its backoff", i+1)
		assert.Less(t, gap, wantGap+time.Second, "retry %d is not late by more than a poll", i+1)
		assert.Equal(t, calls[0].Key, calls[i+1].Key, "a retry keeps the Idempotency-Key")
	}

	failed := s.timerEvents(messages.TimerFailed, 1, 30*time.Second)["broken"]
	require.Len(t, failed, 1)
	ev := payloadOf[messages.TimerFailedPayload](t, failed[0])
	assert.Equal(t, 3, ev.Attempts)
	assert.Contains(t, ev.LastError, "500")
	assert.Len(t, cb.of("broken"), 3, "called max_attempts times")
	assert.Empty(t, s.storedTimers(), "a spent timer is removed")
}

// TestTimers_stale_owner_cannot_write: once another owner bumped the
// shard's version, a write at the old version is refused and leaves
// nothing behind; the handler learns the new version and succeeds.
func TestTimers_stale_owner_cannot_write(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	ctx := context.Background()
	st := s.svc.Store

	records, err := st.Shards(ctx, 1)
	require.NoError(t, err)
	a, err := st.ClaimShard(ctx, records[0], "owner-a", "{}", time.Now())
	require.NoError(t, err)
	b, err := st.ClaimShard(ctx, a, "owner-b", "{}", time.Now())
	require.NoError(t, err)
	assert.Equal(t, a.Version+1, b.Version)

	stale := store.Cmd{ID: uuid.NewString(), Type: string(messages.TimerCreate), CorrelationID: "c", At: time.Now()}
	timer := store.NewTimer(0, "stale-write", uuid.NewString(), time.Now().Add(time.Hour), time.Now())
	timer.CallbackURL, timer.RetryPolicy = "http://127.0.0.1:9/", "{}"
	_, err = st.CreateTimer(ctx, stale, a.Version, timer)
	require.ErrorIs(t, err, store.ErrShardMoved)
	_, err = st.RenewShard(ctx, a, time.Now())
	require.ErrorIs(t, err, store.ErrShardMoved, "the stale owner cannot renew either")
	assert.Empty(t, s.storedTimers(), "nothing written by the stale owner")
	assert.Nil(t, s.audit(stale.ID), "no outcome recorded for the refused write")

	_, err = st.CreateTimer(ctx, stale, b.Version, timer)
	require.NoError(t, err, "the current owner's version is accepted")
	require.Len(t, s.storedTimers(), 1)

	// Through the handler: a serving instance claims the shard, another
	// owner takes it behind its back; the instance's next write is refused
	// at its stale version, and the command is retried at the new one.
	require.NoError(t, st.ReleaseShard(ctx, b))
	s.serve(service.ServeOptions{})
	var mine store.Shard
	require.Eventually(t, func() bool {
		records, err := st.Shards(ctx, 1)
		require.NoError(t, err)
		mine = records[0]
		return mine.Owner != "" && strings.Contains(mine.Owner, "/")
	}, 10*time.Second, 50*time.Millisecond, "the instance claims the shard")
	_, err = st.ClaimShard(ctx, mine, "intruder", "{}", time.Now())
	require.NoError(t, err)
	cmd := uuid.NewString()
	s.send(cmd, messages.TimerCreate, messages.TimerCreatePayload{TimerID: "after-steal", ExecuteAt: time.Now().Add(time.Hour), Callback: "http://127.0.0.1:9/"})
	ev := payloadOf[messages.TimerCreatedPayload](t, s.eventFor(cmd, messages.TimerCreated))
	assert.Equal(t, "after-steal", ev.TimerID)
	assert.Equal(t, store.Applied, s.audit(cmd)["status"])
}

// TestTimers_three_instances_split_shards_and_survive_SIGKILL: three
// `transit serve` processes share the shards; one is killed while timers
// fire; its shards are taken over and every timer fires, each firing with
// one Idempotency-Key.
func TestTimers_three_instances_split_shards_and_survive_SIGKILL(t *testing.T) {
	const shards = 12
	s := newStack(t, func(c *config.Config) { c.TimerShards = shards })
	cb := newCallbacks(t)
	env := []string{"TRANSIT_DOMAINS=timer", "TRANSIT_TIMER_SHARDS=" + strconv.Itoa(shards), "TRANSIT_TIMER_LEASE=3s",
		"TRANSIT_TIMER_POLL_INTERVAL=250ms", "TRANSIT_CONCURRENCY=8"}
	procs := map[int]*transitProc{}
	for range 3 {
		p := s.startTransit(t, env...)
		procs[p.cmd.Process.Pid] = p
	}
	ctx := context.Background()
	owners := func() map[int][]int { // pid → shards, from the records
		records, err := s.svc.Store.Shards(ctx, shards)
		require.NoError(t, err)
		out := map[int][]int{}
		for _, r := range records {
			if parts := strings.Split(r.Owner, "/"); len(parts) == 3 && time.Since(r.ClaimedAt.Time) < 3*time.Second {
				pid, _ := strconv.Atoi(parts[1])
				out[pid] = append(out[pid], r.ShardID)
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		o := owners()
		return len(o) == 3 && len(o[firstKey(o)]) == shards/3 && len(o[lastKey(o)]) == shards/3 && total(o) == shards
	}, 60*time.Second, 200*time.Millisecond, "three instances split %d shards evenly", shards)
	split := owners()
	t.Logf("shards by pid: %v", split)

	const n = 300
	base, ids, due := dueEvery("k", n, 15*time.Second, 10*time.Millisecond)
	uuids := s.seedTimers(cb.URL, due)
	require.Less(t, time.Now(), base, "every timer stored before the first is due")

	// Kill one instance a second into the firing, mid-stream.
	time.Sleep(time.Until(base.Add(time.Second)))
	victim := firstKey(split)
	procs[victim].stop(t, syscall.SIGKILL, 5*time.Second)
	victimShards := split[victim]

	fired := s.timerEvents(messages.TimerFired, n, 90*time.Second)
	cb.waitCalled(t, ids, 10*time.Second)
	time.Sleep(3 * time.Second) // time for a repeated call, were there one
	extra := 0
	onVictim := 0
	for _, id := range ids {
		calls := cb.of(id)
		for _, c := range calls {
			assert.Equal(t, uuids[id], c.Key, "every call of %s carries its one Idempotency-Key", id)
		}
		extra += len(calls) - 1
		if slices.Contains(victimShards, store.ShardOf(id, shards)) {
			onVictim++
		}
	}
	fired = s.timerEvents(messages.TimerFired, n, 10*time.Second)
	for _, id := range ids {
		// A firing redelivered after the kill re-emits its event, same ID.
		assert.Len(t, eventIDs(fired[id]), 1, "one timer.fired for %s", id)
	}
	assert.Empty(t, s.storedTimers(), "every timer fired and was deleted")
	after := owners()
	assert.NotContains(t, after, victim, "the killed instance owns nothing")
	assert.Equal(t, shards, total(after), "its shards were taken over")
	t.Logf("timers=%d on the killed instance's shards=%d repeated calls=%d (same Idempotency-Key) shards after: %v",
		n, onVictim, extra, after)
	assert.LessOrEqual(t, extra, 10, "a repeat is only a callback cut off by the kill before its outcome was recorded")
}

func firstKey(m map[int][]int) int { return slices.Sorted(maps.Keys(m))[0] }
func lastKey(m map[int][]int) int {
	k := slices.Sorted(maps.Keys(m))
	return k[len(k)-1]
}

func total(m map[int][]int) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// timedAllocation serves a stack whose allocations arm expiry timers (no
// sweep), syncs one sandbox with a lab of labSeconds and allocates it to
// track, returning the allocation's command ID and event.
func timedAllocation(t *testing.T, labSeconds float64, track string) (*stack, string, messages.SandboxAllocatedPayload) {
	t.Helper()
	s := newStack(t, func(c *config.Config) { c.SandboxExpiry = config.ExpiryTimer; c.SweepInterval = 0 })
	s.serve(service.ServeOptions{Now: time.Now})
	sync := uuid.NewString()
	s.send(sync, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
		{ExternalID: "lab-" + track, Name: track, LabDurationHours: labSeconds / 3600},
	}})
	s.eventFor(sync, messages.SandboxSynced)
	alloc := uuid.NewString()
	s.send(alloc, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: track})
	return s, alloc, payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(alloc, messages.SandboxAllocated))
}

// TestSandbox_expired_by_its_timer: an allocation with a 2-second lab is
// expired by its timer; no sweep runs.
func TestSandbox_expired_by_its_timer(t *testing.T) {
	s, alloc, allocated := timedAllocation(t, 2, "track-short")
	assert.Equal(t, allocated.AllocatedAt+2, allocated.ExpiresAt)

	expire := messages.DerivedID(alloc, messages.SandboxExpire, allocated.SandboxID)
	expired := payloadOf[messages.SandboxExpiredPayload](t, s.eventFor(expire, messages.SandboxExpired))
	assert.Equal(t, allocated.SandboxID, expired.SandboxID)
	assert.GreaterOrEqual(t, expired.DeletionRequestedAt, allocated.ExpiresAt, "not before the lab window closed")
	sb, _ := s.sandbox(allocated.SandboxID)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
	assert.Equal(t, store.Applied, s.audit(expire)["status"])
}

// timerStored reads a timer straight from its shard.
func (s *stack) timerStored(id string) (store.Timer, bool) {
	t, found, err := s.svc.Store.GetTimer(context.Background(), store.ShardOf(id, s.cfg.TimerShards), id)
	require.NoError(s.t, err)
	return t, found
}

// TestTimers_delete_before_due_never_fires: a timer deleted before it is
// due is gone and never calls back, while one due at the same time fires;
// timer.deleted names the deleted incarnation, and a redelivered delete
// re-emits it. Deleting a timer that does not exist succeeds: timer.deleted
// without a timer_uuid (docs/timers.md).
func TestTimers_delete_before_due_never_fires(t *testing.T) {
	s := newStack(t)
	cb := newCallbacks(t)
	s.serve(service.ServeOptions{})
	at := time.Now().Add(5 * time.Second)
	s.createTimers(cb.URL, map[string]time.Time{"doomed": at, "control": at}, nil)
	created := s.timerEvents(messages.TimerCreated, 2, 30*time.Second)
	require.Len(t, created["doomed"], 1)
	doomed := payloadOf[messages.TimerCreatedPayload](t, created["doomed"][0])
	_, found := s.timerStored("doomed")
	require.True(t, found)

	del := uuid.NewString()
	s.send(del, messages.TimerDelete, messages.TimerDeletePayload{TimerID: "doomed"})
	deleted := payloadOf[messages.TimerDeletedPayload](t, s.eventFor(del, messages.TimerDeleted))
	require.True(t, time.Now().Before(at), "deleted before it was due; the test is too slow to tell otherwise")
	assert.Equal(t, messages.TimerDeletedPayload{TimerID: "doomed", TimerUUID: doomed.TimerUUID, Shard: doomed.Shard}, deleted)
	_, found = s.timerStored("doomed")
	assert.False(t, found, "the deleted timer's item is gone")
	assert.Equal(t, store.Applied, s.audit(del)["status"])

	// The control timer, due at the same moment, fires: by then the
	// deleted one would have too.
	fired := s.timerEvents(messages.TimerFired, 1, 30*time.Second)
	require.Len(t, fired["control"], 1)
	time.Sleep(2 * time.Second) // a firing of the deleted one would be done by now
	fired = s.timerEvents(messages.TimerFired, 1, time.Second)
	assert.Empty(t, fired["doomed"], "no timer.fired for the deleted timer")
	assert.Empty(t, cb.of("doomed"), "the deleted timer never called back")
	assert.Len(t, cb.of("control"), 1)
	assert.Empty(t, s.storedTimers())

	// Redelivered: the recorded outcome, the same event.
	s.send(del, messages.TimerDelete, messages.TimerDeletePayload{TimerID: "doomed"})
	events := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, del)) == 2 })
	for _, ev := range causedBy(events, del) {
		assert.Equal(t, messages.DerivedID(del, messages.TimerDeleted, ""), ev.MessageID)
		assert.Equal(t, deleted, payloadOf[messages.TimerDeletedPayload](t, ev))
	}

	unknown := uuid.NewString()
	s.send(unknown, messages.TimerDelete, messages.TimerDeletePayload{TimerID: "never-created"})
	assert.Equal(t, messages.TimerDeletedPayload{TimerID: "never-created", Shard: store.ShardOf("never-created", s.cfg.TimerShards)},
		payloadOf[messages.TimerDeletedPayload](t, s.eventFor(unknown, messages.TimerDeleted)), "no timer_uuid: there was none")
	assert.Equal(t, store.Applied, s.audit(unknown)["status"])
	_, found = s.timerStored("never-created")
	assert.False(t, found, "deleting creates nothing")
}

// TestSandbox_release_deletes_its_expiry_timer: a track releasing its
// sandbox within the lab window sends timer.delete for the allocation's
// expiry timer (its ID derived from the release); the timer is gone and
// no sandbox.expire is applied once the window closes.
func TestSandbox_release_deletes_its_expiry_timer(t *testing.T) {
	s, alloc, allocated := timedAllocation(t, 8, "track-release")
	timerID := "sandbox-expiry:" + allocated.SandboxID
	// Released once the timer exists: a delete handled before the create
	// would find nothing and leave the later timer to fire into a rejection.
	create := messages.DerivedID(alloc, messages.TimerCreate, timerID)
	armed := payloadOf[messages.TimerCreatedPayload](t, s.eventFor(create, messages.TimerCreated))
	require.Equal(t, timerID, armed.TimerID)

	release := uuid.NewString()
	s.send(release, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: allocated.SandboxID, TrackID: "track-release"})
	s.eventFor(release, messages.SandboxDeletionMarked)
	del := messages.DerivedID(release, messages.TimerDelete, "")
	deleted := payloadOf[messages.TimerDeletedPayload](t, s.eventFor(del, messages.TimerDeleted))
	assert.Equal(t, messages.TimerDeletedPayload{TimerID: timerID, TimerUUID: armed.TimerUUID, Shard: armed.Shard}, deleted)
	_, found := s.timerStored(timerID)
	assert.False(t, found, "the expiry timer's item is gone")

	// Past the window's end and the timer's margin, with a poll to spare.
	time.Sleep(time.Until(time.Unix(allocated.ExpiresAt, 0).Add(3 * time.Second)))
	expire := messages.DerivedID(alloc, messages.SandboxExpire, allocated.SandboxID)
	assert.Nil(t, s.audit(expire), "the timer's sandbox.expire was never sent")
	events := s.collect(time.Second, func([]service.TapEvent) bool { return true })
	for _, ev := range events {
		assert.NotEqual(t, messages.SandboxExpired, ev.Envelope.Type)
		assert.NotEqual(t, messages.TimerFired, ev.Envelope.Type, "%s", ev.Envelope.Payload)
	}
	sb, _ := s.sandbox(allocated.SandboxID)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
}

// TestTimers_firing_refusals: against DynamoDB, the store's timer writes
// refuse what the timer machine refuses, each for its reason as decided on
// the item DynamoDB returns: a second delivery of a held firing is
// ErrFiring, a firing of another incarnation ErrNotDue; a firing that
// lost its timer to a replacement records its outcome alone and leaves
// the replacement as it is; a delete at a version the shard has left is
// ErrShardMoved and deletes nothing.
func TestTimers_firing_refusals(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	ctx := context.Background()
	st := s.svc.Store
	records, err := st.Shards(ctx, 1)
	require.NoError(t, err)
	held, err := st.ClaimShard(ctx, records[0], "owner-a", "{}", time.Now())
	require.NoError(t, err)

	now := time.Now()
	due := now.Add(-time.Second)
	timer := store.NewTimer(0, "refusals", "uuid-1", due, now)
	timer.CallbackURL, timer.RetryPolicy = "http://127.0.0.1:9/", "{}"
	cmd := func(typ messages.Type) store.Cmd {
		return store.Cmd{ID: uuid.NewString(), Type: string(typ), CorrelationID: "c", At: time.Now()}
	}
	_, err = st.CreateTimer(ctx, cmd(messages.TimerCreate), held.Version, timer)
	require.NoError(t, err)

	first := cmd(messages.TimerDue)
	taken, err := st.StartFiring(ctx, first, 0, "refusals", "uuid-1", due, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, first.ID, taken.FiringBy)
	second := cmd(messages.TimerDue)
	_, err = st.StartFiring(ctx, second, 0, "refusals", "uuid-1", due, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, store.ErrFiring, "the first delivery holds the firing")
	_, err = st.StartFiring(ctx, second, 0, "refusals", "uuid-0", due, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, store.ErrNotDue, "another incarnation")
	_, err = st.StartFiring(ctx, second, 0, "absent", "uuid-1", due, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, store.ErrNotDue, "no such timer")

	// Replaced while the first delivery called back.
	replacement := store.NewTimer(0, "refusals", "uuid-2", now.Add(time.Hour), now)
	replacement.CallbackURL, replacement.RetryPolicy = "http://127.0.0.1:9/", "{}"
	_, err = st.CreateTimer(ctx, cmd(messages.TimerCreate), held.Version, replacement)
	require.NoError(t, err)
	f, err := st.FinishFiring(ctx, first, taken, store.Firing{Result: store.FiringFired, Timer: taken.Ref(), At: time.Now(), Attempts: 1})
	require.NoError(t, err)
	assert.Equal(t, store.FiringFired, f.Result)
	assert.Equal(t, store.Applied, s.audit(first.ID)["status"], "the firing happened: its outcome is recorded")
	stored, found := s.timerStored("refusals")
	require.True(t, found, "the replacement is not deleted by the old firing")
	assert.Equal(t, "uuid-2", stored.UUID)
	assert.Empty(t, stored.FiringBy)

	moved, err := st.ClaimShard(ctx, held, "owner-b", "{}", time.Now())
	require.NoError(t, err)
	del := cmd(messages.TimerDelete)
	_, err = st.DeleteTimer(ctx, del, 0, held.Version, "refusals")
	require.ErrorIs(t, err, store.ErrShardMoved)
	_, found = s.timerStored("refusals")
	assert.True(t, found, "a refused delete deletes nothing")
	assert.Nil(t, s.audit(del.ID))
	ref, err := st.DeleteTimer(ctx, del, 0, moved.Version, "refusals")
	require.NoError(t, err)
	assert.Equal(t, "uuid-2", ref.UUID)
	_, found = s.timerStored("refusals")
	assert.False(t, found)
}

// A firing whose process died after recording the outcome and before the
// timer's change: the next delivery takes the firing again once the dead
// one's hold lapses, finds the outcome, and deletes the timer without
// calling back a second time.
func TestTimers_firing_settled_after_a_crash_before_the_timer_change(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	lost := &lostAnswer{op: "DeleteItem", has: []string{"timer_firing_by"}, die: true}
	stopDead := s.serveLosing(t, lost)
	cb := newCallbacks(t)
	s.createTimers(cb.URL, map[string]time.Time{"crash": time.Now().Add(time.Second)}, nil)
	lost.await(t)
	require.Len(t, cb.of("crash"), 1)
	held, found := s.timerStored("crash")
	require.True(t, found, "the process died before the timer's change")
	due := messages.DerivedID(held.UUID, messages.TimerDue, held.ExecuteAt.String())
	assert.Equal(t, due, held.FiringBy)
	assert.Equal(t, store.Applied, s.audit(due)["status"], "the outcome was recorded first")

	require.NoError(t, stopDead())
	s.serve(service.ServeOptions{})
	fired := payloadOf[messages.TimerFiredPayload](t, s.eventFor(due, messages.TimerFired))
	assert.Equal(t, held.UUID, fired.TimerUUID)
	_, found = s.timerStored("crash")
	assert.False(t, found, "deleted by the next delivery")
	time.Sleep(time.Second)
	assert.Len(t, cb.of("crash"), 1, "called back once")
}

// A firing whose timer change landed but whose answer was lost: the next
// delivery finds the timer gone and the outcome recorded, and re-emits
// timer.fired without calling back again.
func TestTimers_firing_answer_lost_after_the_timer_change(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	lost := &lostAnswer{op: "DeleteItem", has: []string{"timer_firing_by"}}
	s.serveLosing(t, lost)
	cb := newCallbacks(t)
	s.createTimers(cb.URL, map[string]time.Time{"lost": time.Now().Add(time.Second)}, nil)
	fired := s.timerEvents(messages.TimerFired, 1, time.Minute)["lost"]
	require.NotEmpty(t, fired)
	require.True(t, lost.hit.Load(), "the fault was reached")
	_, found := s.timerStored("lost")
	assert.False(t, found)
	time.Sleep(time.Second)
	assert.Len(t, cb.of("lost"), 1, "called back once")
	assert.Len(t, eventIDs(fired), 1)
}

// A failed call whose process died after recording the retry and before
// moving the timer: the next delivery finds the timer still held by its
// command, moves it as recorded without calling back, and the retry's
// firing succeeds: two calls in all, timer.fired after two attempts.
func TestTimers_firing_retry_settled_after_a_crash(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	lost := &lostAnswer{op: "UpdateItem", has: []string{"timer_firing_by", "timer_attempts"}, die: true}
	stopDead := s.serveLosing(t, lost)
	cb := newCallbacks(t)
	cb.failFirst("retry", 1)
	policy := &messages.RetryPolicy{MaxAttempts: 3, InitialInterval: messages.Duration(time.Second), Multiplier: 1}
	s.createTimers(cb.URL, map[string]time.Time{"retry": time.Now().Add(time.Second)}, policy)
	lost.await(t)
	held, found := s.timerStored("retry")
	require.True(t, found)
	due := messages.DerivedID(held.UUID, messages.TimerDue, held.ExecuteAt.String())
	require.Equal(t, "retry", s.audit(due)["reason"], "the retry was recorded first")
	assert.Equal(t, 0, held.Attempts, "and the timer not yet moved")

	require.NoError(t, stopDead())
	s.serve(service.ServeOptions{})
	fired := s.timerEvents(messages.TimerFired, 1, time.Minute)["retry"]
	require.NotEmpty(t, fired)
	assert.Equal(t, 2, payloadOf[messages.TimerFiredPayload](t, fired[0]).Attempts)
	time.Sleep(time.Second)
	assert.Len(t, cb.of("retry"), 2, "the failed call and its retry, nothing more")
	_, found = s.timerStored("retry")
	assert.False(t, found)
}

// DueTimers answers from ExecuteAtIndex, which carries some attributes
// only: every one a poll sends and `transit query timers` lists is there.
func TestTimers_due_index_carries_what_polls_read(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.TimerShards = 1 })
	ctx := context.Background()
	records, err := s.svc.Store.Shards(ctx, 1)
	require.NoError(t, err)
	timer := store.NewTimer(0, "carried", "uuid-1", time.Now().Add(-time.Second), time.Now())
	timer.CallbackURL, timer.RetryPolicy, timer.Attempts = "https://example.com/hook", "{}", 2
	timer.CorrelationID, timer.CreatedBy = "chain-1", "create-1"
	create := store.Cmd{ID: uuid.NewString(), Type: string(messages.TimerCreate), CorrelationID: "c", At: time.Now()}
	_, err = s.svc.Store.CreateTimer(ctx, create, records[0].Version, timer)
	require.NoError(t, err)

	due, err := s.svc.Store.DueTimers(ctx, 0, time.Now())
	require.NoError(t, err)
	require.Len(t, due, 1)
	got := due[0]
	assert.Equal(t, timer.ID, got.ID)
	assert.Equal(t, timer.UUID, got.UUID)
	assert.Equal(t, timer.ShardID, got.ShardID)
	assert.True(t, timer.ExecuteAt.Equal(got.ExecuteAt.Time))
	assert.Equal(t, timer.Attempts, got.Attempts)
	assert.Equal(t, timer.CallbackURL, got.CallbackURL)
	assert.Equal(t, timer.CorrelationID, got.CorrelationID)
	assert.Equal(t, timer.CreatedBy, got.CreatedBy)
}
