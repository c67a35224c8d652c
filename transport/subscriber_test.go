package transport_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"transit/internal/emulator"
	"transit/messages"
	"transit/router"
	"transit/transport"
)

// heldRequests holds back the SQS requests whose target starts with
// target, made while it is armed, until release is closed, and says when
// the first one comes: a test can stop a subscriber between asking for a
// receive and sending it, or keep Close's give-backs waiting.
type heldRequests struct {
	next    sqs.HTTPClient
	target  string
	armed   atomic.Bool
	seen    chan struct{}
	release chan struct{}
}

func newHeldRequests(target string, armed bool) *heldRequests {
	h := &heldRequests{next: awshttp.NewBuildableClient(), target: target, seen: make(chan struct{}, 1), release: make(chan struct{})}
	h.armed.Store(armed)
	return h
}

func (c *heldRequests) Do(r *http.Request) (*http.Response, error) {
	if c.armed.Load() && strings.HasPrefix(r.Header.Get("X-Amz-Target"), c.target) {
		select {
		case c.seen <- struct{}{}:
		default:
		}
		select {
		case <-c.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return c.next.Do(r)
}

// motoQueue creates a queue, deleted when the test ends, whose messages
// stay invisible for 30 s once received: on TRANSIT_TEST_ENDPOINT when it
// is set, else on a moto server of the test's own.
func motoQueue(t *testing.T, httpClient sqs.HTTPClient) (client *sqs.Client, name, url string) {
	t.Helper()
	client = sqsClient(motoEndpoint(t), httpClient)
	name = emulator.TestPrefix + uuid.NewString()[:8]
	return client, name, createQueue(t, client, name)
}

// motoEndpoint is TRANSIT_TEST_ENDPOINT when it is set, else a moto
// server of the test's own.
func motoEndpoint(t *testing.T) string {
	t.Helper()
	if endpoint := emulator.Endpoint(); endpoint != "" {
		return endpoint
	}
	moto, err := emulator.StartMoto(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(moto.Stop)
	return moto.URL
}

func awsConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

func sqsClient(endpoint string, httpClient sqs.HTTPClient) *sqs.Client {
	cfg := awsConfig(endpoint)
	if httpClient != nil {
		cfg.HTTPClient = httpClient
	}
	return sqs.NewFromConfig(cfg)
}

// createQueue creates a queue, deleted when the test ends, whose messages
// stay invisible for 30 s once received.
func createQueue(t *testing.T, client *sqs.Client, name string) (url string) {
	t.Helper()
	created, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): "30"},
	})
	require.NoError(t, err)
	url = aws.ToString(created.QueueUrl)
	t.Cleanup(func() {
		_, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		assert.NoError(t, err, "delete queue %s", name)
	})
	return url
}

func sendMessages(t *testing.T, client *sqs.Client, url, tag string, n int) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(fmt.Sprintf("%s %d", tag, j))})
		}
		_, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(t, err)
	}
}

func take(t *testing.T, out <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	var msgs []*message.Message
	for len(msgs) < n {
		select {
		case m := <-out:
			msgs = append(msgs, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d messages of %d", len(msgs), n)
		}
	}
	return msgs
}

func queueDepth(t *testing.T, client *sqs.Client, url string) (visible, invisible int) {
	t.Helper()
	got, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	require.NoError(t, err)
	visible, _ = strconv.Atoi(got.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	invisible, _ = strconv.Atoi(got.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, invisible
}

// A drain (the router's shutdown, Shutdown) sends no receive, not even
// one already asked for but not yet sent, so a message still queued has
// not been received once more (which counts towards the DLQ's
// maxReceiveCount); messages in flight are acked during the drain and
// deleted before it returns, and nothing is handed out after it began.
// (This asserted Close's behaviour when Close drained; Close now keeps
// Watermill's contract and returns at once, so the drain is Drain.)
func TestSubscriber_drain_spends_no_receive_count(t *testing.T) {
	gate := newHeldRequests("AmazonSQS.ReceiveMessage", false)
	client, name, url := motoQueue(t, gate)
	const inFlight, queued = 20, 30
	sendMessages(t, client, url, "in flight", inFlight)
	// Two receive loops, one per ten slots.
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: inFlight}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	held := take(t, out, inFlight)
	sendMessages(t, client, url, "queued", queued)

	// Two acks free two slots; the drain comes while the receive for them
	// is asked for but held back before it is sent. It is let go well
	// within the 2 s a receive in progress gets.
	gate.armed.Store(true)
	held[0].Ack()
	held[1].Ack()
	select {
	case <-gate.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no receive after two acks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- sub.Drain(ctx) }()
	time.Sleep(300 * time.Millisecond)
	close(gate.release)
	for _, m := range held[2:] {
		assert.NoError(t, m.Context().Err(), "a drain leaves the contexts of messages in flight alone")
		m.Ack()
	}
	require.NoError(t, <-drained)
	select {
	case m := <-out:
		t.Fatalf("%s handed out during the drain", m.Payload)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, sub.Close())
	_, open := <-out
	assert.False(t, open, "Close closes the channel")

	visible, invisible := queueDepth(t, client, url)
	assert.Equal(t, 0, invisible, "every acked message deleted, none held")
	assert.Equal(t, queued, visible)
	left := 0
	for left < visible {
		res, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "%d of %d queued messages received", left, visible)
		for _, m := range res.Messages {
			assert.Equal(t, "1", m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)],
				"%s was received during the drain and given back", aws.ToString(m.Body))
			left++
		}
	}
}

// Close with a message handed out and not acked, and others received and
// waiting to be handed out, returns within CloseTimeout even while SQS
// does not answer: it does not wait for the verdict. Nothing is handed
// out once it began, the channel is closed, the outstanding message's
// context is cancelled, and every message goes back to the queue at once
// (an ack after Close is ignored).
func TestSubscriber_close_is_bounded_with_a_message_not_acked(t *testing.T) {
	gate := newHeldRequests("AmazonSQS.ChangeMessageVisibility", true)
	client, name, url := motoQueue(t, gate)
	const sent = 10
	sendMessages(t, client, url, "m", sent)
	const bound = time.Second
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: sent, CloseTimeout: bound}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	outstanding := take(t, out, 1)[0]
	// The others are received and wait to be handed out.
	require.Eventually(t, func() bool {
		_, invisible := queueDepth(t, client, url)
		return invisible == sent
	}, 10*time.Second, 50*time.Millisecond)

	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	select {
	case <-gate.seen: // Close has begun: it gives messages back
	case <-time.After(5 * time.Second):
		t.Fatal("Close gave nothing back")
	}
	for open := true; open; {
		select {
		case m, ok := <-out:
			if open = ok; ok {
				t.Errorf("%s handed out after Close began", m.Payload)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the channel is not closed")
		}
	}
	err = <-closed
	took := time.Since(began)
	assert.Error(t, err, "SQS confirmed nothing: Close says so")
	assert.GreaterOrEqual(t, took, bound)
	// The bound, and time for the scheduler under -race.
	assert.Less(t, took, bound+time.Second, "Close returns within its bound")
	select {
	case <-outstanding.Context().Done():
	default:
		t.Error("the outstanding message's context is not cancelled")
	}
	assert.True(t, outstanding.Ack(), "an ack after Close is taken and ignored")

	close(gate.release)
	require.Eventually(t, func() bool {
		visible, invisible := queueDepth(t, client, url)
		return visible == sent && invisible == 0
	}, 10*time.Second, 50*time.Millisecond, "every message given back, the outstanding one too")
}

// Close returns promptly with a message outstanding when SQS answers, and
// a second Close does nothing.
func TestSubscriber_close_with_a_message_not_acked(t *testing.T) {
	client, name, url := motoQueue(t, awshttp.NewBuildableClient())
	sendMessages(t, client, url, "m", 3)
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: 1, CloseTimeout: 3 * time.Second}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	outstanding := take(t, out, 1)[0]
	began := time.Now()
	require.NoError(t, sub.Close())
	assert.Less(t, time.Since(began), time.Second)
	require.NoError(t, sub.Close())
	_, open := <-out
	assert.False(t, open)
	assert.Error(t, outstanding.Context().Err())
	visible, invisible := queueDepth(t, client, url)
	assert.Equal(t, 3, visible)
	assert.Equal(t, 0, invisible)
	_, err = sub.Subscribe(context.Background(), name)
	assert.Error(t, err, "a closed subscriber takes no subscription")
}

type ctxKey struct{}

// A message carries every attribute its producer set (and those of an SNS
// notification it came wrapped in) as metadata, and a context with the
// values of Subscribe's, cancelled once it is acked or nacked.
func TestSubscriber_keeps_attributes_and_context(t *testing.T) {
	client, name, url := motoQueue(t, awshttp.NewBuildableClient())
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String("plain"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"type":                    str("sandbox.allocate"),
			"correlation_id":          str("corr-1"),
			"traceparent":             str("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			"tenant":                  str("acme"),
			"priority":                {DataType: aws.String("Number"), StringValue: aws.String("7")},
			"blob":                    {DataType: aws.String("Binary"), BinaryValue: []byte("bytes")},
			"_watermill_message_uuid": str("uuid-1"),
		},
	})
	require.NoError(t, err)
	wrapped := `{"Type":"Notification","MessageId":"sns-1","TopicArn":"arn:aws:sns:us-east-1:123456789012:t","Message":"inner",` +
		`"MessageAttributes":{"traceparent":{"Type":"String","Value":"00-aa-bb-01"},"blob":{"Type":"Binary","Value":"Ynl0ZXM="}}}`
	_, err = client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(wrapped)})
	require.NoError(t, err)

	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: 2}, watermill.NopLogger{})
	defer sub.Close()
	ctx := context.WithValue(context.Background(), ctxKey{}, "subscribed")
	out, err := sub.Subscribe(ctx, name)
	require.NoError(t, err)
	byBody := map[string]*message.Message{}
	for _, m := range take(t, out, 2) {
		byBody[string(m.Payload)] = m
	}
	plain, inner := byBody["plain"], byBody["inner"]
	require.NotNil(t, plain)
	require.NotNil(t, inner)
	assert.Equal(t, "uuid-1", plain.UUID)
	assert.Equal(t, message.Metadata{
		"type": "sandbox.allocate", "correlation_id": "corr-1",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tenant":      "acme", "priority": "7", "blob": "bytes",
	}, plain.Metadata)
	assert.Equal(t, "sns-1", inner.UUID)
	assert.Equal(t, message.Metadata{"traceparent": "00-aa-bb-01", "blob": "bytes"}, inner.Metadata)

	for _, m := range []*message.Message{plain, inner} {
		assert.Equal(t, "subscribed", m.Context().Value(ctxKey{}))
		assert.NoError(t, m.Context().Err())
	}
	plain.Ack()
	inner.Nack()
	for _, m := range []*message.Message{plain, inner} {
		select {
		case <-m.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: context not cancelled after its verdict", m.Payload)
		}
	}
}

// Cancelling Subscribe's context ends the subscription: its channel is
// closed, and the others go on.
func TestSubscriber_subscribe_context_ends_the_subscription(t *testing.T) {
	client, name, url := motoQueue(t, awshttp.NewBuildableClient())
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{}, watermill.NopLogger{})
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ended, err := sub.Subscribe(ctx, name)
	require.NoError(t, err)
	other, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	cancel()
	select {
	case _, open := <-ended:
		assert.False(t, open)
	case <-time.After(5 * time.Second):
		t.Fatal("channel still open after its context was cancelled")
	}
	sendMessages(t, client, url, "m", 1)
	take(t, other, 1)[0].Ack()
}

// An idle long poll holds no message, so a stop cancels it at once
// rather than after a grace.
func TestSubscriber_stop_cuts_idle_long_polls(t *testing.T) {
	client, name, _ := motoQueue(t, awshttp.NewBuildableClient())
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: 20}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	// Past the grace a receive gets from being sent.
	time.Sleep(2500 * time.Millisecond)
	began := time.Now()
	require.NoError(t, sub.Close())
	assert.Less(t, time.Since(began), time.Second)
	_, open := <-out
	assert.False(t, open)
}

// Shutdown drains before it closes: the subscriber stops receiving, the
// handlers in flight finish with their contexts intact and are acked and
// deleted, nothing more is handed out, and only then is the router closed.
func TestShutdown_drains_then_closes(t *testing.T) {
	client, name, url := motoQueue(t, awshttp.NewBuildableClient())
	const inFlight, queued = 3, 3
	sendMessages(t, client, url, "m", inFlight+queued)
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: inFlight}, watermill.NopLogger{})
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	require.NoError(t, err)
	started := make(chan struct{}, inFlight+queued)
	release := make(chan struct{})
	var handled, cut atomic.Int32
	r.AddConsumerHandler("h", name, sub, func(msg *message.Message) error {
		started <- struct{}{}
		<-release
		if msg.Context().Err() != nil {
			cut.Add(1)
		}
		handled.Add(1)
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()
	for range inFlight {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers not started")
		}
	}

	shut := make(chan error, 1)
	go func() { shut <- router.Shutdown(r, 10*time.Second, sub) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with handlers in flight: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-shut)
	require.NoError(t, <-ran)
	assert.EqualValues(t, inFlight, handled.Load(), "nothing handed out once the drain began")
	assert.Zero(t, cut.Load(), "no handler in flight had its context cancelled")
	visible, invisible := queueDepth(t, client, url)
	assert.Equal(t, queued, visible, "what was not handled is in the queue")
	assert.Equal(t, 0, invisible, "every message handled was acked and deleted")
}

type neverHandler struct{ t *testing.T }

func (h neverHandler) Handle(context.Context, messages.Command) ([]messages.Out, error) {
	h.t.Error("a poison command was handled")
	return nil, nil
}

// The subscriber keeps every attribute a producer sent, and the DLQ path
// adds four: a poison command with nine attributes still reaches the DLQ
// within SQS's ten (moto does not enforce the limit, so the count is
// asserted), with its routing attributes and the reason, which names the
// attributes left out.
func TestRegister_dead_letters_fit_the_attribute_limit(t *testing.T) {
	client, _, queueURL, dlqURL, stop := deadLetterRouter(t, nil)

	id := uuid.NewString()
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range map[string]string{
		messages.TypeAttribute: string(messages.SandboxAllocate), messages.IDAttribute: id, messages.CorrelationAttribute: "corr",
		"a1": "1", "a2": "2", "a3": "3", "a4": "4", "a5": "5", "a6": "6",
	} {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("not json"), MessageAttributes: attrs})
	require.NoError(t, err)

	var dead []transport.DeadLetter
	require.Eventually(t, func() bool {
		dead, err = transport.ListDeadLetters(context.Background(), client, dlqURL, 10)
		return err == nil && len(dead) == 1
	}, 15*time.Second, 100*time.Millisecond, "the poison command reaches the DLQ")
	d := dead[0]
	assert.Len(t, d.Attributes, 10, "SQS takes ten")
	assert.Equal(t, id, d.Attributes[messages.IDAttribute])
	assert.Equal(t, string(messages.SandboxAllocate), d.Attributes[messages.TypeAttribute])
	assert.Equal(t, "corr", d.Attributes[messages.CorrelationAttribute])
	assert.Equal(t, id, d.Attributes[wmsqs.UUIDAttribute])
	assert.Contains(t, d.Attributes, middleware.PoisonedHandlerKey)
	assert.Contains(t, d.Reason, "attributes not kept, SQS takes 10: a3, a4, a5, a6")

	stop()
	visible, invisible := queueDepth(t, client, queueURL)
	assert.Equal(t, 0, visible+invisible, "the poison command was acked")
}

// deadLetterRouter runs a router whose sandbox handler never runs (every
// command sent is poison) on fresh SQS queues, its DLQ publisher traced
// with tp when tp records; stop drains and closes it.
func deadLetterRouter(t *testing.T, tp trace.TracerProvider) (client *sqs.Client, stack transport.Stack, queueURL, dlqURL string, stop func()) {
	endpoint := motoEndpoint(t)
	client = sqsClient(endpoint, nil)
	cfg := router.Config{Stack: transport.Stack{Prefix: emulator.TestPrefix + uuid.NewString()[:8]}, CommandTimeout: 5 * time.Second, CloseTimeout: 5 * time.Second, Tracing: tp}
	queueURL = createQueue(t, client, cfg.Stack.CommandQueue(messages.Sandbox))
	dlqURL = createQueue(t, client, cfg.Stack.DeadLetterQueue(messages.Sandbox))
	queues, err := wmsqs.NewPublisher(wmsqs.PublisherConfig{AWSConfig: awsConfig(endpoint), DoNotCreateQueueIfNotExists: true}, watermill.NopLogger{})
	require.NoError(t, err)
	r, err := router.New(cfg, watermill.NopLogger{})
	require.NoError(t, err)
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{}, watermill.NopLogger{})
	require.NoError(t, router.Register(r, cfg, messages.Sandbox, sub, transport.NewPublisher(cfg.Stack, nil, queues).Traced(tp), neverHandler{t}))
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()
	<-r.Running()
	return client, cfg.Stack, queueURL, dlqURL, func() {
		require.NoError(t, router.Shutdown(r, 5*time.Second, sub))
		require.NoError(t, <-ran)
	}
}

// countedRequests counts SQS requests by action.
type countedRequests struct {
	next  sqs.HTTPClient
	mu    sync.Mutex
	count map[string]int
}

func (c *countedRequests) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.count[strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")]++
	c.mu.Unlock()
	return c.next.Do(r)
}

func (c *countedRequests) of(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[action]
}

// A busy queue is received and deleted in batches close to ten: with a
// backlog and sixteen handlers, receives and deletes together stay under
// 0.3 requests per message (one per freed slot and per ack would be 2).
func TestSubscriber_busy_queue_batches_receives_and_deletes(t *testing.T) {
	const backlog, concurrency = 300, 16
	counter := &countedRequests{next: awshttp.NewBuildableClient(), count: map[string]int{}}
	client, name, url := motoQueue(t, counter)
	sendMessages(t, client, url, "backlog", backlog)
	receivesBefore := counter.of("ReceiveMessage")
	sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: concurrency}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	seen := map[string]bool{}
	for len(seen) < backlog {
		select {
		case m := <-out:
			seen[string(m.Payload)] = true
			// A handler's work: a store write or two.
			time.AfterFunc(time.Duration(10+rand.IntN(30))*time.Millisecond, func() { m.Ack() })
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d messages of %d", len(seen), backlog)
		}
	}
	require.NoError(t, sub.Drain(context.Background()))
	require.NoError(t, sub.Close())
	visible, invisible := queueDepth(t, client, url)
	assert.Zero(t, visible+invisible, "every message deleted")
	receives := counter.of("ReceiveMessage") - receivesBefore
	deletes := counter.of("DeleteMessageBatch") + counter.of("DeleteMessage")
	t.Logf("%d messages: %d receives, %d deletes", backlog, receives, deletes)
	assert.LessOrEqual(t, float64(receives+deletes)/backlog, 0.3)
}
