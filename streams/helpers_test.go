package streams_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// fastConfig is a configuration for tests against the fake: every
// interval short, so lapses and hand-overs happen within a second.
func fastConfig(c *fakeClient, leases streams.LeaseStore, owner string) streams.SubscriberConfig {
	return streams.SubscriberConfig{
		Tables:            c,
		Streams:           c,
		Leases:            leases,
		ConsumerGroup:     "test",
		OwnerID:           owner,
		LeaseDuration:     time.Second,
		RenewInterval:     100 * time.Millisecond,
		DiscoveryInterval: 50 * time.Millisecond,
		PollInterval:      5 * time.Millisecond,
		NackBackoff:       20 * time.Millisecond,
		MaxNackBackoff:    80 * time.Millisecond,
		CloseTimeout:      2 * time.Second,
	}
}

func newSubscriber(t *testing.T, cfg streams.SubscriberConfig, logger watermill.LoggerAdapter) *streams.Subscriber {
	t.Helper()
	sub, err := streams.NewSubscriber(cfg, logger)
	require.NoError(t, err)
	t.Cleanup(func() { closeWithin(t, sub) })
	return sub
}

// closeWithin closes sub and fails the test if that takes longer than
// the drain it may wait for.
func closeWithin(t *testing.T, sub *streams.Subscriber) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- sub.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s")
	}
}

func subscribe(t *testing.T, sub *streams.Subscriber, table string) <-chan *message.Message {
	t.Helper()
	// The context is the subscription's lifetime, as in Watermill.
	msgs, err := sub.Subscribe(t.Context(), table)
	require.NoError(t, err)
	return msgs
}

// consume hands each message to handle in its own goroutine, as
// Watermill's router does, until the channel is closed and every handler
// has returned.
func consume(ch <-chan *message.Message, handle func(*message.Message)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for m := range ch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(m)
			}()
		}
		wg.Wait()
		close(done)
	}()
	return done
}

func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "channel closed")
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return nil
	}
}

func decode(t *testing.T, m *message.Message) streams.Record {
	t.Helper()
	var r streams.Record
	require.NoError(t, json.Unmarshal(m.Payload, &r))
	return r
}

func mustDecode(m *message.Message) streams.Record {
	var r streams.Record
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		panic(err)
	}
	return r
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitClosed(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("consumer did not end: output channel not closed")
	}
}

// delivery is one message handed to an instance, and when it was acked.
type delivery struct {
	instance string
	record   streams.Record
	at       time.Time
	ackedAt  time.Time
}

// journal records deliveries and acks of several instances, and catches
// two instances holding records of the same shard at once.
type journal struct {
	mu         sync.Mutex
	deliveries []*delivery
	inFlight   map[string]string // shard → instance
	overlaps   []string
}

func newJournal() *journal { return &journal{inFlight: map[string]string{}} }

// handler acks every message after delay.
func (j *journal) handler(instance string, delay time.Duration) func(*message.Message) {
	return func(m *message.Message) {
		r := mustDecode(m)
		d := &delivery{instance: instance, record: r, at: time.Now()}
		j.mu.Lock()
		if other, ok := j.inFlight[r.ShardID]; ok && other != instance {
			j.overlaps = append(j.overlaps, instance+" got "+r.EventID+" of "+r.ShardID+" while "+other+" held one")
		}
		j.inFlight[r.ShardID] = instance
		j.deliveries = append(j.deliveries, d)
		j.mu.Unlock()
		time.Sleep(delay)
		j.mu.Lock()
		delete(j.inFlight, r.ShardID)
		d.ackedAt = time.Now()
		j.mu.Unlock()
		m.Ack()
	}
}

func (j *journal) snapshot() []delivery {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]delivery, len(j.deliveries))
	for i, d := range j.deliveries {
		out[i] = *d
	}
	return out
}

func (j *journal) acked(instance string) map[string]int {
	out := map[string]int{}
	for _, d := range j.snapshot() {
		if !d.ackedAt.IsZero() && (instance == "" || d.instance == instance) {
			out[d.record.EventID]++
		}
	}
	return out
}

func (j *journal) count(instance string) int {
	n := 0
	for _, d := range j.snapshot() {
		if d.instance == instance {
			n++
		}
	}
	return n
}

// logEntry is one captured log line.
type logEntry struct {
	level  string
	msg    string
	err    error
	fields watermill.LogFields
}

// captureLogger keeps every log line, to check what was reported.
type captureLogger struct {
	mu      *sync.Mutex
	entries *[]logEntry
	fields  watermill.LogFields
}

func newCaptureLogger() *captureLogger {
	return &captureLogger{mu: &sync.Mutex{}, entries: &[]logEntry{}}
}

func (l *captureLogger) add(level, msg string, err error, fields watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.entries = append(*l.entries, logEntry{level: level, msg: msg, err: err, fields: l.fields.Add(fields)})
}

func (l *captureLogger) Error(msg string, err error, fields watermill.LogFields) {
	l.add("error", msg, err, fields)
}
func (l *captureLogger) Info(msg string, fields watermill.LogFields) { l.add("info", msg, nil, fields) }
func (l *captureLogger) Debug(msg string, fields watermill.LogFields) {
	l.add("debug", msg, nil, fields)
}
func (l *captureLogger) Trace(msg string, fields watermill.LogFields) {
	l.add("trace", msg, nil, fields)
}
func (l *captureLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return &captureLogger{mu: l.mu, entries: l.entries, fields: l.fields.Add(fields)}
}

func (l *captureLogger) errors() []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logEntry
	for _, e := range *l.entries {
		if e.level == "error" {
			out = append(out, e)
		}
	}
	return out
}
