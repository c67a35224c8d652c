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
// gone before the write, and cannot even nack.
type lostAnswer struct {
	next aws.HTTPClient
	op   string
	has  []string
	die  bool
	hit  atomic.Bool
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
	if c.die {
		return nil, errors.New("injected: the process is gone")
	}
	resp, err := c.next.Do(r)
	if err == nil {
		resp.Body.Close()
	}
	return nil, errors.New("injected: the answer was lost")
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
	deadline := time.Now().Add(time.Minute)
	for !lost.hit.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, lost.hit.Load(), "the fault was reached")
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
