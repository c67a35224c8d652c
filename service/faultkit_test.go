package service_test

// Helpers of the fault suite (fault_test.go): the pool and the commands, a
// paced producer, a tap reader, the end-of-run checks, transit as a
// subprocess, and toxiproxy in front of the emulators.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// Every fault case sends 500 sandbox.allocate commands, one per track,
// to a pool with room for all of them: each must end with exactly one
// sandbox, recorded once and announced (perhaps more than once, always
// the same event). The fault suite needs DynamoDB Local (the harness's
// default): moto's TransactWriteItems is not isolated under concurrency
// (DECISIONS.md), so racing allocations lose or double sandboxes in the
// emulator itself, and its GSI queries read the whole table (500
// allocations took 150 s).
const (
	commandsPerCase = 500
	poolSize        = commandsPerCase + 20
)

// window is how many commands the producer keeps ahead of the events seen,
// unless a run says otherwise: moto scans a queue on every receive and
// delete, and a queue 500 deep halves its throughput.
const window = 24

// command is one command of a fault run.
type command struct {
	ID      string
	Type    messages.Type
	Payload any
}

// faultRun is one fault case: a stack with a pool, the commands, and the
// events seen on the stack's tap.
type faultRun struct {
	s    *stack
	name string
	// queueURL is the command queue the run's commands go to; answers maps
	// each command type to the event types that answer it; window is how
	// many commands the producer keeps ahead of their answers.
	queueURL string
	answers  map[messages.Type][]messages.Type
	window   int
	cmds     []command
	track    map[string]string // command ID → its track
	events   *eventReader
	pool     []string     // the sandbox IDs seeded
	sent     []invocation // every delivery a specification reads, for the linearizability check
}

// newRun starts reading the tap for a run of commands of domain d, each
// answered by one of the events answers names for its type.
func (s *stack) newRun(name string, d messages.Domain, answers map[messages.Type][]messages.Type) *faultRun {
	s.t.Helper()
	return &faultRun{s: s, name: name, queueURL: s.url(s.svc.Stack.CommandQueue(d)), answers: answers, window: window, events: s.readTap()}
}

// newFaultRun fills the pool, builds the commands and starts reading the
// tap.
func newFaultRun(s *stack, name string) *faultRun {
	s.t.Helper()
	pool := s.seedPool(poolSize)
	r := s.newRun(name, messages.Sandbox, map[messages.Type][]messages.Type{messages.SandboxAllocate: {messages.SandboxAllocated}})
	r.track, r.pool = map[string]string{}, pool
	for i := range commandsPerCase {
		c := command{ID: uuid.NewString(), Type: messages.SandboxAllocate,
			Payload: messages.SandboxAllocatePayload{TrackID: fmt.Sprintf("track-%04d", i)}}
		r.track[c.ID] = fmt.Sprintf("track-%04d", i)
		r.cmds = append(r.cmds, c)
	}
	return r
}

// eventID is the ID of the event command c must cause.
func (r *faultRun) eventID(c command) string {
	return messages.DerivedID(c.ID, messages.SandboxAllocated, "")
}

// drive sends deliveries in order, never more than the run's window ahead
// of the events seen, until every command has been answered (by an event
// r.answers names for its type). progress, when set, is called on the
// test goroutine with the number of commands answered so far; it may
// inject a fault there (the tap is read meanwhile).
func (r *faultRun) drive(deliveries []command, timeout time.Duration, progress func(done int)) {
	s := r.s
	s.t.Helper()
	want, commands := map[string]bool{}, map[string]bool{}
	for _, c := range deliveries {
		commands[c.ID] = true
		for _, t := range r.answers[c.Type] {
			want[messages.DerivedID(c.ID, t, "")] = true
		}
	}
	deadline := time.Now().Add(timeout)
	sent := 0
	for {
		evs := r.events.seen()
		answered, distinct := 0, map[string]bool{}
		for _, e := range evs {
			if want[e.MessageID] {
				answered++
				distinct[e.Envelope.CausationID] = true
			}
		}
		for sent < len(deliveries) && sent-answered < r.window {
			n := min(10, len(deliveries)-sent)
			at := time.Now()
			for _, c := range deliveries[sent : sent+n] {
				if in, ok := inputOf(c); ok {
					r.sent = append(r.sent, invocation{in: in, at: at})
				}
			}
			require.NoError(s.t, s.sendBatch(r.queueURL, deliveries[sent:sent+n]))
			sent += n
		}
		if progress != nil {
			progress(len(distinct))
		}
		if sent == len(deliveries) && len(distinct) == len(commands) {
			return
		}
		if time.Now().After(deadline) {
			waiting, inFlight := s.queueDepth(r.queueURL)
			s.t.Fatalf("%s: %d of %d commands answered within %s (%d sent, %d events read; queue: %d waiting, %d in flight)",
				r.name, len(distinct), len(commands), timeout, sent, len(evs), waiting, inFlight)
		}
		r.events.waitForMore(len(evs), 200*time.Millisecond)
	}
}

// settle waits until the command queue is empty (nothing waiting, nothing
// in flight: every delivery was acked) and the tap has nothing more, and
// returns every event seen. An event is on the tap before its command is
// deleted (publish comes before ack), so one empty read of the tap after
// the queue is empty sees them all.
func (r *faultRun) settle(timeout time.Duration) []service.TapEvent {
	s := r.s
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if waiting, inFlight := s.queueDepth(r.queueURL); waiting == 0 && inFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			waiting, inFlight := s.queueDepth(r.queueURL)
			s.t.Fatalf("%s: the command queue did not empty within %s: %d waiting, %d in flight", r.name, timeout, waiting, inFlight)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return r.events.drained(time.Until(deadline) + 10*time.Second)
}

// tally is what a fault run ended with.
type tally struct {
	commands, applied, lost, doubled, reemitted, deadLetters int
}

func (t tally) String() string {
	return fmt.Sprintf("commands=%d applied=%d lost=%d doubled=%d re-emitted=%d dead-lettered=%d",
		t.commands, t.applied, t.lost, t.doubled, t.reemitted, t.deadLetters)
}

// check compares the stack's end state with what each command must have
// done, logs the counts and asserts that nothing was lost or doubled.
//
// Lost: a command without its recorded outcome (or with another outcome
// than an allocation), without its event, or whose sandbox is not
// allocated to its track. Doubled: a second transition: a track holding
// two sandboxes, a sandbox announced to two commands, an event that is
// not the replay of the first one (another ID, type, payload or time: a
// fresh decision), or more allocations or outcomes than commands.
// Re-emitted: events beyond one per delivery, the same event again.
func (r *faultRun) check(evs []service.TapEvent, deliveriesPerCommand int) tally {
	s := r.s
	s.t.Helper()
	audit := s.auditItems()
	allocated := map[string]store.Sandbox{}
	byTrack := map[string]int{}
	for _, sb := range s.inStatus(store.StatusAllocated) {
		allocated[sb.SandboxID] = sb
		byTrack[sb.AllocatedToTrack]++
	}
	byCause := map[string][]service.TapEvent{}
	for _, e := range evs {
		byCause[e.Envelope.CausationID] = append(byCause[e.Envelope.CausationID], e)
	}
	var problems []string
	problem := func(kind *int, format string, args ...any) {
		*kind++
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	t := tally{commands: len(r.cmds)}
	announced := map[string]string{} // sandbox ID → the command whose event named it
	for _, c := range r.cmds {
		track := r.track[c.ID]
		item, recorded := audit[c.ID]
		caused := byCause[c.ID]
		switch {
		case !recorded:
			problem(&t.lost, "%s: no recorded outcome", c.ID)
			continue
		case item.Status != store.Applied:
			problem(&t.lost, "%s: recorded %s (%s), not an allocation", c.ID, item.Status, item.Reason)
			continue
		case len(caused) == 0:
			problem(&t.lost, "%s: applied but no event", c.ID)
			continue
		}
		t.applied++
		first := caused[0]
		for _, e := range caused {
			if e.MessageID != r.eventID(c) || e.Envelope.Type != messages.SandboxAllocated {
				problem(&t.doubled, "%s: event %s %s, want %s %s", c.ID, e.Envelope.Type, e.MessageID, messages.SandboxAllocated, r.eventID(c))
			} else if !bytes.Equal(e.Envelope.Payload, first.Envelope.Payload) || !e.Envelope.OccurredAt.Equal(first.Envelope.OccurredAt) {
				problem(&t.doubled, "%s: re-emitted event differs: %s at %s, then %s at %s", c.ID,
					first.Envelope.Payload, first.Envelope.OccurredAt, e.Envelope.Payload, e.Envelope.OccurredAt)
			}
		}
		t.reemitted += max(0, len(caused)-deliveriesPerCommand)
		// The table agrees with the event: the sandbox it names is the
		// track's, allocated when the event says.
		var p messages.SandboxAllocatedPayload
		require.NoError(s.t, json.Unmarshal(first.Envelope.Payload, &p))
		sb, ok := allocated[p.SandboxID]
		switch {
		case announced[p.SandboxID] != "":
			problem(&t.doubled, "%s: sandbox %s was announced to %s too", c.ID, p.SandboxID, announced[p.SandboxID])
		case p.TrackID != track:
			problem(&t.doubled, "%s: event for track %s, want %s", c.ID, p.TrackID, track)
		case !ok:
			problem(&t.lost, "%s: sandbox %s announced to %s is not allocated", c.ID, p.SandboxID, track)
		case sb.AllocatedToTrack != track || sb.AllocatedAt != p.AllocatedAt:
			problem(&t.doubled, "%s: event allocates %s to %s at %d, the table to %s at %d", c.ID, p.SandboxID, track, p.AllocatedAt, sb.AllocatedToTrack, sb.AllocatedAt)
		case byTrack[track] != 1:
			problem(&t.doubled, "%s: track %s holds %d sandboxes", c.ID, track, byTrack[track])
		}
		announced[p.SandboxID] = c.ID
	}
	// The whole agrees with the parts (counted only when every command
	// looked right, so that one fault is not counted twice).
	if t.lost == 0 && t.doubled == 0 {
		if len(allocated) != len(r.cmds) {
			problem(&t.doubled, "%d sandboxes allocated for %d commands", len(allocated), len(r.cmds))
		}
		if len(audit) != len(r.cmds) {
			problem(&t.doubled, "%d recorded outcomes for %d commands", len(audit), len(r.cmds))
		}
	}
	waiting, inFlight := s.queueDepth(s.dlqURL)
	t.deadLetters = waiting + inFlight

	s.t.Logf("fault %s: %s", r.name, t)
	assert.Zero(s.t, t.lost, "lost: %s", strings.Join(problems, "; "))
	assert.Zero(s.t, t.doubled, "doubled: %s", strings.Join(problems, "; "))
	assert.Zero(s.t, t.deadLetters, "nothing dead-lettered")
	assert.Equal(s.t, len(r.cmds), t.applied, "every command has its allocation")
	return t
}

// eventReader reads the stack's tap in the background: batches of ten,
// deleted with one DeleteMessageBatch. Tap.Receive deletes them one by
// one, which on moto costs a fifth of the emulator's time in these runs
// and lets the reader fall behind transit.
type eventReader struct {
	s        *stack
	queueURL string

	mu     sync.Mutex
	events []service.TapEvent
	at     []time.Time // when each event was read
	// read holds the SQS message IDs read: a message whose delete failed
	// comes back, and is the same delivery, not a re-emitted event.
	read map[string]bool
	err  error
	// emptySince is when the last read that found nothing started.
	emptySince time.Time
	changed    chan struct{} // closed and replaced after every read
}

// readTap starts reading the tap newStack subscribed, until the test ends.
func (s *stack) readTap() *eventReader {
	s.t.Helper()
	found, err := s.svc.SQS.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(s.cfg.Prefix + "-tap-")})
	require.NoError(s.t, err)
	require.Len(s.t, found.QueueUrls, 1, "the stack's tap")
	er := &eventReader{s: s, queueURL: found.QueueUrls[0], read: map[string]bool{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		failures := 0
		for ctx.Err() == nil {
			began := time.Now()
			n, err := er.readOnce(ctx)
			if ctx.Err() != nil {
				return
			}
			er.mu.Lock()
			switch {
			case err != nil:
				// The SDK has retried already; moto is rarely down for long.
				if failures++; failures == 20 {
					er.err = err
				}
			case n == 0:
				failures = 0
				er.emptySince = began
			default:
				failures = 0
			}
			close(er.changed)
			er.changed = make(chan struct{})
			er.mu.Unlock()
			if err != nil {
				time.Sleep(250 * time.Millisecond)
			}
		}
	}()
	s.t.Cleanup(func() {
		cancel()
		<-done
	})
	return er
}

// readOnce reads what the tap holds, up to ten messages waited for up to a
// second, and returns how many it received.
func (er *eventReader) readOnce(ctx context.Context) (int, error) {
	res, err := er.s.svc.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(er.queueURL),
		MaxNumberOfMessages:   10,
		WaitTimeSeconds:       1,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil || len(res.Messages) == 0 {
		return 0, err
	}
	readAt := time.Now()
	var evs []service.TapEvent
	var ids []string
	del := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(er.queueURL)}
	for i, m := range res.Messages {
		ev := service.TapEvent{Attributes: map[string]string{}}
		for k, v := range m.MessageAttributes {
			ev.Attributes[k] = aws.ToString(v.StringValue)
		}
		ev.MessageID = ev.Attributes[wmsqs.UUIDAttribute]
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev.Envelope); err != nil {
			return 0, fmt.Errorf("decode event %s: %w", aws.ToString(m.MessageId), err)
		}
		evs = append(evs, ev)
		ids = append(ids, aws.ToString(m.MessageId))
		del.Entries = append(del.Entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	er.mu.Lock()
	for i, ev := range evs {
		if !er.read[ids[i]] {
			er.read[ids[i]] = true
			er.events = append(er.events, ev)
			er.at = append(er.at, readAt)
		}
	}
	er.mu.Unlock()
	deleted, err := er.s.svc.SQS.DeleteMessageBatch(ctx, del)
	if err == nil && len(deleted.Failed) > 0 {
		err = fmt.Errorf("delete from tap: %s", aws.ToString(deleted.Failed[0].Message))
	}
	return len(evs), err
}

// seen returns the events read so far; a tap that cannot be read fails
// the test.
func (er *eventReader) seen() []service.TapEvent {
	er.mu.Lock()
	defer er.mu.Unlock()
	require.NoError(er.s.t, er.err, "reading the tap")
	return append([]service.TapEvent(nil), er.events...)
}

// sightings returns the events read so far with when each was read.
func (er *eventReader) sightings() []sighting {
	evs := er.seen()
	er.mu.Lock()
	defer er.mu.Unlock()
	out := make([]sighting, len(evs))
	for i, ev := range evs {
		out[i] = sighting{ev: ev, at: er.at[i]}
	}
	return out
}

// waitForMore waits until more than n events were read, or for d.
func (er *eventReader) waitForMore(n int, d time.Duration) {
	deadline := time.After(d)
	for {
		er.mu.Lock()
		got, changed := len(er.events), er.changed
		er.mu.Unlock()
		if got > n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			return
		}
	}
}

// drained returns every event once a read that started after now found
// the tap empty.
func (er *eventReader) drained(timeout time.Duration) []service.TapEvent {
	er.s.t.Helper()
	from := time.Now()
	deadline := time.After(timeout)
	for {
		er.mu.Lock()
		empty, changed := er.emptySince.After(from), er.changed
		er.mu.Unlock()
		if empty {
			return er.seen()
		}
		select {
		case <-changed:
		case <-deadline:
			er.s.t.Fatalf("the tap was not drained within %s", timeout)
		}
	}
}

// seedPool puts n available sandboxes in the table, as sandbox.sync
// creates them, with BatchWriteItem (25 a call): a sync adds at most 99,
// and the fault cases are about what comes after. It returns their IDs.
func (s *stack) seedPool(n int) []string {
	s.t.Helper()
	now := time.Now().Unix()
	var reqs []dbtypes.WriteRequest
	var ids []string
	for i := range n {
		ext := fmt.Sprintf("ext-%04d", i)
		id := store.SandboxIDFor(ext)
		ids = append(ids, id)
		item, err := attributevalue.MarshalMap(store.Sandbox{PK: "SBX#" + id, SK: "META", SandboxID: id, Name: "name-" + ext, ExternalID: ext,
			Status: store.StatusAvailable, LabDurationHours: 4, CreatedAt: now, UpdatedAt: now, LastSynced: now})
		require.NoError(s.t, err)
		reqs = append(reqs, dbtypes.WriteRequest{PutRequest: &dbtypes.PutRequest{Item: item}})
	}
	table := store.TableName(s.cfg.Prefix, store.SandboxPool)
	for len(reqs) > 0 {
		batch := reqs[:min(25, len(reqs))]
		reqs = reqs[len(batch):]
		res, err := s.svc.DynamoDB.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dbtypes.WriteRequest{table: batch}})
		require.NoError(s.t, err)
		reqs = append(reqs, res.UnprocessedItems[table]...)
	}
	require.Len(s.t, s.inStatus(store.StatusAvailable), n, "the pool")
	return ids
}

// sendBatch sends up to ten commands to a command queue in one
// SendMessageBatch, as a producer would send them one by one: the envelope
// as the body, the type as an attribute.
func (s *stack) sendBatch(queueURL string, cmds []command) error {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL)}
	for i, c := range cmds {
		body, err := messages.NewCommand(c.ID, c.Type, c.Payload, time.Now())
		if err != nil {
			return err
		}
		in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(string(body)),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(c.Type))},
			},
		})
	}
	out, err := s.svc.SQS.SendMessageBatch(context.Background(), in)
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%d of %d commands not sent: %s", len(out.Failed), len(in.Entries), aws.ToString(out.Failed[0].Message))
	}
	return err
}

// queueDepth reads how many messages wait in a queue and how many are in
// flight (received, neither deleted nor visible again).
func (s *stack) queueDepth(queueURL string) (waiting, inFlight int) {
	out, err := s.svc.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	require.NoError(s.t, err)
	waiting, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return waiting, inFlight
}

// auditItem is the part of a recorded outcome the checks read.
type auditItem struct {
	CommandID string `dynamodbav:"command_id"`
	Status    string `dynamodbav:"status"`
	Reason    string `dynamodbav:"reason"`
	Details   string `dynamodbav:"details"`
}

// auditItems reads every recorded outcome of the stack, by command ID.
func (s *stack) auditItems() map[string]auditItem {
	out := map[string]auditItem{}
	in := &dynamodb.ScanInput{TableName: aws.String(store.TableName(s.cfg.Prefix, store.Audit)), ConsistentRead: aws.Bool(true)}
	for {
		page, err := s.svc.DynamoDB.Scan(context.Background(), in)
		require.NoError(s.t, err)
		var items []auditItem
		require.NoError(s.t, attributevalue.UnmarshalListOfMaps(page.Items, &items))
		for _, it := range items {
			out[it.CommandID] = it
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// serveWith runs a consumer on svc, another Service on the same stack
// (e.g. one whose AWS calls go through a proxy), as s.serve does with the
// stack's own.
func (s *stack) serveWith(svc *service.Service) (stop func() error) {
	return s.serveOn(svc, service.ServeOptions{})
}

// network is a toxiproxy, in process, in front of each emulator (moto,
// and DynamoDB Local when the harness runs it), faulted together.
type network struct {
	t       *testing.T
	proxies []*toxiproxy.Proxy
	// endpoint maps each emulator's URL to its proxy's.
	endpoint map[string]string
}

func newNetwork(t *testing.T) *network {
	t.Helper()
	n := &network{t: t, endpoint: map[string]string{}}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	for _, v := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"} {
		upstream := os.Getenv(v)
		if upstream == "" || n.endpoint[upstream] != "" {
			continue
		}
		u, err := url.Parse(upstream)
		require.NoError(t, err)
		p := toxiproxy.NewProxy(server, fmt.Sprintf("%s-%d", t.Name(), len(n.proxies)), "127.0.0.1:0", u.Host)
		require.NoError(t, p.Start())
		t.Cleanup(p.Stop)
		n.proxies = append(n.proxies, p)
		n.endpoint[upstream] = "http://" + p.Listen
	}
	return n
}

// env is the AWS_ENDPOINT_URL* environment of a process behind the proxies.
func (n *network) env() []string {
	var env []string
	for _, v := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"} {
		if proxy := n.endpoint[os.Getenv(v)]; proxy != "" {
			env = append(env, v+"="+proxy)
		}
	}
	return env
}

// service returns a second Service of the stack whose every AWS call goes
// through the proxies. Provisioning, the producer and the tap keep talking
// to the emulators directly through s.svc, so only the consumer sees the
// faults. Config.EndpointURL sends SQS, SNS and STS to the moto proxy; the
// SDK prefers AWS_ENDPOINT_URL_DYNAMODB (set by the harness) to it, so a
// configuration source placed first answers DynamoDB's endpoint with the
// DynamoDB proxy.
func (n *network) service(s *stack) *service.Service {
	n.t.Helper()
	cfg := s.cfg
	cfg.EndpointURL = n.endpoint[os.Getenv("AWS_ENDPOINT_URL")]
	svc, err := service.New(context.Background(), cfg, func(c *aws.Config) {
		c.ConfigSources = append([]any{proxiedEndpoints(n.endpoint)}, c.ConfigSources...)
	})
	require.NoError(n.t, err)
	return svc
}

// proxiedEndpoints is an AWS configuration source that answers the
// per-service endpoints of the environment with their proxies.
type proxiedEndpoints map[string]string

func (p proxiedEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := "AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_")
	proxy := p[os.Getenv(v)]
	return proxy, proxy != "", nil
}

// cut closes every connection and refuses new ones.
func (n *network) cut() {
	for _, p := range n.proxies {
		p.Stop()
	}
}

// restore listens again, on the same ports.
func (n *network) restore() error {
	for _, p := range n.proxies {
		if err := p.Start(); err != nil {
			return err
		}
	}
	return nil
}

// addToxic adds a toxic to every proxy, e.g.
// {"name":"latency","type":"latency","attributes":{"latency":75}}.
func (n *network) addToxic(spec string) error {
	for _, p := range n.proxies {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			return err
		}
	}
	return nil
}

func (n *network) removeToxic(name string) error {
	for _, p := range n.proxies {
		if err := p.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return err
		}
	}
	return nil
}

// transitBinary builds cmd/transit once per test binary, into a folder
// named after the test process.
var transitBinary = sync.OnceValues(func() (string, error) {
	// A test binary cannot clean up after its last test, so each build
	// first removes those of test processes that are gone.
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "transit-faulttest-*"))
	for _, dir := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "transit-faulttest-"))
		if err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(dir)
		}
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("transit-faulttest-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "transit")
	out, err := exec.Command("go", "build", "-o", bin, "transit/cmd/transit").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// transitProc is `transit serve` running as a subprocess.
type transitProc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// startTransit runs `transit serve` on the stack, with the environment a
// deployment would give it: the AWS_* of TestMain (the emulators) and
// TRANSIT_*; extraEnv comes last and wins.
func (s *stack) startTransit(t *testing.T, extraEnv ...string) *transitProc {
	t.Helper()
	bin, err := transitBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"TRANSIT_PREFIX="+s.cfg.Prefix,
		"TRANSIT_PROVIDER_URL="+s.cfg.ProviderURL,
		"TRANSIT_VISIBILITY_TIMEOUT=5s",
		"TRANSIT_COMMAND_TIMEOUT=4s",
		"TRANSIT_SWEEP_INTERVAL=0",
		"TRANSIT_CONCURRENCY=8",
		"TRANSIT_LOG_LEVEL=warn",
		// The sandbox fault cases measure the sandbox pipeline alone; the
		// timer cases set their own.
		"TRANSIT_SANDBOX_EXPIRY=sweep",
		"TRANSIT_TIMER_SHARDS=4",
		"TRANSIT_TIMER_LEASE=3s",
		"TRANSIT_TIMER_POLL_INTERVAL=250ms",
		// Instances side by side: each its own ops port.
		"TRANSIT_HTTP_ADDR=127.0.0.1:0",
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	p := &transitProc{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait() // the exit code is in cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			if t.Failed() {
				// A Go process dumps its goroutines on SIGQUIT: where it was stuck.
				_ = cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.exited:
				case <-time.After(2 * time.Second):
				}
			}
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("transit pid %d output (tail):\n%s", cmd.Process.Pid, p.out.tail(20000))
		}
	})
	return p
}

// stop sends sig and waits up to timeout for the process to exit; it
// returns the exit code (-1 when killed by a signal) and how long it took.
func (p *transitProc) stop(t *testing.T, sig syscall.Signal, timeout time.Duration) (code int, took time.Duration) {
	t.Helper()
	began := time.Now()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("transit did not exit within %s of %s", timeout, sig)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(began)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	return s[max(0, len(s)-n):]
}

// faultConfig is the in-process consumer's configuration, as the
// subprocess cases set it through TRANSIT_*.
func faultConfig(c *config.Config) {
	c.Concurrency = 8
	c.CommandTimeout = 4 * time.Second
	c.VisibilityTimeout = 5 * time.Second
	c.DrainTimeout = 10 * time.Second
}
