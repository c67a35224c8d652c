package streams_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

func seqOf(n int) string { return fmt.Sprintf("%021d", n) }

func TestSubscriber_records_become_messages(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	keys := map[string]types.AttributeValue{"PK": s("SBX#1"), "SK": s("META")}
	before := map[string]types.AttributeValue{"PK": s("SBX#1"), "SK": s("META"), "status": s("available")}
	after := map[string]types.AttributeValue{
		"PK": s("SBX#1"), "SK": s("META"), "status": s("allocated"),
		// Beyond float64's 2^53: must arrive digit for digit.
		"big":    &types.AttributeValueMemberN{Value: "12345678901234567890123"},
		"ratio":  &types.AttributeValueMemberN{Value: "0.25"},
		"ok":     &types.AttributeValueMemberBOOL{Value: true},
		"none":   &types.AttributeValueMemberNULL{Value: true},
		"tags":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"sizes":  &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"blob":   &types.AttributeValueMemberB{Value: []byte("hi")},
		"nested": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"list": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), &types.AttributeValueMemberN{Value: "1"}}}}},
	}
	f.putRecord("shard-0", types.Record{EventID: aws.String("ev-insert"), EventName: types.OperationTypeInsert,
		Dynamodb: &types.StreamRecord{ApproximateCreationDateTime: &at, Keys: keys, NewImage: before}})
	f.putRecord("shard-0", types.Record{EventID: aws.String("ev-modify"), EventName: types.OperationTypeModify,
		Dynamodb: &types.StreamRecord{ApproximateCreationDateTime: &at, Keys: keys, OldImage: before, NewImage: after}})
	f.putRecord("shard-0", types.Record{EventID: aws.String("ev-remove"), EventName: types.OperationTypeRemove,
		UserIdentity: &types.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")},
		Dynamodb:     &types.StreamRecord{ApproximateCreationDateTime: &at, Keys: keys, OldImage: after}})

	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	msgs := subscribe(t, sub, "items")

	insert := receive(t, msgs)
	insert.Ack()
	assert.Equal(t, "ev-insert", insert.UUID, "the UUID is the event ID, stable across re-reads")
	assert.Equal(t, message.Metadata{"type": streams.TypeInsert}, insert.Metadata, "one attribute only: SQS allows ten")
	assert.JSONEq(t, `{"type":"dynamodb.insert","table":"items","keys":{"PK":"SBX#1","SK":"META"},
		"new_image":{"PK":"SBX#1","SK":"META","status":"available"},
		"sequence_number":"000000000000000000001","shard_id":"shard-0","event_id":"ev-insert",
		"approximate_creation_time":"2026-11-22T10:00:00Z","ttl_removal":false}`, string(insert.Payload))

	modify := receive(t, msgs)
	modify.Ack()
	assert.Equal(t, streams.TypeModify, modify.Metadata.Get("type"))
	assert.JSONEq(t, `{"type":"dynamodb.modify","table":"items","keys":{"PK":"SBX#1","SK":"META"},
		"old_image":{"PK":"SBX#1","SK":"META","status":"available"},
		"new_image":{"PK":"SBX#1","SK":"META","status":"allocated","big":12345678901234567890123,"ratio":0.25,
			"ok":true,"none":null,"tags":["a","b"],"sizes":[1,2.5],"blob":"aGk=","nested":{"list":["x",1]}},
		"sequence_number":"000000000000000000002","shard_id":"shard-0","event_id":"ev-modify",
		"approximate_creation_time":"2026-11-22T10:00:00Z","ttl_removal":false}`, string(modify.Payload))
	// JSONEq compares numbers as float64; the digits themselves must survive.
	assert.Contains(t, string(modify.Payload), `"big":12345678901234567890123`)

	remove := receive(t, msgs)
	remove.Ack()
	r := decode(t, remove)
	assert.Equal(t, streams.TypeRemove, r.Type)
	assert.True(t, r.TTLRemoval, "removed by DynamoDB's TTL")
	assert.Nil(t, r.NewImage)
	assert.NotContains(t, string(remove.Payload), "new_image", "a remove has no new image")
	assert.Equal(t, "allocated", r.OldImage["status"])
}

func TestSubscriber_table_without_stream_is_an_error(t *testing.T) {
	f := newFakeStream("items")
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)

	_, err := sub.Subscribe(context.Background(), "no-stream")
	require.ErrorIs(t, err, streams.ErrNoStream)
	assert.Contains(t, err.Error(), "no-stream")

	_, err = sub.Subscribe(context.Background(), "missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "describe table missing")
}

func TestSubscriber_several_tables(t *testing.T) {
	sandboxes, layers := newFakeStream("sandboxes"), newFakeStream("layers")
	sandboxes.addShard("shard-0", "")
	layers.addShard("shard-0", "") // same shard ID, another stream
	fromSandboxes, fromLayers := sandboxes.put("shard-0", 2), layers.put("shard-0", 3)
	c := tablesClient{"sandboxes": sandboxes.client("a"), "layers": layers.client("a")}
	cfg := fastConfig(nil, newMemLeases(), "a")
	cfg.Tables, cfg.Streams = c, c
	sub := newSubscriber(t, cfg, nil)

	got := map[string][]string{}
	for table, n := range map[string]int{"sandboxes": 2, "layers": 3} {
		msgs := subscribe(t, sub, table)
		for range n {
			m := receive(t, msgs)
			m.Ack()
			r := decode(t, m)
			assert.Equal(t, table, r.Table)
			got[table] = append(got[table], r.EventID)
		}
	}
	assert.Equal(t, fromSandboxes, got["sandboxes"])
	assert.Equal(t, fromLayers, got["layers"])

	_, err := sub.Subscribe(t.Context(), "layers")
	assert.ErrorContains(t, err, "already subscribed", "one subscription per table: two would share one owner ID")
}

func TestSubscriber_parent_before_child(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	parent := f.put("shard-0", 3)
	leases := newMemLeases()
	sub := newSubscriber(t, fastConfig(f.client("a"), leases, "a"), nil)

	var mu sync.Mutex
	var log []string // "deliver ev-…" and "ack ev-…", in order
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	done := consume(subscribe(t, sub, "items"), func(m *message.Message) {
		note("deliver " + m.UUID)
		// Slow handlers: a child record read too early would be
		// delivered while a parent record is still in flight.
		time.Sleep(20 * time.Millisecond)
		note("ack " + m.UUID)
		m.Ack()
	})

	// The split happens while the parent is being read: it gets its last
	// records and closes, and two children appear with records of their own.
	waitFor(t, "the first parent record", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(log) > 0 })
	parent = append(parent, f.put("shard-0", 2)...)
	f.addShard("shard-1a", "shard-0")
	f.addShard("shard-1b", "shard-0")
	children := append(f.put("shard-1a", 3), f.put("shard-1b", 3)...)
	f.closeShard("shard-0")

	all := len(parent) + len(children)
	waitFor(t, "every record acked", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 2*all
	})
	closeWithin(t, sub)
	waitClosed(t, done)

	index := map[string]int{}
	for i, e := range log {
		index[e] = i
	}
	lastParentAck := 0
	for _, id := range parent {
		lastParentAck = max(lastParentAck, index["ack "+id])
	}
	for _, id := range children {
		assert.Greater(t, index["deliver "+id], lastParentAck, "child record %s delivered before the parent was finished", id)
	}
	for _, ids := range [][]string{parent, children[:3], children[3:]} {
		for i := 1; i < len(ids); i++ {
			assert.Less(t, index["ack "+ids[i-1]], index["deliver "+ids[i]], "within a shard, one at a time and in order")
		}
	}
	assert.Len(t, log, 2*all, "each record delivered once")
	assert.Equal(t, streams.ShardEnd, leases.get("test", f.arn, "shard-0").Checkpoint)
}

func TestSubscriber_discovers_new_shards(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	f.addShard("shard-1", "")
	first := append(f.put("shard-0", 1), f.put("shard-1", 1)...)
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	j := newJournal()
	done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
	waitFor(t, "the first records", 5*time.Second, func() bool { return len(j.acked("")) == len(first) })

	// A shard created while the subscriber runs, listed on a later page.
	f.addShard("shard-2", "")
	later := f.put("shard-2", 2)
	waitFor(t, "the new shard's records", 5*time.Second, func() bool { return len(j.acked("")) == len(first)+len(later) })
	closeWithin(t, sub)
	waitClosed(t, done)

	acked := j.acked("")
	for _, id := range append(first, later...) {
		assert.Equal(t, 1, acked[id], id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Contains(t, f.describeStarts, "shard-1", "shard-2 is only on the third page: pagination followed")
}

func TestSubscriber_renews_expired_iterator(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	ids := f.put("shard-0", 7) // batches of 3
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	j := newJournal()
	done := consume(subscribe(t, sub, "items"), func(m *message.Message) {
		if m.UUID == ids[1] {
			// The iterator for the second batch expires before it is used.
			f.expireNextRead("shard-0")
		}
		j.handler("a", 0)(m)
	})
	waitFor(t, "every record", 5*time.Second, func() bool { return len(j.acked("")) == len(ids) })
	closeWithin(t, sub)
	waitClosed(t, done)

	var got []string
	for _, d := range j.snapshot() {
		got = append(got, d.record.EventID)
	}
	assert.Equal(t, ids, got, "nothing lost, nothing twice, in order")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.iteratorCalls, 2)
	renewed := f.iteratorCalls[1]
	assert.Equal(t, types.ShardIteratorTypeAfterSequenceNumber, renewed.ShardIteratorType)
	assert.Equal(t, seqOf(3), aws.ToString(renewed.SequenceNumber), "renewed after the last acked record")
}

func TestSubscriber_reports_trimmed_data(t *testing.T) {
	t.Run("checkpoint_older_than_the_trim_horizon", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 6)
		leases := newMemLeases()
		// An earlier run acked two records, then the shard went unread
		// past the stream's retention: the next two were trimmed.
		seed, err := leases.Take(context.Background(), streams.Lease{Group: "test", StreamARN: f.arn, ShardID: "shard-0"}, "old", time.Now().Add(time.Minute))
		require.NoError(t, err)
		seed, err = leases.Checkpoint(context.Background(), seed, seqOf(2), time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.NoError(t, leases.Release(context.Background(), seed))
		f.trim("shard-0", 4)

		var reports []streams.Trimmed
		var mu sync.Mutex
		cfg := fastConfig(f.client("a"), leases, "a")
		cfg.OnTrimmed = func(tr streams.Trimmed) { mu.Lock(); reports = append(reports, tr); mu.Unlock() }
		logger := newCaptureLogger()
		sub := newSubscriber(t, cfg, logger)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "the records left", 5*time.Second, func() bool { return len(j.acked("")) == 2 })
		closeWithin(t, sub)
		waitClosed(t, done)

		assert.Equal(t, map[string]int{ids[4]: 1, ids[5]: 1}, j.acked(""), "reading goes on from the trim horizon")
		assert.EqualValues(t, 1, sub.TrimmedCount())
		require.Len(t, reports, 1)
		assert.Equal(t, "shard-0", reports[0].ShardID)
		assert.Equal(t, "items", reports[0].Table)
		assert.Equal(t, seqOf(2), reports[0].After)
		var trimmed *types.TrimmedDataAccessException
		assert.ErrorAs(t, reports[0].Err, &trimmed)
		assertTrimmedLogged(t, logger, "shard-0")
	})

	t.Run("records_trimmed_while_reading", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 6) // batches of 3
		cfg := fastConfig(f.client("a"), newMemLeases(), "a")
		logger := newCaptureLogger()
		sub := newSubscriber(t, cfg, logger)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), func(m *message.Message) {
			if m.UUID == ids[1] {
				// A slow consumer: by the time it reads the second batch
				// the stream has dropped records 4 and 5.
				f.trim("shard-0", 5)
			}
			j.handler("a", 0)(m)
		})
		waitFor(t, "the records left", 5*time.Second, func() bool { return len(j.acked("")) == 4 })
		closeWithin(t, sub)
		waitClosed(t, done)

		assert.Equal(t, map[string]int{ids[0]: 1, ids[1]: 1, ids[2]: 1, ids[5]: 1}, j.acked(""))
		assert.EqualValues(t, 1, sub.TrimmedCount())
		assertTrimmedLogged(t, logger, "shard-0")
	})
}

func assertTrimmedLogged(t *testing.T, logger *captureLogger, shard string) {
	t.Helper()
	for _, e := range logger.errors() {
		var trimmed *types.TrimmedDataAccessException
		if e.fields["shard_id"] == shard && errors.As(e.err, &trimmed) {
			return
		}
	}
	t.Errorf("no error-level log of the trimmed records of %s in %+v", shard, logger.errors())
}

func TestSubscriber_nack_redelivers_after_backoff(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	ids := f.put("shard-0", 3)
	sub := newSubscriber(t, fastConfig(f.client("a"), newMemLeases(), "a"), nil)
	msgs := subscribe(t, sub, "items")

	type got struct {
		id      string
		payload string
		at      time.Time
	}
	var seen []got
	for len(seen) < 5 {
		m := receive(t, msgs)
		seen = append(seen, got{m.UUID, string(m.Payload), time.Now()})
		if len(seen) <= 2 {
			m.Nack()
		} else {
			m.Ack()
		}
	}
	assert.Equal(t, []string{ids[0], ids[0], ids[0], ids[1], ids[2]},
		[]string{seen[0].id, seen[1].id, seen[2].id, seen[3].id, seen[4].id}, "the same record again, and nothing else meanwhile")
	assert.Equal(t, seen[0].payload, seen[2].payload)
	// NackBackoff 20ms, doubling.
	assert.GreaterOrEqual(t, seen[1].at.Sub(seen[0].at), 20*time.Millisecond)
	assert.GreaterOrEqual(t, seen[2].at.Sub(seen[1].at), 40*time.Millisecond)
}

func TestSubscriber_instances_share_shards(t *testing.T) {
	f := newFakeStream("items")
	leases := newMemLeases()
	f.guard = leases.holderGuard("test", f.arn)
	var all []string
	for i := range 4 {
		id := fmt.Sprintf("shard-%d", i)
		f.addShard(id, "")
		all = append(all, f.put(id, 40)...)
	}
	j := newJournal()
	a := newSubscriber(t, fastConfig(f.client("a"), leases, "a"), nil)
	b := newSubscriber(t, fastConfig(f.client("b"), leases, "b"), nil)
	doneA := consume(subscribe(t, a, "items"), j.handler("a", 15*time.Millisecond))
	doneB := consume(subscribe(t, b, "items"), j.handler("b", 15*time.Millisecond))

	// Both read: the shards are split between them.
	waitFor(t, "both instances reading", 5*time.Second, func() bool { return j.count("a") > 5 && j.count("b") > 5 })
	require.Less(t, len(j.acked("")), len(all), "the test must close a while shards are still unread")
	closeWithin(t, a)
	waitClosed(t, doneA)
	ackedByA := j.acked("a")

	waitFor(t, "every record acked", 15*time.Second, func() bool { return len(j.acked("")) == len(all) })
	closeWithin(t, b)
	waitClosed(t, doneB)

	assert.Empty(t, f.guardViolations(), "a shard read by an instance not holding its lease")
	assert.Empty(t, j.overlaps, "two instances held records of one shard at once")
	acked := j.acked("")
	for _, id := range all {
		assert.Equal(t, 1, acked[id], "%s acked once: nothing replayed after a hand-over, nothing missed", id)
	}
	for _, d := range j.snapshot() {
		if d.instance == "b" {
			assert.Zero(t, ackedByA[d.record.EventID], "b replayed %s, acked by a", d.record.EventID)
		}
	}
	readers := map[string]bool{}
	for _, r := range f.allReads() {
		readers[r.reader+" "+r.shard] = true
	}
	for i := range 4 {
		assert.True(t, readers[fmt.Sprintf("b shard-%d", i)], "b took over shard-%d", i)
	}
}

// Four shards on three instances: an even share is one or two each, and
// the third instance to join gets a shard even though the first two hold
// no more than two (a donor hands one back for it).
func TestSubscriber_three_instances_split_four_shards(t *testing.T) {
	f := newFakeStream("items")
	leases := newMemLeases()
	f.guard = leases.holderGuard("test", f.arn)
	var all []string
	for i := range 4 {
		id := fmt.Sprintf("shard-%d", i)
		f.addShard(id, "")
		all = append(all, f.put(id, 60)...)
	}
	j := newJournal()
	var done []<-chan struct{}
	var subs []*streams.Subscriber
	for _, name := range []string{"a", "b", "c"} {
		sub := newSubscriber(t, fastConfig(f.client(name), leases, name), nil)
		subs = append(subs, sub)
		done = append(done, consume(subscribe(t, sub, "items"), j.handler(name, 15*time.Millisecond)))
		// Each joins once the ones before it are reading.
		waitFor(t, name+" reading", 5*time.Second, func() bool { return j.count(name) > 2 })
	}
	require.Less(t, len(j.acked("")), len(all), "the test must end while shards are still unread")
	waitFor(t, "every record acked", 20*time.Second, func() bool { return len(j.acked("")) == len(all) })
	for i, sub := range subs {
		closeWithin(t, sub)
		waitClosed(t, done[i])
	}
	assert.Empty(t, f.guardViolations(), "a shard read by an instance not holding its lease")
	assert.Empty(t, j.overlaps, "two instances held records of one shard at once")
	for id, n := range j.acked("") {
		assert.Equal(t, 1, n, "%s acked once", id)
	}
}

func TestSubscriber_takes_over_after_lease_lapses(t *testing.T) {
	f := newFakeStream("items")
	leases := newMemLeases()
	f.guard = leases.holderGuard("test", f.arn)
	shards := []string{"shard-0", "shard-1"}
	byShard := map[string][]string{}
	for _, id := range shards {
		f.addShard(id, "")
		byShard[id] = f.put(id, 30)
	}
	j := newJournal()
	cutOff := &flakyLeases{LeaseStore: leases}
	cfgA := fastConfig(f.client("a"), cutOff, "a")
	// Every ack checkpointed: a stops at the first ack after the cut, so
	// b's first record is the one after a's last ack (batched
	// checkpoints have their own crash test).
	cfgA.CheckpointEvery = 1
	a := newSubscriber(t, cfgA, nil)
	doneA := consume(subscribe(t, a, "items"), j.handler("a", 10*time.Millisecond))
	waitFor(t, "a reading both shards", 5*time.Second, func() bool { return len(j.acked("a")) >= 6 })

	// a loses the lease store (a partition, a crash of its checkpointing)
	// but can still read the stream: it must stop on its own.
	cutOff.cut()
	checkpoint, expiry := map[string]string{}, map[string]time.Time{}
	for _, id := range shards {
		l := leases.get("test", f.arn, id)
		require.Equal(t, "a", l.Owner)
		checkpoint[id], expiry[id] = l.Checkpoint, l.ExpiresAt
	}
	b := newSubscriber(t, fastConfig(f.client("b"), leases, "b"), nil)
	doneB := consume(subscribe(t, b, "items"), j.handler("b", 0))

	waitFor(t, "b reading to the end", 10*time.Second, func() bool {
		acked := j.acked("")
		for _, ids := range byShard {
			for _, id := range ids {
				if acked[id] == 0 {
					return false
				}
			}
		}
		return true
	})
	closeWithin(t, b)
	closeWithin(t, a)
	waitClosed(t, doneA)
	waitClosed(t, doneB)

	assert.Empty(t, f.guardViolations(), "a shard read by an instance not holding a live lease")
	assert.Empty(t, j.overlaps)
	for _, id := range shards {
		reads := f.readsOf(id)
		var lastA, firstB time.Time
		for _, r := range reads {
			if r.reader == "a" {
				lastA = r.at
			} else if firstB.IsZero() {
				firstB = r.at
			}
		}
		assert.True(t, lastA.Before(expiry[id]), "a read %s after its lease lapsed", id)
		assert.False(t, firstB.Before(expiry[id]), "b took %s before a's lease lapsed", id)

		// b resumes right after a's last checkpoint: nothing checkpointed
		// is replayed, nothing skipped.
		var fromB []string
		for _, d := range j.snapshot() {
			if d.instance == "b" && d.record.ShardID == id {
				fromB = append(fromB, d.record.EventID)
			}
		}
		ids := byShard[id]
		next := 0
		for i, ev := range ids {
			if seqOf(eventNumber(ev)) == checkpoint[id] {
				next = i + 1
			}
		}
		assert.Equal(t, ids[next:], fromB, "%s: b's records", id)
	}
}

// eventNumber is the sequence number the fake gave event "ev-NNNN".
func eventNumber(ev string) int {
	var n int
	_, _ = fmt.Sscanf(strings.TrimPrefix(ev, "ev-"), "%d", &n)
	return n
}

func TestSubscriber_stops_reading_a_shard_whose_lease_moved_on(t *testing.T) {
	t.Run("found_at_checkpoint", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		ids := f.put("shard-0", 20)
		leases := newMemLeases()
		cfg := fastConfig(f.client("a"), leases, "a")
		cfg.CheckpointEvery = 1 // the checkpoint of each ack finds the loss
		sub := newSubscriber(t, cfg, nil)
		j := newJournal()
		stolen := make(chan struct{})
		done := consume(subscribe(t, sub, "items"), func(m *message.Message) {
			if m.UUID == ids[2] {
				leases.steal("test", f.arn, "shard-0", "thief")
				close(stolen)
			}
			j.handler("a", 0)(m)
		})
		select {
		case <-stolen:
		case <-time.After(5 * time.Second):
			t.Fatal("the third record never came")
		}
		time.Sleep(300 * time.Millisecond)
		assert.Len(t, j.snapshot(), 3, "no record delivered after the lease moved on")
		l := leases.get("test", f.arn, "shard-0")
		assert.Equal(t, "thief", l.Owner)
		assert.Equal(t, seqOf(2), l.Checkpoint, "the checkpoint of a lost lease is not written")
		closeWithin(t, sub)
		waitClosed(t, done)
		assert.Len(t, f.readsOf("shard-0"), 1, "one read of the first batch, none after")
	})

	t.Run("found_at_renewal", func(t *testing.T) {
		f := newFakeStream("items")
		f.addShard("shard-0", "")
		f.put("shard-0", 2)
		leases := newMemLeases()
		sub := newSubscriber(t, fastConfig(f.client("a"), leases, "a"), nil)
		j := newJournal()
		done := consume(subscribe(t, sub, "items"), j.handler("a", 0))
		waitFor(t, "both records", 5*time.Second, func() bool { return len(j.acked("")) == 2 })
		// Idle now, polling an empty shard; only the renewal can notice.
		leases.steal("test", f.arn, "shard-0", "thief")
		time.Sleep(300 * time.Millisecond) // RenewInterval is 100ms
		n := len(f.readsOf("shard-0"))
		time.Sleep(300 * time.Millisecond)
		assert.Equal(t, n, len(f.readsOf("shard-0")), "still reading a shard whose lease is gone")
		closeWithin(t, sub)
		waitClosed(t, done)
	})
}

func TestSubscriber_close_waits_for_the_delivered_record(t *testing.T) {
	f := newFakeStream("items")
	f.addShard("shard-0", "")
	f.put("shard-0", 3)
	leases := newMemLeases()
	sub := newSubscriber(t, fastConfig(f.client("a"), leases, "a"), nil)
	msgs := subscribe(t, sub, "items")
	first := receive(t, msgs)

	closed := make(chan time.Time)
	go func() {
		_ = sub.Close()
		closed <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	ackedAt := time.Now()
	first.Ack()
	select {
	case at := <-closed:
		assert.True(t, at.After(ackedAt), "Close returned before the delivered record was acked")
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_, open := <-msgs
	assert.False(t, open, "no record delivered after Close; the channel is closed")

	l := leases.get("test", f.arn, "shard-0")
	assert.Equal(t, seqOf(1), l.Checkpoint, "the record acked during Close is checkpointed")
	assert.Empty(t, l.Owner, "the lease is released for the next instance")
	snap, err := leases.List(context.Background(), "test", f.arn)
	require.NoError(t, err)
	assert.False(t, snap.Owners["a"].After(time.Now()), "the heartbeat is withdrawn")
}
