package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/service"
	"transit/store"
)

// TestSandbox_transitions walks every sandbox transition and rejection of
// docs/sandbox.md, checking the item, the recorded outcome and the event.
func TestSandbox_transitions(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	ids := s.sync("ext-a", "ext-b", "ext-c")
	require.Len(t, ids, 3)

	var allocated string
	t.Run("allocate", func(t *testing.T) {
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
		ev := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated))
		allocated = ev.SandboxID
		sb, _ := s.sandbox(allocated)
		assert.Equal(t, store.StatusAllocated, sb.Status)
		assert.Equal(t, "track-1", sb.AllocatedToTrack)
		assert.Equal(t, "track-1", sb.IdempotencyKey, "idempotency key defaults to the track")
		assert.Equal(t, sb.AllocatedAt, ev.AllocatedAt)
		assert.Equal(t, sb.AllocatedAt+4*3600, ev.ExpiresAt)
		assert.Equal(t, sb.ExternalID, ev.ExternalID)
		assert.Equal(t, sb.Name, ev.Name)
		audit := s.audit(cmd)
		assert.Equal(t, store.Applied, audit["status"])
		assert.Equal(t, "ENTITY#SANDBOX#"+allocated, audit["entity"])
		assert.Equal(t, "track-1", audit["user_id"])
	})

	t.Run("allocate_again_returns_the_existing_allocation", func(t *testing.T) {
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
		ev := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated))
		assert.Equal(t, allocated, ev.SandboxID)
		assert.Len(t, s.inStatus(store.StatusAllocated), 1, "no second sandbox for the same key")
	})

	t.Run("mark_deletion_not_found", func(t *testing.T) {
		s.rejectDeletion(t, uuid.NewString(), "track-1", messages.ReasonNotFound)
	})
	t.Run("mark_deletion_not_owner", func(t *testing.T) {
		s.rejectDeletion(t, allocated, "track-2", messages.ReasonNotOwner)
		sb, _ := s.sandbox(allocated)
		assert.Equal(t, store.StatusAllocated, sb.Status, "a refused release changes nothing")
	})
	t.Run("mark_deletion_wrong_state", func(t *testing.T) {
		free := s.inStatus(store.StatusAvailable)[0].SandboxID
		s.rejectDeletion(t, free, "track-1", messages.ReasonWrongState)
	})

	t.Run("mark_deletion", func(t *testing.T) {
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: allocated, TrackID: "track-1"})
		ev := payloadOf[messages.SandboxDeletionMarkedPayload](t, s.eventFor(cmd, messages.SandboxDeletionMarked))
		sb, _ := s.sandbox(allocated)
		assert.Equal(t, store.StatusPendingDeletion, sb.Status)
		assert.Equal(t, sb.DeletionRequestedAt, ev.DeletionRequestedAt)
		assert.Equal(t, "track-1", ev.TrackID)
		assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	})

	t.Run("mark_deletion_expired", func(t *testing.T) {
		old := s.allocateAt(t, "track-old", -5*time.Hour)
		s.rejectDeletion(t, old, "track-old", messages.ReasonExpired)
	})

	t.Run("expire_sweep_expires_only_overdue_allocations", func(t *testing.T) {
		fresh := s.allocateAt(t, "track-fresh", 0)
		overdue := s.inTrack("track-old")
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxExpire, messages.SandboxExpirePayload{})
		// The sweep fans out one sandbox.expire per overdue sandbox.
		expireID := messages.DerivedID(cmd, messages.SandboxExpire, overdue)
		ev := payloadOf[messages.SandboxExpiredPayload](t, s.eventFor(expireID, messages.SandboxExpired))
		assert.Equal(t, overdue, ev.SandboxID)
		assert.Equal(t, "track-old", ev.TrackID)
		sb, _ := s.sandbox(overdue)
		assert.Equal(t, store.StatusPendingDeletion, sb.Status)
		sb, _ = s.sandbox(fresh)
		assert.Equal(t, store.StatusAllocated, sb.Status, "an allocation inside its window is not expired")
		assert.Equal(t, store.Applied, s.audit(expireID)["status"])
	})

	t.Run("cleanup_deletes_at_the_provider", func(t *testing.T) {
		sb, _ := s.sandbox(allocated)
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: allocated})
		ev := payloadOf[messages.SandboxDeletedPayload](t, s.eventFor(cmd, messages.SandboxDeleted))
		assert.Equal(t, sb.ExternalID, ev.ExternalID)
		_, found := s.sandbox(allocated)
		assert.False(t, found, "the item is deleted")
		assert.Equal(t, 1, s.provider.Deletes(sb.ExternalID))
		assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	})

	t.Run("cleanup_failure_counts_a_retry", func(t *testing.T) {
		pending := s.inTrack("track-old")
		sb, _ := s.sandbox(pending)
		s.provider.FailWhen(func(string) bool { return true })
		defer s.provider.FailWhen(nil)
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxCleanup, messages.SandboxCleanupPayload{SandboxID: pending})
		ev := payloadOf[messages.SandboxDeletionFailedPayload](t, s.eventFor(cmd, messages.SandboxDeletionFailed))
		assert.Equal(t, 1, ev.DeletionRetryCount)
		assert.Contains(t, ev.Reason, "503")
		after, found := s.sandbox(pending)
		require.True(t, found)
		assert.Equal(t, store.StatusPendingDeletion, after.Status)
		assert.Equal(t, sb.DeletionRetryCount+1, after.DeletionRetryCount)
	})

	t.Run("sync_adds_new_and_stales_missing", func(t *testing.T) {
		// ext-a was deleted above; ext-b and ext-c disappear; ext-d is new.
		before := s.inStatus("")
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
			{ExternalID: "ext-d", Name: "d", LabDurationHours: 2},
		}})
		ev := payloadOf[messages.SandboxSyncedPayload](t, s.eventFor(cmd, messages.SandboxSynced))
		require.Len(t, ev.Added, 1)
		added, _ := s.sandbox(ev.Added[0])
		assert.Equal(t, store.StatusAvailable, added.Status)
		assert.Equal(t, "ext-d", added.ExternalID)
		for _, id := range ev.Staled {
			sb, _ := s.sandbox(id)
			assert.Equal(t, store.StatusStale, sb.Status)
		}
		// Every available or allocated sandbox the provider no longer lists.
		var want []string
		for _, sb := range before {
			if sb.Status == store.StatusAvailable || sb.Status == store.StatusAllocated {
				want = append(want, sb.SandboxID)
			}
		}
		assert.ElementsMatch(t, want, ev.Staled)
	})

	t.Run("allocate_from_an_empty_pool_is_rejected", func(t *testing.T) {
		// Take the one available sandbox, then ask again.
		s.allocateAt(t, "track-last", 0)
		cmd := uuid.NewString()
		s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-none"})
		ev := payloadOf[messages.SandboxAllocationRejectedPayload](t, s.eventFor(cmd, messages.SandboxAllocationRejected))
		assert.Equal(t, messages.ReasonPoolExhausted, ev.Reason)
		assert.Equal(t, "track-none", ev.TrackID)
		audit := s.audit(cmd)
		assert.Equal(t, store.Rejected, audit["status"])
		assert.Equal(t, messages.ReasonPoolExhausted, audit["reason"])
	})
}

func (s *stack) rejectDeletion(t *testing.T, sandboxID, trackID, reason string) {
	t.Helper()
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: sandboxID, TrackID: trackID})
	ev := payloadOf[messages.SandboxDeletionRejectedPayload](t, s.eventFor(cmd, messages.SandboxDeletionRejected))
	assert.Equal(t, reason, ev.Reason)
	assert.Equal(t, sandboxID, ev.SandboxID)
	audit := s.audit(cmd)
	assert.Equal(t, store.Rejected, audit["status"])
	assert.Equal(t, reason, audit["reason"])
}

// allocateAt allocates a sandbox to track with the clock shifted by offset.
func (s *stack) allocateAt(t *testing.T, track string, offset time.Duration) string {
	t.Helper()
	s.clock.Shift(offset)
	defer s.clock.Shift(0)
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: track})
	return payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated)).SandboxID
}

func (s *stack) inStatus(status string) []store.Sandbox {
	sbs, err := s.svc.Store.Sandboxes(context.Background(), status)
	require.NoError(s.t, err)
	return sbs
}

func (s *stack) inTrack(track string) string {
	sbs, err := s.svc.Store.TrackSandboxes(context.Background(), track)
	require.NoError(s.t, err)
	require.Len(s.t, sbs, 1)
	return sbs[0].SandboxID
}
