package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"transit/messages"
)

// SubscriberConfig tunes the SQS subscriber.
type SubscriberConfig struct {
	// Concurrency is how many messages of one queue may be in flight
	// (handed to the router and not yet acked) at once. Default 4.
	Concurrency int
	// WaitTimeSeconds is the long-poll wait of each receive. Default 20.
	WaitTimeSeconds int32
	// DrainTimeout bounds how long Close waits for in-flight messages to be
	// acked. Default 30s.
	DrainTimeout time.Duration
	// MaxNackDelay caps the visibility a nacked message gets before it is
	// received again; the delay doubles with each receive. Default 60s.
	MaxNackDelay time.Duration
}

func (c *SubscriberConfig) setDefaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.WaitTimeSeconds <= 0 {
		c.WaitTimeSeconds = 20
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.MaxNackDelay <= 0 {
		c.MaxNackDelay = time.Minute
	}
}

// Subscriber consumes SQS queues for the Watermill router. Unlike the
// watermill-aws v1.0.1 subscriber, which handles one message at a time and
// drops the ack of a message still in flight when it closes, it receives
// in batches, hands out up to Concurrency messages at once, acks each
// independently, and on Close stops receiving and waits for in-flight
// messages to be acked before returning. See DECISIONS.md.
type Subscriber struct {
	sqs    *sqs.Client
	config SubscriberConfig
	logger watermill.LoggerAdapter

	// mu orders Subscribe's count of subscriptions before Close's wait.
	mu      sync.Mutex
	closing chan struct{}
	once    sync.Once
	// subscriptions counts those not yet finished: receiving, or with
	// messages in flight or deletes under way.
	subscriptions sync.WaitGroup
}

// NewSubscriber returns a subscriber reading with client.
func NewSubscriber(client *sqs.Client, config SubscriberConfig, logger watermill.LoggerAdapter) *Subscriber {
	config.setDefaults()
	return &Subscriber{
		sqs:     client,
		config:  config,
		logger:  logger,
		closing: make(chan struct{}),
	}
}

// Subscribe consumes the queue named topic until ctx is cancelled or the
// subscriber is closed. Each message's context is not cancelled by
// either, so work in flight can finish during a drain.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	select {
	case <-s.closing:
		s.mu.Unlock()
		return nil, errors.New("subscriber closed")
	default:
	}
	s.subscriptions.Add(1)
	s.mu.Unlock()
	got, err := s.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(topic)})
	if err != nil {
		s.subscriptions.Done()
		return nil, fmt.Errorf("look up queue %s: %w", topic, err)
	}
	stopping, stop := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.closing:
		case <-ctx.Done():
		}
		stop()
	}()
	q := newQueue(s, aws.ToString(got.QueueUrl), context.WithoutCancel(ctx), stopping)
	out := make(chan *message.Message)
	// One receive loop per ten slots: a receive returns at most ten
	// messages. Each loop has at most one receive outstanding.
	loops := (s.config.Concurrency + 9) / 10
	var wg sync.WaitGroup
	for i := 0; i < loops; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.receive(out)
		}()
	}
	go func() {
		wg.Wait()
		q.inFlight.Wait()
		close(q.pending)
		close(out)
		s.subscriptions.Done()
	}()
	return out, nil
}

// queue is one subscription: its receive loops, its slots (each queue
// has its own, so a long poll on an idle queue never starves another) and
// the batching of its deletes.
type queue struct {
	sub *Subscriber
	url string
	// ctx carries the subscriber's values to requests; it is never cancelled.
	ctx context.Context
	// stopping is cancelled when the subscription stops receiving.
	stopping context.Context
	slots    chan struct{}
	// inFlight counts messages handed out and not yet settled with SQS.
	inFlight sync.WaitGroup
	// awaiting counts messages handed out and neither acked nor nacked.
	awaiting atomic.Int32
	// pending are acked messages waiting to be deleted in a batch.
	pending chan pendingDelete
}

type pendingDelete struct {
	m    types.Message
	uuid string
	done chan struct{}
}

// receiveGrace is how long after it is sent a receive is left to run when
// the subscription stops. SQS counts a message as received once it has
// picked it for a receive, before the answer reaches us: cancelling then
// would leave the message invisible for the whole visibility timeout,
// while an answer that arrives is given back at once. A receive
// unanswered for longer is an idle long poll, cancelled at once.
const receiveGrace = 2 * time.Second

// deleteLinger is how long an acked message waits for others to share its
// DeleteMessageBatch while other messages still await their verdict.
const deleteLinger = 5 * time.Millisecond

func newQueue(s *Subscriber, url string, ctx, stopping context.Context) *queue {
	q := &queue{
		sub: s, url: url, ctx: ctx, stopping: stopping,
		slots:   make(chan struct{}, s.config.Concurrency),
		pending: make(chan pendingDelete, 10),
	}
	go q.deleteBatches()
	return q
}

// receive asks for messages while there are free slots, until the
// subscription stops: from then on it sends no receive.
func (q *queue) receive(out chan<- *message.Message) {
	for {
		n := q.acquire(10)
		if n == 0 {
			return
		}
		msgs, err := q.receiveMessages(n)
		if err != nil {
			q.release(n)
			if q.stopped() {
				return
			}
			q.sub.logger.Error("Cannot receive messages", err, watermill.LogFields{"queue": q.url})
			select {
			case <-time.After(time.Second):
			case <-q.stopping.Done():
			}
			continue
		}
		q.release(n - len(msgs))
		q.handOut(out, msgs)
	}
}

// receiveMessages receives up to n messages. Once the subscription stops,
// an unanswered receive is cancelled when it is receiveGrace old (at once
// if it already is), and no new attempt (an SDK retry) is sent.
func (q *queue) receiveMessages(n int) ([]types.Message, error) {
	sent := time.Now()
	var answering atomic.Bool
	ctx, cancel := context.WithCancel(q.ctx)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			answering.Store(false)
			if q.stopped() {
				cancel()
			}
		},
		GotFirstResponseByte: func() { answering.Store(true) },
	})
	cut := func() {
		if !answering.Load() {
			cancel()
		}
	}
	defer context.AfterFunc(q.stopping, func() {
		if wait := receiveGrace - time.Since(sent); wait > 0 {
			time.AfterFunc(wait, cut)
		} else {
			cut()
		}
	})()
	res, err := q.sub.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             q.sub.config.WaitTimeSeconds,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, err
	}
	return res.Messages, nil
}

// handOut passes received messages to the router, each in a slot
// acquired for it. Once the subscription stops, what the router has not
// taken goes back to the queue, so another consumer takes it now rather
// than after the visibility timeout. (Handing it out during the drain
// would save its receive, but nothing guarantees that whoever stopped the
// subscription still handles or waits for it.)
func (q *queue) handOut(out chan<- *message.Message, msgs []types.Message) {
	for i, m := range msgs {
		if !q.stopped() {
			msg := toMessage(m)
			q.inFlight.Add(1)
			q.awaiting.Add(1)
			select {
			case out <- msg:
				go q.settle(m, msg)
				continue
			case <-q.stopping.Done():
				q.awaiting.Add(-1)
				q.inFlight.Done()
			}
		}
		for _, m := range msgs[i:] {
			q.sub.setVisibility(q.url, m, 0)
			q.release(1)
		}
		return
	}
}

func (q *queue) stopped() bool { return q.stopping.Err() != nil }

// acquire takes up to max free slots, waiting for at least one; none once
// the subscription stops.
func (q *queue) acquire(max int) int {
	select {
	case q.slots <- struct{}{}:
	case <-q.stopping.Done():
		return 0
	}
	// select chooses at random when a slot is free as the stop comes.
	if q.stopped() {
		q.release(1)
		return 0
	}
	n := 1
	for n < max {
		select {
		case q.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (q *queue) release(n int) {
	for i := 0; i < n; i++ {
		<-q.slots
	}
}

// settle waits for the router's verdict. The slot is free at once, so the
// next receive does not wait for SQS to confirm this one: an ack deletes
// the message (in a batch with others), a nack makes it visible again
// after a backoff that grows with each receive. The drain waits for both.
func (q *queue) settle(m types.Message, msg *message.Message) {
	defer q.inFlight.Done()
	select {
	case <-msg.Acked():
		q.awaiting.Add(-1)
		q.release(1)
		q.delete(m, msg.UUID)
	case <-msg.Nacked():
		q.awaiting.Add(-1)
		q.release(1)
		q.sub.setVisibility(q.url, m, q.sub.nackDelay(m))
	}
}

// delete returns once the message is deleted (or the delete failed and
// was logged), so a drain waits for it.
func (q *queue) delete(m types.Message, uuid string) {
	p := pendingDelete{m: m, uuid: uuid, done: make(chan struct{})}
	q.pending <- p
	<-p.done
}

// deleteBatches sends acked messages' deletes, up to ten per
// DeleteMessageBatch, each batch in its own goroutine. A full batch goes
// at once; otherwise one partial batch at a time, so the next one fills
// while a delete is under way and a busy queue sends fewer requests.
func (q *queue) deleteBatches() {
	partial := make(chan struct{}, 1)
	for first := range q.pending {
		batch, isPartial := q.collect(first, partial)
		go func() {
			q.flush(batch)
			if isPartial {
				<-partial
			}
		}()
	}
}

// collect adds acked messages to first's batch until it is full, or until
// it takes the partial token once deleteLinger has passed or no other
// message awaits its verdict (so a lone command is never held back).
func (q *queue) collect(first pendingDelete, partial chan<- struct{}) (batch []pendingDelete, isPartial bool) {
	batch = []pendingDelete{first}
	linger := time.NewTimer(deleteLinger)
	defer linger.Stop()
	lingered := false
	for len(batch) < 10 {
		var ready chan<- struct{}
		if lingered || q.awaiting.Load() == 0 {
			ready = partial
		}
		select {
		case p := <-q.pending:
			batch = append(batch, p)
		case <-linger.C:
			lingered = true
		case ready <- struct{}{}:
			return batch, true
		}
	}
	return batch, false
}

func (q *queue) flush(batch []pendingDelete) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
	for i, p := range batch {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: p.m.ReceiptHandle}
	}
	// A detached context: a delete cut short by shutdown would turn an
	// applied command into a redelivery.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := q.sub.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil {
		q.sub.logger.Error("Cannot delete acked messages; they will be redelivered and replayed", err, watermill.LogFields{"count": len(batch)})
		return
	}
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		q.sub.logger.Error("Cannot delete acked message; it will be redelivered and replayed",
			errors.New(aws.ToString(f.Message)), watermill.LogFields{"message_uuid": batch[i].uuid, "code": aws.ToString(f.Code)})
	}
}

func (s *Subscriber) nackDelay(m types.Message) time.Duration {
	count, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	delay := time.Second
	for i := 1; i < count && delay < s.config.MaxNackDelay; i++ {
		delay *= 2
	}
	return min(delay, s.config.MaxNackDelay)
}

func (s *Subscriber) setVisibility(url string, m types.Message, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(url),
		ReceiptHandle:     m.ReceiptHandle,
		VisibilityTimeout: int32(d / time.Second),
	}); err != nil {
		s.logger.Error("Cannot change message visibility", err, watermill.LogFields{"message_id": aws.ToString(m.MessageId)})
	}
}

// Close stops receiving and waits, up to DrainTimeout, for every message
// in flight to be acked or nacked and settled with SQS.
func (s *Subscriber) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		close(s.closing)
		s.mu.Unlock()
		done := make(chan struct{})
		go func() {
			s.subscriptions.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(s.config.DrainTimeout):
			err = fmt.Errorf("drain: messages still in flight after %s", s.config.DrainTimeout)
		}
	})
	return err
}

// toMessage keeps only the attributes transit routes on: producers may
// send up to ten, and the DLQ path must still have room for its own. A
// body that SNS wrapped (a subscription without raw delivery) is
// unwrapped first. The message's UUID, which stands for the command ID
// when the body names none, is the first of: the producer's `id`
// attribute, the Watermill UUID attribute (a Watermill publisher or a
// redrive set it), the SNS message ID of a wrapped body, SQS's message
// ID. Each is stable across redeliveries.
func toMessage(m types.Message) *message.Message {
	body, snsID := aws.ToString(m.Body), ""
	attr := func(k string) string { return aws.ToString(m.MessageAttributes[k].StringValue) }
	if n, ok := snsNotification(body); ok {
		body, snsID = n.Message, n.MessageID
		attr = func(k string) string { return n.MessageAttributes[k].Value }
	}
	msg := message.NewMessage(cmp.Or(attr(messages.IDAttribute), attr(wmsqs.UUIDAttribute), snsID, aws.ToString(m.MessageId)), []byte(body))
	for _, k := range []string{messages.TypeAttribute, messages.CorrelationAttribute} {
		if v := attr(k); v != "" {
			msg.Metadata.Set(k, v)
		}
	}
	return msg
}
