package service_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// TestTrace_follows_an_allocation_through_its_expiry_timer: the trace of
// an allocation's correlation is the allocation, the timer.create it sent
// with the timer.due that fired it beneath, and the sandbox.expire the
// timer sent, which reported sandbox.expired; printed as an indented tree.
func TestTrace_follows_an_allocation_through_its_expiry_timer(t *testing.T) {
	s, alloc, allocated := timedAllocation(t, 2, "track-trace")
	sb := allocated.SandboxID
	expire := messages.DerivedID(alloc, messages.SandboxExpire, sb)
	s.eventFor(expire, messages.SandboxExpired)

	// The firing's outcome is recorded after its callback sent
	// sandbox.expire, so it may come a moment after sandbox.expired.
	var trace service.Trace
	require.Eventually(t, func() bool {
		var err error
		trace, err = s.svc.Trace(context.Background(), alloc, 100)
		require.NoError(t, err)
		return count(trace.Roots) == 4
	}, 30*time.Second, 200*time.Millisecond, "four outcomes in the chain")

	timerID := "sandbox-expiry:" + sb
	create := messages.DerivedID(alloc, messages.TimerCreate, timerID)
	require.Len(t, trace.Roots, 1)
	root := trace.Roots[0]
	assert.Equal(t, node{alloc, "sandbox.allocate", "SANDBOX#" + sb, store.Applied, "", "", []messages.Type{messages.SandboxAllocated}}, nodeOf(root))
	require.Len(t, root.Caused, 2, "the timer.create and, through the timer, the sandbox.expire")
	assert.Equal(t, node{create, "timer.create", "TIMER#" + timerID, store.Applied, "", alloc, []messages.Type{messages.TimerCreated}}, nodeOf(root.Caused[0]))
	assert.Equal(t, node{expire, "sandbox.expire", "SANDBOX#" + sb, store.Applied, "", alloc, []messages.Type{messages.SandboxExpired}}, nodeOf(root.Caused[1]))
	assert.Empty(t, root.Caused[1].Caused)
	require.Len(t, root.Caused[0].Caused, 1, "the firing, under the timer.create")
	due := root.Caused[0].Caused[0]
	assert.Equal(t, node{due.CommandID, "timer.due", "TIMER#" + timerID, store.Applied, store.FiringFired, create, nil}, nodeOf(due))
	for _, n := range []*service.TraceNode{root, root.Caused[0], root.Caused[1], due} {
		assert.Equal(t, alloc, n.CorrelationID, "%s joins the allocation's correlation", n.Action)
	}
	assert.Less(t, root.Caused[0].At, due.At)
	assert.LessOrEqual(t, due.At[:19], root.Caused[1].At[:19], "expired by the firing, within the second it recorded")

	// Only a command in a chain it did not start is in CorrelationIndex.
	assert.Nil(t, s.audit(alloc)["chain"], "the chain's start is read by its ID")
	assert.Equal(t, alloc, s.audit(expire)["chain"])

	var out strings.Builder
	require.NoError(t, trace.WriteText(&out))
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	assert.Equal(t, strings.Join([]string{
		"T  sandbox.allocate  SANDBOX#" + sb + "  applied",
		"  → sandbox.allocated",
		"  T  timer.create  TIMER#" + timerID + "  applied",
		"    → timer.created",
		"    T  timer.due  TIMER#" + timerID + "  applied (fired)",
		"  T  sandbox.expire  SANDBOX#" + sb + "  applied",
		"    → sandbox.expired",
	}, "\n")+"\n", stamp.ReplaceAllString(out.String(), "T"))

	none, err := s.svc.Trace(context.Background(), uuid.NewString(), 100)
	require.NoError(t, err)
	assert.Empty(t, none.Roots, "an unknown correlation has no outcomes")
}

// node is what the trace test checks of one outcome.
type node struct {
	ID, Action, Entity, Status, Reason, Causation string
	Events                                        []messages.Type
}

func nodeOf(n *service.TraceNode) node {
	return node{n.CommandID, n.Action, n.Entity, n.Status, n.Reason, n.CausationID, n.Events}
}

func count(nodes []*service.TraceNode) int {
	n := len(nodes)
	for _, c := range nodes {
		n += count(c.Caused)
	}
	return n
}

// TestStatus_reports_backlog_dead_letters_owners_and_the_last_minute: a
// serve of the sandbox, timer and layer domains, a backlog in the org
// queue it does not serve (one message received and not deleted), two
// dead letters and a known mix of sandbox commands: status shows each
// number, the oldest dead letter's reason, the replica holding every
// timer shard and the fan-in's lease, and the serve's last minute.
func TestStatus_reports_backlog_dead_letters_owners_and_the_last_minute(t *testing.T) {
	ctx := context.Background()
	addr := freeAddr(t)
	s := newStack(t, func(c *config.Config) { c.HTTPAddr = addr; c.Domains = "sandbox,timer,layer" })
	s.serve(service.ServeOptions{})
	// Status looks at every domain, served or not.
	cfg := s.cfg
	cfg.Domains = ""
	all, err := service.New(ctx, cfg)
	require.NoError(t, err)

	sync, refused := uuid.NewString(), uuid.NewString()
	s.send(sync, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: inventoryOf("ext-1")})
	s.send(refused, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: uuid.NewString(), TrackID: "t1"})
	s.eventFor(sync, messages.SandboxSynced)
	s.eventFor(refused, messages.SandboxDeletionRejected)
	s.sendRaw("not json", map[string]string{messages.TypeAttribute: string(messages.SandboxAllocate)})
	s.deadLetters(1)
	s.sendRaw(`{"type":"sandbox.explode","payload":{}}`, nil)
	s.deadLetters(2)

	orgQueue := s.url(s.svc.Stack.CommandQueue(messages.Org))
	for range 3 {
		s.sendTo(orgQueue, `{"type":"org.created","payload":{}}`, nil)
	}
	held, err := s.svc.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(orgQueue), MaxNumberOfMessages: 1, VisibilityTimeout: 120})
	require.NoError(t, err)
	require.Len(t, held.Messages, 1)

	host, _ := os.Hostname()
	var st service.Status
	// The last delivery is counted as it is acked; the shards and the
	// stream lease are claimed within a lease of serve's start.
	require.Eventually(t, func() bool {
		st, err = all.Status(ctx, addr, true)
		require.NoError(t, err)
		c := st.Serve.Domains[messages.Sandbox]
		return c.Handled == 2 && len(st.TimerShards) == 1 && st.TimerShards[""] == 0 && len(st.StreamLeases) == 1
	}, 30*time.Second, 500*time.Millisecond, "counts, shards and leases settle")

	byDomain := map[messages.Domain]service.DomainStatus{}
	for _, d := range st.Domains {
		byDomain[d.Domain] = d
	}
	assert.Len(t, byDomain, len(messages.Domains()), "every domain the config serves")
	org := byDomain[messages.Org]
	assert.Equal(t, service.DomainStatus{Domain: messages.Org, Queued: 2, InFlight: 1}, org)
	sandbox := byDomain[messages.Sandbox]
	assert.Equal(t, 0, sandbox.Queued)
	assert.Equal(t, 2, sandbox.DeadLetters)
	require.NotNil(t, sandbox.Oldest)
	assert.Contains(t, sandbox.Oldest.Reason, "not a JSON object", "the first poison's reason, not the unknown type's")
	assert.Equal(t, service.Counts{Handled: 2, Rejected: 1}, st.Serve.Domains[messages.Sandbox])
	assert.Equal(t, host, st.Serve.Host)
	assert.Equal(t, os.Getpid(), st.Serve.PID)
	assert.LessOrEqual(t, st.Serve.Window, time.Minute)
	for owner, n := range st.TimerShards {
		assert.True(t, strings.HasPrefix(owner, host+"/"+strconv.Itoa(os.Getpid())+"/"), "the serve's scheduler: %s", owner)
		assert.Equal(t, s.cfg.TimerShards, n, "every shard")
	}
	for owner := range st.StreamLeases {
		assert.True(t, strings.HasPrefix(owner, host+"-"), "the serve's fan-in: %s", owner)
	}

	var out strings.Builder
	require.NoError(t, st.WriteText(&out))
	text := out.String()
	assert.Regexp(t, `(?m)^org\s+2\s+1\s+0\s+0\s+0\s+0\s+-$`, text, "an unserved domain: its backlog, nothing handled\n%s", text)
	assert.Regexp(t, `(?m)^sandbox\s+0\s+0\s+2\s+1\s+0\s+2\s+\S+ sandbox.allocate: .*not a JSON object`, text, text)
	assert.Contains(t, text, "from the serve at "+addr+" (host "+host+", pid "+strconv.Itoa(os.Getpid())+")")

	// With no serve to ask, the rest is reported all the same.
	down, err := all.Status(ctx, freeAddr(t), true)
	require.NoError(t, err)
	assert.Nil(t, down.Serve)
	assert.NotEmpty(t, down.ServeError)
	assert.Equal(t, st.Domains, down.Domains)
	out.Reset()
	require.NoError(t, down.WriteText(&out))
	assert.Contains(t, out.String(), "did not answer")
	assert.Regexp(t, `(?m)^sandbox\s+0\s+0\s+-\s+-\s+-\s+2\s+\S+ sandbox.allocate: `, out.String())
}
