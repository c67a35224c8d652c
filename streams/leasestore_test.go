package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// TestLeaseStore_contract holds the DynamoDB lease store (on both
// emulators) and the in-memory fake the unit tests use to the same
// behaviour, so what the unit tests prove with the fake holds for the
// real store.
func TestLeaseStore_contract(t *testing.T) {
	impls := []struct {
		Name string
		New  func(*testing.T) streams.LeaseStore
	}{
		{Name: "memory", New: func(*testing.T) streams.LeaseStore { return newMemLeases() }},
	}
	for _, e := range emulators {
		impls = append(impls, struct {
			Name string
			New  func(*testing.T) streams.LeaseStore
		}{Name: e.Name, New: func(t *testing.T) streams.LeaseStore {
			db, _ := clients(e.URL(t))
			_, leases := provision(t, db)
			return streams.NewDynamoDBLeaseStore(db, leases)
		}})
	}
	for _, impl := range impls {
		t.Run(impl.Name, func(t *testing.T) {
			t.Parallel()
			leaseStoreContract(t, impl.New(t))
		})
	}
}

func leaseStoreContract(t *testing.T, s streams.LeaseStore) {
	ctx := context.Background()
	const group, arn = "g", "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/1"
	fresh := streams.Lease{Group: group, StreamARN: arn, ShardID: "shard-1"}
	soon := time.Now().Add(time.Minute)

	snap, err := s.List(ctx, group, arn)
	require.NoError(t, err)
	assert.Empty(t, snap.Leases)
	assert.Empty(t, snap.Owners)

	// Taking a shard nobody leased creates its lease, once.
	a1, err := s.Take(ctx, fresh, "a", soon)
	require.NoError(t, err)
	assert.Equal(t, "a", a1.Owner)
	assert.EqualValues(t, 1, a1.Version)
	assert.Empty(t, a1.Checkpoint)
	assert.WithinDuration(t, soon, a1.ExpiresAt, time.Millisecond)
	_, err = s.Take(ctx, fresh, "b", soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost, "a second creation must fail")
	_, err = s.Take(ctx, a1, "b", soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost, "a live lease cannot be taken")

	// Only the holder, at the current version, renews and checkpoints.
	a2, err := s.Renew(ctx, a1, soon.Add(time.Minute))
	require.NoError(t, err)
	assert.EqualValues(t, 2, a2.Version)
	assert.WithinDuration(t, soon.Add(time.Minute), a2.ExpiresAt, time.Millisecond)
	_, err = s.Renew(ctx, a1, soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost, "a stale version")
	impostor := a2
	impostor.Owner = "b"
	_, err = s.Checkpoint(ctx, impostor, "100", soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost, "another owner")
	a3, err := s.Checkpoint(ctx, a2, "100", soon)
	require.NoError(t, err)
	assert.Equal(t, "100", a3.Checkpoint)

	snap, err = s.List(ctx, group, arn)
	require.NoError(t, err)
	require.Contains(t, snap.Leases, "shard-1")
	listed := snap.Leases["shard-1"]
	assert.Equal(t, a3.Version, listed.Version)
	assert.Equal(t, "a", listed.Owner)
	assert.Equal(t, "100", listed.Checkpoint)
	assert.Equal(t, "shard-1", listed.ShardID)
	assert.Equal(t, group, listed.Group)
	assert.Equal(t, arn, listed.StreamARN)

	// A released lease keeps its checkpoint and is free at once.
	require.NoError(t, s.Release(ctx, a3))
	assert.ErrorIs(t, s.Release(ctx, a3), streams.ErrLeaseLost)
	snap, err = s.List(ctx, group, arn)
	require.NoError(t, err)
	released := snap.Leases["shard-1"]
	assert.Empty(t, released.Owner)
	b1, err := s.Take(ctx, released, "b", soon)
	require.NoError(t, err)
	assert.Equal(t, "b", b1.Owner)
	assert.Equal(t, "100", b1.Checkpoint)

	// An expired lease may be taken over; its old holder is then out.
	b2, err := s.Renew(ctx, b1, time.Now().Add(-time.Second))
	require.NoError(t, err)
	c1, err := s.Take(ctx, b2, "c", soon)
	require.NoError(t, err)
	assert.Equal(t, "c", c1.Owner)
	_, err = s.Renew(ctx, b2, soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost)

	// A finished shard is never taken again, even released or expired.
	c2, err := s.Checkpoint(ctx, c1, streams.ShardEnd, time.Now().Add(-time.Second))
	require.NoError(t, err)
	_, err = s.Take(ctx, c2, "d", soon)
	assert.ErrorIs(t, err, streams.ErrLeaseLost)

	// Heartbeats, and the isolation of groups and streams.
	past := time.Now().Add(-time.Second)
	require.NoError(t, s.Heartbeat(ctx, group, arn, "a", soon))
	require.NoError(t, s.Heartbeat(ctx, group, arn, "b", past))
	snap, err = s.List(ctx, group, arn)
	require.NoError(t, err)
	require.Len(t, snap.Owners, 2)
	assert.WithinDuration(t, soon, snap.Owners["a"], time.Millisecond)
	assert.WithinDuration(t, past, snap.Owners["b"], time.Millisecond)
	assert.Len(t, snap.Leases, 1, "heartbeats are not leases")
	for _, other := range [][2]string{{"g2", arn}, {group, arn + "-other"}} {
		snap, err = s.List(ctx, other[0], other[1])
		require.NoError(t, err)
		assert.Empty(t, snap.Leases, "%v", other)
		assert.Empty(t, snap.Owners, "%v", other)
	}
}
