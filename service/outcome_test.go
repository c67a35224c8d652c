package service_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/service"
	"transit/store"
)

// lostAnswer sends every request on, and drops the answer to the first
// DynamoDB request whose target ends in op and whose body holds every one
// of has: the write is done, the caller only sees it fail, as a crash
// right after the write would leave it. With die set, that request is
// not sent at all, and every request after it fails too: the process is
// gone before the write, and cannot even nack. With stall set, that
// request waits until stall is closed, then goes on and is answered: a
// delivery paused just before its write; with drop set too, it then fails
// unsent, and the delivery goes on to retry.
type lostAnswer struct {
	next  aws.HTTPClient
	op    string
	has   []string
	die   bool
	stall chan struct{}
	drop  bool
	hit   atomic.Bool
}

func (c *lostAnswer) Do(r *http.Request) (*http.Response, error) {
	if c.die && c.hit.Load() {
		return nil, errors.New("injected: the process is gone")
	}
	if r.Body == nil || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+c.op) || c.hit.Load() {
		return c.next.Do(r)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	for _, h := range c.has {
		if !bytes.Contains(body, []byte(h)) {
			return c.next.Do(r)
		}
	}
	if !c.hit.CompareAndSwap(false, true) {
		return c.next.Do(r)
	}
	switch {
	case c.die:
		return nil, errors.New("injected: the process is gone")
	case c.stall != nil:
		<-c.stall
		if c.drop {
			return nil, errors.New("injected: the request was dropped")
		}
		return c.next.Do(r)
	}
	resp, err := c.next.Do(r)
	if err == nil {
		resp.Body.Close()
	}
	return nil, errors.New("injected: the answer was lost")
}

// await waits until the fault is reached, for at most a minute.
func (c *lostAnswer) await(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !c.hit.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, c.hit.Load(), "the fault was reached")
}

// serveLosing serves the stack with a service whose DynamoDB answer to the
// request lost matches is dropped, and the SDK does not retry it.
func (s *stack) serveLosing(t *testing.T, lost *lostAnswer) (stop func() error) {
	svc, err := service.New(context.Background(), s.cfg, func(c *aws.Config) {
		c.RetryMaxAttempts = 1
		lost.next = c.HTTPClient
		c.HTTPClient = lost
	})
	require.NoError(t, err)
	return s.serveOn(svc, service.ServeOptions{})
}

// allocatedSandbox syncs one sandbox and allocates it to track-1.
func (s *stack) allocatedSandbox(t *testing.T) string {
	stop := s.serve(service.ServeOptions{})
	s.sync("ext-1")
	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	id := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated)).SandboxID
	require.NoError(t, stop())
	return id
}

// lastCommand reads the sandbox item's last_command_id.
func (s *stack) lastCommand(t *testing.T, sandboxID string) string {
	out, err := s.svc.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, store.SandboxPool)), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "SBX#" + sandboxID}, "SK": &types.AttributeValueMemberS{Value: "META"},
		},
	})
	require.NoError(t, err)
	v, _ := out.Item["last_command_id"].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// A release written without a transaction whose answer is lost after the
// sandbox's write: the retry finds the sandbox naming the command, confirms
// the pending outcome and answers as applied, once, rather than rejecting
// the release of a sandbox already released.
func TestSandbox_release_answer_lost_after_its_write(t *testing.T) {
	releasedOnce(t, &lostAnswer{op: "UpdateItem", has: []string{"last_command_id", "SandboxPool"}})
}

// A release whose delivery stopped after putting its pending outcome and
// before writing the sandbox: the next delivery leaves it to its owner
// while it may still be writing, then fences the sandbox (so that write
// could no longer land), decides again and applies it, once.
func TestSandbox_release_taken_over_after_a_crash_before_its_write(t *testing.T) {
	releasedOnce(t, &lostAnswer{op: "PutItem", has: []string{`"pending"`}})
}

// releasedOnce releases an allocated sandbox through a process that loses
// the answer lost matches, and checks the release was applied and
// answered once.
func releasedOnce(t *testing.T, lost *lostAnswer) {
	s := newStack(t)
	id := s.allocatedSandbox(t)
	s.serveLosing(t, lost)

	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: id, TrackID: "track-1"})
	s.eventFor(cmd, messages.SandboxDeletionMarked)
	require.True(t, lost.hit.Load(), "the fault was reached")
	sb, _ := s.sandbox(id)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
	assert.Equal(t, cmd, s.lastCommand(t, id))
	assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	time.Sleep(time.Second)
	assert.Len(t, causedBy(s.collect(time.Second, func([]service.TapEvent) bool { return true }), cmd), 1, "one answer")
}

// A release whose process died after the sandbox's write, before
// confirming its outcome, and a cleanup that deletes the sandbox before the
// release comes back: the deletion confirms the release first (the sandbox
// names it), so the redelivery answers it applied rather than rejected for
// a sandbox not found.
func TestSandbox_cleanup_confirms_a_release_left_pending(t *testing.T) {
	s := newStack(t)
	id := s.allocatedSandbox(t)
	lost := &lostAnswer{op: "UpdateItem", has: []string{`"pending"`, "Audit"}, die: true}
	stopDead := s.serveLosing(t, lost)
	release := uuid.NewString()
	s.send(release, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: id, TrackID: "track-1"})
	lost.await(t)
	died := time.Now()
	require.Equal(t, "pending", s.audit(release)["status"])

	// The cleanup, as its handler runs it, straight away: the release's
	// message is still invisible.
	ctx := context.Background()
	cleanup := store.Cmd{ID: uuid.NewString(), Type: string(messages.SandboxCleanup), CorrelationID: id, At: time.Now()}
	sb, done, err := s.svc.Store.PendingCleanup(ctx, cleanup, id)
	require.NoError(t, err)
	require.False(t, done)
	_, err = s.svc.Store.Deleted(ctx, cleanup, sb)
	require.NoError(t, err)
	require.Less(t, time.Since(died), s.cfg.VisibilityTimeout, "the cleanup came before the release's redelivery")
	_, found := s.sandbox(id)
	require.False(t, found, "deleted")
	assert.Equal(t, store.Applied, s.audit(release)["status"], "confirmed by the deletion")

	_ = stopDead()
	s.serve(service.ServeOptions{})
	s.eventFor(release, messages.SandboxDeletionMarked)
	time.Sleep(time.Second)
	events := s.collect(time.Second, func([]service.TapEvent) bool { return true })
	assert.Len(t, causedBy(events, release), 1, "one answer, the release")
}

// An allocation whose answer is lost after its sandbox's write: the
// redelivery finds the sandbox naming the command, confirms the pending
// outcome and answers with that sandbox, once, rather than taking another.
func TestSandbox_allocation_answer_lost_after_its_write(t *testing.T) {
	s := newStack(t)
	lost := &lostAnswer{op: "UpdateItem", has: []string{"last_command_id", "SandboxPool"}}
	s.serveLosing(t, lost)
	s.sync("ext-1", "ext-2")

	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	got := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(cmd, messages.SandboxAllocated))
	require.True(t, lost.hit.Load(), "the fault was reached")
	assert.Equal(t, cmd, s.lastCommand(t, got.SandboxID), "the sandbox the first write took")
	assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	allocated, err := s.svc.Store.Sandboxes(context.Background(), store.StatusAllocated)
	require.NoError(t, err)
	assert.Len(t, allocated, 1, "one sandbox taken")
	time.Sleep(time.Second)
	assert.Len(t, causedBy(s.collect(time.Second, func([]service.TapEvent) bool { return true }), cmd), 1, "one answer")
}

// An allocation whose process dies after claiming its idempotency key,
// before writing its sandbox, and a second command under the same key:
// whichever comes first (the second, or the first's redelivery) leaves the
// claim to the dead delivery while it may still be written, then fences
// its sandbox and allocates; the other answers with that allocation. One
// sandbox is taken under the key, never two.
func TestSandbox_allocation_claim_taken_over_after_a_crash(t *testing.T) {
	s := newStack(t)
	lost := &lostAnswer{op: "UpdateItem", has: []string{"last_command_id", "SandboxPool"}, die: true}
	stopDead := s.serveLosing(t, lost)
	s.sync("ext-1", "ext-2", "ext-3")
	first := uuid.NewString()
	payload := messages.SandboxAllocatePayload{TrackID: "track-1", IdempotencyKey: "key-1"}
	s.send(first, messages.SandboxAllocate, payload)
	lost.await(t)
	require.Equal(t, "pending", s.audit(first)["status"])
	_ = stopDead()

	s.serve(service.ServeOptions{})
	second := uuid.NewString()
	s.send(second, messages.SandboxAllocate, payload)
	took := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(second, messages.SandboxAllocated))
	again := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(first, messages.SandboxAllocated))
	assert.Equal(t, took.SandboxID, again.SandboxID, "both answered with one allocation")

	allocated, err := s.svc.Store.Sandboxes(context.Background(), store.StatusAllocated)
	require.NoError(t, err)
	require.Len(t, allocated, 1, "one sandbox taken under the key")
	assert.Equal(t, took.SandboxID, allocated[0].SandboxID)
	assert.Contains(t, []string{first, second}, s.lastCommand(t, took.SandboxID))
	assert.Equal(t, store.Applied, s.audit(first)["status"])
	assert.Equal(t, store.Applied, s.audit(second)["status"])
}

// An allocation paused after claiming its idempotency key, just before
// writing its sandbox, and a second command under the same key meanwhile:
// the second leaves the claim to the first for the takeover time, then
// fences the first's sandbox and allocates (that one or another). When the
// first goes on, its write is refused, and it answers with the second's
// allocation. Without the wait and the fence both would hold a sandbox
// under one key.
func TestSandbox_allocation_paused_before_its_write_is_fenced(t *testing.T) {
	s := newStack(t)
	lost := &lostAnswer{op: "UpdateItem", has: []string{"last_command_id", "SandboxPool"}, stall: make(chan struct{})}
	s.serveLosing(t, lost)
	s.sync("ext-1", "ext-2", "ext-3")
	first, second := uuid.NewString(), uuid.NewString()
	payload := messages.SandboxAllocatePayload{TrackID: "track-1", IdempotencyKey: "key-1"}
	s.send(first, messages.SandboxAllocate, payload)
	lost.await(t)
	paused, _ := s.audit(first)["pending_entity"].(string)
	require.NotEmpty(t, paused, "the first's outcome is pending on a sandbox")

	s.send(second, messages.SandboxAllocate, payload)
	took := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(second, messages.SandboxAllocated))
	close(lost.stall)
	again := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(first, messages.SandboxAllocated))
	assert.Equal(t, took.SandboxID, again.SandboxID, "the first answered with the second's allocation")

	allocated, err := s.svc.Store.Sandboxes(context.Background(), store.StatusAllocated)
	require.NoError(t, err)
	require.Len(t, allocated, 1, "one sandbox taken under the key")
	assert.Equal(t, second, s.lastCommand(t, took.SandboxID))
	assert.Equal(t, store.Applied, s.audit(first)["status"])
}
