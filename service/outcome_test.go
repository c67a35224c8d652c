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
// right after the write would leave it.
type lostAnswer struct {
	next aws.HTTPClient
	op   string
	has  []string
	hit  atomic.Bool
}

func (c *lostAnswer) Do(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil && strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+c.op) {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := c.next.Do(r)
	if err != nil || body == nil || c.hit.Load() {
		return resp, err
	}
	for _, h := range c.has {
		if !bytes.Contains(body, []byte(h)) {
			return resp, err
		}
	}
	if !c.hit.CompareAndSwap(false, true) {
		return resp, err
	}
	resp.Body.Close()
	return nil, errors.New("injected: the answer was lost")
}

// serveLosing serves the stack with a service whose DynamoDB answer to the
// request lost matches is dropped, and the SDK does not retry it.
func (s *stack) serveLosing(t *testing.T, lost *lostAnswer) {
	svc, err := service.New(context.Background(), s.cfg, func(c *aws.Config) {
		c.RetryMaxAttempts = 1
		lost.next = c.HTTPClient
		c.HTTPClient = lost
	})
	require.NoError(t, err)
	s.serveOn(svc, service.ServeOptions{})
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
	s := newStack(t)
	id := s.allocatedSandbox(t)
	lost := &lostAnswer{op: "UpdateItem", has: []string{"last_command_id", "SandboxPool"}}
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

// A release whose delivery stopped after putting its pending outcome and
// before writing the sandbox: a later delivery leaves it to its owner while
// it may still be writing, then fences the sandbox (so that write could no
// longer land), decides again and applies it once.
func TestSandbox_release_taken_over_after_a_crash_before_its_write(t *testing.T) {
	s := newStack(t)
	id := s.allocatedSandbox(t)
	lost := &lostAnswer{op: "PutItem", has: []string{`"pending"`}}
	s.serveLosing(t, lost)

	cmd := uuid.NewString()
	s.send(cmd, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: id, TrackID: "track-1"})
	deadline := time.Now().Add(30 * time.Second)
	for !lost.hit.Load() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, lost.hit.Load(), "the fault was reached")
	time.Sleep(2 * time.Second)
	sb, _ := s.sandbox(id)
	require.Equal(t, store.StatusAllocated, sb.Status, "left to the delivery that decided it")
	require.Equal(t, "pending", s.audit(cmd)["status"])

	s.clock.Shift(time.Minute) // past the takeover wait
	s.eventFor(cmd, messages.SandboxDeletionMarked)
	sb, _ = s.sandbox(id)
	assert.Equal(t, store.StatusPendingDeletion, sb.Status)
	assert.Equal(t, cmd, s.lastCommand(t, id))
	assert.Equal(t, store.Applied, s.audit(cmd)["status"])
}
