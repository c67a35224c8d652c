package service_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/machine"
	"transit/messages"
	"transit/provider"
	"transit/service"
	"transit/store"
)

// TestSandbox_cleanup_backs_off_then_gets_stuck: a sandbox the provider
// keeps refusing is tried again only once its backoff has passed, by the
// sweep or by hand, and after the last attempt it is left cleanup_stuck
// with a sandbox.cleanup-stuck event, out of the sweep's reach.
func TestSandbox_cleanup_backs_off_then_gets_stuck(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.CleanupMaxAttempts, c.CleanupBackoff, c.CleanupBackoffMax = 3, time.Minute, time.Hour
	})
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2", "ext-3")
	refused := s.allocateAt(t, "track-refused", 0)
	first := s.allocateAt(t, "track-first", 0)
	later := s.allocateAt(t, "track-later", 0)
	sb, _ := s.sandbox(refused)
	refusedExt := sb.ExternalID
	s.provider.FailWhen(func(id string) bool { return id == refusedExt })
	s.release(t, refused, "track-refused")
	s.release(t, first, "track-first")

	// First sweep: both are due; the provider refuses one.
	sweep := s.cleanupSweep()
	failed := payloadOf[messages.SandboxDeletionFailedPayload](t, s.eventFor(messages.DerivedID(sweep, messages.SandboxCleanup, refused), messages.SandboxDeletionFailed))
	assert.Equal(t, 1, failed.DeletionRetryCount)
	s.eventFor(messages.DerivedID(sweep, messages.SandboxCleanup, first), messages.SandboxDeleted)
	sb, _ = s.sandbox(refused)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
	assert.Equal(t, sb.UpdatedAt+60, sb.NextCleanupAt, "the first failure waits the backoff")

	// Second sweep, at once: only the newly released sandbox is due.
	s.release(t, later, "track-later")
	sweep = s.cleanupSweep()
	s.eventFor(messages.DerivedID(sweep, messages.SandboxCleanup, later), messages.SandboxDeleted)
	time.Sleep(2 * time.Second) // the refused one's command, had it been sent, would have been handled with it
	assert.Nil(t, s.audit(messages.DerivedID(sweep, messages.SandboxCleanup, refused)), "the sweep skips a sandbox whose attempt is not due")
	assert.Equal(t, 1, s.provider.Deletes(refusedExt))

	// By hand, before it is due: recorded as not_due, the provider not asked.
	byHand := uuid.NewString()
	s.send(byHand, messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: refused})
	audit := s.waitAudit(byHand)
	assert.Equal(t, store.Rejected, audit["status"])
	assert.Equal(t, machine.ReasonNotDue, audit["reason"])
	assert.Equal(t, 1, s.provider.Deletes(refusedExt))

	// A minute later: the second attempt, which doubles the wait.
	s.clock.Shift(61 * time.Second)
	sweep = s.cleanupSweep()
	failed = payloadOf[messages.SandboxDeletionFailedPayload](t, s.eventFor(messages.DerivedID(sweep, messages.SandboxCleanup, refused), messages.SandboxDeletionFailed))
	assert.Equal(t, 2, failed.DeletionRetryCount)
	sb, _ = s.sandbox(refused)
	assert.Equal(t, sb.UpdatedAt+120, sb.NextCleanupAt)

	// Two minutes after that: the third and last attempt gives up.
	s.clock.Shift(61*time.Second + 121*time.Second)
	sweep = s.cleanupSweep()
	stuck := payloadOf[messages.SandboxCleanupStuckPayload](t, s.eventFor(messages.DerivedID(sweep, messages.SandboxCleanup, refused), messages.SandboxCleanupStuck))
	assert.Equal(t, refused, stuck.SandboxID)
	assert.Equal(t, refusedExt, stuck.ExternalID)
	assert.Equal(t, 3, stuck.DeletionRetryCount)
	assert.Contains(t, stuck.LastError, "503")
	sb, _ = s.sandbox(refused)
	assert.Equal(t, store.StatusCleanupStuck, sb.Status)
	assert.Zero(t, sb.NextCleanupAt)
	assert.Equal(t, stuck.LastError, sb.LastDeletionError)
	assert.Eventually(t, func() bool { return slices.Contains(ids(s.inStatus(store.StatusCleanupStuck)), refused) },
		10*time.Second, 200*time.Millisecond, "an operator lists it in its own StatusIndex partition")
	assert.NotContains(t, ids(s.inStatus(store.StatusPendingDeletion)), refused)

	// Hours later nothing tries again: it is no pending deletion any more.
	s.clock.Shift(10 * time.Hour)
	byHand = uuid.NewString()
	s.send(byHand, messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: refused})
	assert.Equal(t, messages.ReasonWrongState, s.waitAudit(byHand)["reason"])
	assert.Equal(t, 3, s.provider.Deletes(refusedExt), "three attempts, no more")
}

// TestSandbox_stale_sandbox_drops_its_allocation: a sync that no longer
// lists an allocated sandbox takes it from its track (the seed's STALE
// item: no track, no key, allocated_at 0), so the track may allocate
// again under the same key.
func TestSandbox_stale_sandbox_drops_its_allocation(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2")
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1", IdempotencyKey: "key-1"})
	held := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated))
	other := "ext-1"
	if held.ExternalID == other {
		other = "ext-2"
	}

	before := s.clock.Now().Unix()
	ev := s.syncInventory(uuid.NewString(), inventoryOf(other))
	assert.Equal(t, []string{held.SandboxID}, ev.Staled)
	sb, _ := s.sandbox(held.SandboxID)
	assert.Equal(t, store.StatusStale, sb.Status)
	assert.Empty(t, sb.AllocatedToTrack)
	assert.Empty(t, sb.IdempotencyKey)
	assert.Zero(t, sb.AllocatedAt)
	assert.GreaterOrEqual(t, sb.StaleSince, before)
	assert.Eventually(t, func() bool { return len(s.trackSandboxes("track-1")) == 0 }, 10*time.Second, 200*time.Millisecond,
		"the track holds nothing")

	// Its key is free: the same track and key get the other sandbox.
	again := uuid.NewString()
	s.send(again, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1", IdempotencyKey: "key-1"})
	next := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(again, messages.SandboxAllocated))
	assert.NotEqual(t, held.SandboxID, next.SandboxID)
	assert.Equal(t, other, next.ExternalID)
	s.rejectDeletion(t, held.SandboxID, "track-1", messages.ReasonWrongState)
}

// TestSandbox_sync_refreshes_last_synced_of_every_listed_sandbox: each
// sync notes when it listed every sandbox it names, whatever its state,
// and changes nothing else of it; a stale one listed again stays stale.
func TestSandbox_sync_refreshes_last_synced_of_every_listed_sandbox(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	s.sync("ext-1", "ext-2", "ext-3", "ext-4")
	pending := s.allocateAt(t, "track-p", 0)
	s.release(t, pending, "track-p")
	allocated := s.allocateAt(t, "track-a", 0)
	free := s.inStatus(store.StatusAvailable)
	require.Len(t, free, 2)
	kept, dropped := free[0], free[1]

	s.clock.Shift(time.Hour)
	before := s.clock.Now().Unix()
	ev := s.syncInventory(uuid.NewString(), inventoryOf(s.externalIDs(pending, allocated, kept.SandboxID)...))
	assert.Empty(t, ev.Added)
	assert.Equal(t, []string{dropped.SandboxID}, ev.Staled)
	for _, id := range []string{pending, allocated, kept.SandboxID} {
		sb, _ := s.sandbox(id)
		assert.GreaterOrEqual(t, sb.LastSynced, before, "%s (%s) was listed", id, sb.Status)
		assert.Less(t, sb.UpdatedAt, before, "%s: a refresh is no change of state", id)
	}
	sb, _ := s.sandbox(allocated)
	assert.Equal(t, store.StatusAllocated, sb.Status)
	assert.Equal(t, "track-a", sb.AllocatedToTrack, "the allocation is untouched")
	sb, _ = s.sandbox(pending)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
	sb, _ = s.sandbox(dropped.SandboxID)
	assert.Less(t, sb.LastSynced, before, "not listed, not refreshed")

	s.clock.Shift(2 * time.Hour)
	before = s.clock.Now().Unix()
	ev = s.syncInventory(uuid.NewString(), inventoryOf(s.externalIDs(pending, allocated, kept.SandboxID, dropped.SandboxID)...))
	assert.Empty(t, ev.Added)
	assert.Empty(t, ev.Staled)
	sb, _ = s.sandbox(dropped.SandboxID)
	assert.Equal(t, store.StatusStale, sb.Status, "listed again, it stays stale until reinstated")
	assert.GreaterOrEqual(t, sb.LastSynced, before)
	assert.Greater(t, sb.LastSynced, sb.StaleSince)
}

// TestSandbox_reinstate_and_retire: an operator's two answers to a stale
// sandbox, and the rejections of everything else.
func TestSandbox_reinstate_and_retire(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	ids := s.sync("ext-1", "ext-2", "ext-3")
	require.Len(t, ids, 3)
	byExt := map[string]string{}
	for _, id := range ids {
		sb, _ := s.sandbox(id)
		byExt[sb.ExternalID] = id
	}
	back, gone, live := byExt["ext-2"], byExt["ext-3"], byExt["ext-1"]
	// Each sync in a second of its own: a sandbox listed in the second it
	// is staled counts as listed since.
	s.clock.Shift(10 * time.Second)
	s.syncInventory(uuid.NewString(), inventoryOf("ext-1"))
	s.clock.Shift(20 * time.Second)
	s.syncInventory(uuid.NewString(), inventoryOf("ext-1", "ext-2"))
	sb, _ := s.sandbox(back)
	require.Equal(t, store.StatusStale, sb.Status, "a sandbox listed again stays stale")

	t.Run("retire_refuses_a_sandbox_listed_since_it_was_staled", func(t *testing.T) {
		ev := s.operatorRejected(t, messages.SandboxRetire, back, messages.SandboxRetireRejected)
		assert.Equal(t, messages.ReasonListed, ev.Reason)
		_, found := s.sandbox(back)
		assert.True(t, found)
	})
	t.Run("reinstate", func(t *testing.T) {
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxReinstate, messages.SandboxReinstatePayload{SandboxID: back})
		ev := payloadOf[messages.SandboxReinstatedPayload](t, s.eventFor(cmd, messages.SandboxReinstated))
		assert.Equal(t, back, ev.SandboxID)
		assert.Equal(t, "ext-2", ev.ExternalID)
		sb, _ := s.sandbox(back)
		assert.Equal(t, store.StatusAvailable, sb.Status)
		assert.Zero(t, sb.StaleSince)
		assert.Equal(t, store.Applied, s.audit(cmd)["status"])
		// Back in the pool: both listed sandboxes can be allocated.
		got := []string{s.allocateAt(t, "track-1", 0), s.allocateAt(t, "track-2", 0)}
		assert.ElementsMatch(t, []string{back, live}, got)
	})
	t.Run("retire", func(t *testing.T) {
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxRetire, messages.SandboxRetirePayload{SandboxID: gone})
		ev := payloadOf[messages.SandboxRetiredPayload](t, s.eventFor(cmd, messages.SandboxRetired))
		assert.Equal(t, gone, ev.SandboxID)
		assert.Equal(t, "ext-3", ev.ExternalID)
		_, found := s.sandbox(gone)
		assert.False(t, found, "the item is deleted")
		assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	})
	t.Run("rejections", func(t *testing.T) {
		cases := []struct {
			Type      messages.Type
			SandboxID string
			Rejected  messages.Type
			Reason    string
		}{
			{messages.SandboxReinstate, gone, messages.SandboxReinstateRejected, messages.ReasonNotFound},
			{messages.SandboxRetire, gone, messages.SandboxRetireRejected, messages.ReasonNotFound},
			{messages.SandboxReinstate, live, messages.SandboxReinstateRejected, messages.ReasonWrongState},
			{messages.SandboxRetire, live, messages.SandboxRetireRejected, messages.ReasonWrongState},
		}
		for _, c := range cases {
			ev := s.operatorRejected(t, c.Type, c.SandboxID, c.Rejected)
			assert.Equal(t, c.Reason, ev.Reason, "%s of %s", c.Type, c.SandboxID)
		}
		sb, _ := s.sandbox(live)
		assert.Equal(t, store.StatusAllocated, sb.Status, "a refused command changes nothing")
	})
}

// TestSandbox_sync_of_any_size: a sync changing far more sandboxes than
// one transaction holds applies in several, with one outcome; and a sync
// redelivered onto a pool its first attempt left half done finishes the
// work.
func TestSandbox_sync_of_any_size(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	ext := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("ext-%03d", i))
		}
		return out
	}

	first := uuid.NewString()
	ev := s.syncInventory(first, inventoryOf(ext(0, 250)...))
	assert.Len(t, ev.Added, 250)
	assert.Empty(t, ev.Staled)
	s.requirePool(t, ext(0, 250), nil)
	assert.Equal(t, store.Applied, s.audit(first)["status"])

	// 130 staled, 30 added, 120 refreshed: three transactions.
	second := uuid.NewString()
	before := s.clock.Now().Unix()
	ev = s.syncInventory(second, inventoryOf(append(ext(0, 120), ext(250, 280)...)...))
	assert.Len(t, ev.Added, 30)
	assert.Len(t, ev.Staled, 130)
	s.requirePool(t, append(ext(0, 120), ext(250, 280)...), ext(120, 250))
	for _, sb := range s.inStatus(store.StatusAvailable) {
		assert.GreaterOrEqual(t, sb.LastSynced, before, sb.ExternalID)
	}

	// The third sync's first attempt crashed after adding ext-300..349:
	// played by a sync that adds just those. Its redelivery finds them
	// listed, and ends the pool where the inventory says.
	third := append(ext(0, 60), ext(300, 400)...)
	s.syncInventory(uuid.NewString(), inventoryOf(slices.Concat(ext(0, 120), ext(250, 280), ext(300, 350))...))
	ev = s.syncInventory(uuid.NewString(), inventoryOf(third...))
	assert.Len(t, ev.Added, 50, "what the first attempt added is found, not added twice")
	assert.Len(t, ev.Staled, 90)
	s.requirePool(t, third, ext(60, 280))
	assert.Len(t, s.inStatus(""), 380, "no twins")
}

// TestSandbox_sync_decides_again_where_the_pool_read_was_behind: a sandbox
// StatusIndex did not show the sync (an index lags its table) is taken
// for new; its addition's condition fails, and the sync decides again on
// the item as it is, in whichever of its transactions it falls: the last
// change of a transaction without the outcome, or one with it.
func TestSandbox_sync_decides_again_where_the_pool_read_was_behind(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	var inventory []string
	for i := range 150 {
		inventory = append(inventory, fmt.Sprintf("ext-%03d", i))
	}
	// Changes go stalings, additions, refreshes: ext-099 is the 100th
	// change, the first transaction's last; ext-120 is in the second.
	hidden := []string{"ext-099", "ext-120"}
	for _, ext := range hidden {
		s.putUnindexed(ext)
	}

	before := s.clock.Now().Unix()
	ev := s.syncInventory(uuid.NewString(), inventoryOf(inventory...))
	assert.Len(t, ev.Added, 148)
	for _, ext := range hidden {
		id := store.SandboxIDFor(ext)
		assert.NotContains(t, ev.Added, id, "%s was there already", ext)
		sb, found := s.sandbox(id)
		require.True(t, found)
		assert.Equal(t, store.StatusAvailable, sb.Status)
		assert.Equal(t, "hidden "+ext, sb.Name, "refreshed, not overwritten")
		assert.GreaterOrEqual(t, sb.LastSynced, before)
	}
}

// putUnindexed writes an available sandbox without allocated_at, which
// keeps it out of every index, as if StatusIndex had not caught up yet.
func (s *stack) putUnindexed(externalID string) {
	id := store.SandboxIDFor(externalID)
	item, err := attributevalue.MarshalMap(map[string]any{
		"PK": "SBX#" + id, "SK": "META", "sandbox_id": id, "external_id": externalID, "name": "hidden " + externalID,
		"status": store.StatusAvailable, "lab_duration_hours": 4, "deletion_retry_count": 0,
		"created_at": time.Now().Unix() - 60, "updated_at": time.Now().Unix() - 60, "last_synced": time.Now().Unix() - 60,
	})
	require.NoError(s.t, err)
	_, err = s.svc.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, store.SandboxPool)), Item: item,
	})
	require.NoError(s.t, err)
}

// TestSandbox_sync_pulls_the_inventory_from_the_provider: a sync without
// an inventory asks the provider for its list, every page of it, once
// however often it is delivered; an empty inventory still means none.
func TestSandbox_sync_pulls_the_inventory_from_the_provider(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	var listed []provider.Sandbox
	for i := range 7 {
		listed = append(listed, provider.Sandbox{ExternalID: fmt.Sprintf("ext-p%d", i), Name: fmt.Sprintf("pulled %d", i), LabDurationHours: float64(i + 1)})
	}
	s.provider.Put(listed...)
	s.provider.SetPageSize(3)

	pull := uuid.NewString()
	ev := s.syncInventory(pull, nil)
	require.Len(t, ev.Added, 7, "three pages")
	for i, sb := range listed {
		got, found := s.sandbox(store.SandboxIDFor(sb.ExternalID))
		require.True(t, found, sb.ExternalID)
		assert.Equal(t, store.StatusAvailable, got.Status)
		assert.Equal(t, sb.Name, got.Name)
		assert.Equal(t, float64(i+1), got.LabDurationHours)
	}
	assert.Equal(t, 1, s.provider.Lists())

	// The same command again: its outcome replayed, the provider not asked.
	s.send(pull, messages.SandboxSync, messages.SandboxSyncPayload{})
	s.collect(60*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, pull)) >= 2 })
	assert.Equal(t, 1, s.provider.Lists())

	// The provider deleted one: the next pull stales it.
	require.NoError(t, provider.New(s.cfg.ProviderURL, time.Second).DeleteSandbox(context.Background(), "ext-p0"))
	ev = s.syncInventory(uuid.NewString(), nil)
	assert.Empty(t, ev.Added)
	assert.Equal(t, []string{store.SandboxIDFor("ext-p0")}, ev.Staled)

	// An empty inventory is no pull: the provider has none.
	ev = s.syncInventory(uuid.NewString(), []messages.InventoryItem{})
	assert.Len(t, ev.Staled, 6)
	assert.Equal(t, 2, s.provider.Lists())
}

// TestSandbox_sync_without_inventory_or_provider_is_dead_lettered: with
// no provider to pull from, a sync without inventory can never succeed
// here; it goes to the DLQ at once, saying why.
func TestSandbox_sync_without_inventory_or_provider_is_dead_lettered(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.ProviderURL = "" })
	s.serve(service.ServeOptions{})
	s.send(uuid.NewString(), messages.SandboxSync, messages.SandboxSyncPayload{})
	letters := s.deadLetters(1)
	assert.Contains(t, letters[0].Reason, "invalid inventory")
	assert.Contains(t, letters[0].Reason, "TRANSIT_PROVIDER_URL")
	assert.Zero(t, s.auditCount())
}

// release has track release its sandbox and waits for the event.
func (s *stack) release(t *testing.T, sandboxID, track string) {
	t.Helper()
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: sandboxID, TrackID: track})
	s.eventFor(cmd, messages.SandboxDeletionMarked)
}

// cleanupSweep sends a cleanup sweep and returns its ID.
func (s *stack) cleanupSweep() string {
	id := uuid.NewString()
	s.send(id, messages.SandboxCleanup, messages.SandboxCleanupPayload{})
	return id
}

// syncInventory sends a sync with inventory (nil: a pull) and returns
// its event's payload.
func (s *stack) syncInventory(id string, inventory []messages.InventoryItem) messages.SandboxSyncedPayload {
	s.t.Helper()
	s.send(id, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: inventory})
	return payloadOf[messages.SandboxSyncedPayload](s.t, s.eventFor(id, messages.SandboxSynced))
}

// operatorRejected sends a reinstate or retire of sandboxID, waits for
// its rejection and checks it is recorded as one.
func (s *stack) operatorRejected(t *testing.T, typ messages.Type, sandboxID string, want messages.Type) messages.SandboxRejectedPayload {
	t.Helper()
	cmd := uuid.NewString()
	var payload any = messages.SandboxReinstatePayload{SandboxID: sandboxID}
	if typ == messages.SandboxRetire {
		payload = messages.SandboxRetirePayload{SandboxID: sandboxID}
	}
	s.send(cmd, typ, payload)
	ev := payloadOf[messages.SandboxRejectedPayload](t, s.eventFor(cmd, want))
	assert.Equal(t, sandboxID, ev.SandboxID)
	audit := s.audit(cmd)
	assert.Equal(t, store.Rejected, audit["status"])
	assert.Equal(t, ev.Reason, audit["reason"])
	return ev
}

// waitAudit waits for the recorded outcome of a command that emits no
// event.
func (s *stack) waitAudit(id string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if a := s.audit(id); a != nil {
			return a
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no outcome recorded for %s within 30s", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requirePool checks that exactly the sandboxes of available are
// available and those of stale are stale, by external ID.
func (s *stack) requirePool(t *testing.T, available, stale []string) {
	t.Helper()
	externals := func(status string) []string {
		var out []string
		for _, sb := range s.inStatus(status) {
			out = append(out, sb.ExternalID)
		}
		return out
	}
	assert.ElementsMatch(t, available, externals(store.StatusAvailable))
	assert.ElementsMatch(t, stale, externals(store.StatusStale))
}

func (s *stack) trackSandboxes(track string) []store.Sandbox {
	sbs, err := s.svc.Store.TrackSandboxes(context.Background(), track)
	require.NoError(s.t, err)
	return sbs
}

// externalIDs are the external IDs of the sandboxes named.
func (s *stack) externalIDs(sandboxIDs ...string) []string {
	var out []string
	for _, id := range sandboxIDs {
		sb, found := s.sandbox(id)
		require.True(s.t, found, id)
		out = append(out, sb.ExternalID)
	}
	return out
}

func inventoryOf(externalIDs ...string) []messages.InventoryItem {
	inv := []messages.InventoryItem{}
	for _, id := range externalIDs {
		inv = append(inv, messages.InventoryItem{ExternalID: id, Name: "name-" + id, LabDurationHours: 4})
	}
	return inv
}

func ids(sbs []store.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.SandboxID
	}
	return out
}
