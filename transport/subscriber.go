package transport

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strconv"
	"strings"
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
	// CloseTimeout bounds Close: how long it waits for SQS to confirm what
	// was decided before it (deletes of acked messages, visibility of
	// nacked ones) and the return of what it gives back. Default 5s.
	CloseTimeout time.Duration
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
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 5 * time.Second
	}
	if c.MaxNackDelay <= 0 {
		c.MaxNackDelay = time.Minute
	}
}

// Subscriber consumes SQS queues for the Watermill router. Unlike the
// watermill-aws v1.0.1 subscriber, which handles one message at a time, it
// receives in batches, hands out up to Concurrency messages at once and
// acks each independently (deletes batched).
//
// It keeps Watermill's message.Subscriber contract: a message carries
// every message attribute as metadata, and a context with the values of
// Subscribe's, cancelled once the message is acked or nacked, or its
// subscription ends. A subscription ends when Subscribe's context is
// cancelled or Close is called: nothing is handed out from then on and
// its channel is closed. Close returns within CloseTimeout; it does not
// wait for messages still in flight, it gives them back to the queue.
// Draining (stop receiving, let what is in flight be handled and acked)
// is Drain, which the router's shutdown calls before closing (Shutdown).
// See DECISIONS.md.
type Subscriber struct {
	sqs    *sqs.Client
	config SubscriberConfig
	logger watermill.LoggerAdapter

	// mu orders Subscribe's registration of a subscription before Drain's
	// and Close's look at them.
	mu       sync.Mutex
	draining bool
	closed   bool
	queues   map[*queue]struct{}
}

// NewSubscriber returns a subscriber reading with client.
func NewSubscriber(client *sqs.Client, config SubscriberConfig, logger watermill.LoggerAdapter) *Subscriber {
	config.setDefaults()
	return &Subscriber{
		sqs:    client,
		config: config,
		logger: logger,
		queues: map[*queue]struct{}{},
	}
}

// Subscribe consumes the queue named topic until ctx is cancelled or the
// subscriber is closed; then it closes the returned channel. Each
// message's context carries ctx's values and is cancelled when the
// message is acked or nacked, or when the subscription ends.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := s.refusal(); err != nil {
		return nil, err
	}
	got, err := s.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(topic)})
	if err != nil {
		return nil, fmt.Errorf("look up queue %s: %w", topic, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refusalLocked(); err != nil {
		return nil, err
	}
	q := newQueue(s, aws.ToString(got.QueueUrl), ctx)
	s.queues[q] = struct{}{}
	// One receive loop per ten slots: a receive returns at most ten
	// messages. Each loop has at most one receive outstanding.
	for range (s.config.Concurrency + 9) / 10 {
		q.loops.Go(q.receive)
	}
	unwatch := context.AfterFunc(ctx, q.close)
	go func() {
		q.loops.Wait()
		q.inFlight.Wait()
		close(q.pending)
		close(q.settled)
		// A drained subscription stays known until it ends, for Close to
		// close its channel.
		<-q.ctx.Done()
		unwatch()
		s.mu.Lock()
		delete(s.queues, q)
		s.mu.Unlock()
	}()
	return q.out, nil
}

func (s *Subscriber) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusalLocked()
}

func (s *Subscriber) refusalLocked() error {
	switch {
	case s.closed:
		return errors.New("subscriber closed")
	case s.draining:
		return errors.New("subscriber draining")
	}
	return nil
}

func (s *Subscriber) subscriptions() []*queue {
	qs := make([]*queue, 0, len(s.queues))
	for q := range s.queues {
		qs = append(qs, q)
	}
	return qs
}

// Drain stops receiving and returns once every message handed out has
// been acked or nacked and its delete or visibility change sent, or when
// ctx ends. What was received and not yet handed out goes back to its
// queue at once. The channels stay open (Close closes them) and no
// message is handed out any more. A subscriber that drains refuses new
// subscriptions.
func (s *Subscriber) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	qs := s.subscriptions()
	s.mu.Unlock()
	for _, q := range qs {
		q.stop()
	}
	for _, q := range qs {
		select {
		case <-q.settled:
		case <-ctx.Done():
			awaiting := 0
			for _, q := range qs {
				awaiting += int(q.awaiting.Load())
			}
			return fmt.Errorf("drain: %d messages still in flight: %w", awaiting, context.Cause(ctx))
		}
	}
	return nil
}

// Close ends every subscription: its first step stops them, and from then
// on nothing is handed out; the channels are closed and every message's
// context is cancelled. A message acked or nacked before Close is still deleted or
// made visible again; one still awaiting its verdict, and what was
// received and not handed out, is made visible again at once (a verdict
// given after Close is ignored: the message is redelivered). Close waits
// up to CloseTimeout for SQS to confirm all of these.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	qs := s.subscriptions()
	s.mu.Unlock()
	for _, q := range qs {
		q.close()
	}
	bound := time.NewTimer(s.config.CloseTimeout)
	defer bound.Stop()
	for _, q := range qs {
		select {
		case <-q.settled:
		case <-bound.C:
			return fmt.Errorf("close: SQS has not confirmed every delete and return within %s; unconfirmed messages are redelivered after their visibility timeout", s.config.CloseTimeout)
		}
	}
	return nil
}

// queue is one subscription: its receive loops, its slots (each queue
// has its own, so a long poll on an idle queue never starves another) and
// the batching of its deletes.
type queue struct {
	sub *Subscriber
	url string
	// ctx is the subscription's: Subscribe's context, cancelled too when
	// the subscription ends. Messages' contexts derive from it.
	ctx    context.Context
	cancel context.CancelFunc
	// requests carries Subscribe's values to requests; it is never cancelled.
	requests context.Context
	// stopping is cancelled when the subscription stops receiving: on
	// Drain, or when it ends.
	stopping context.Context
	stop     context.CancelFunc
	closing  sync.Once

	// out is handed messages under sendMu read-locked, after a look at
	// stopping; close takes it write-locked, so once close has begun no
	// message is handed out.
	out    chan *message.Message
	sendMu sync.RWMutex

	slots chan struct{}
	// gathering lets one receive loop at a time gather its slots, so two
	// loops do not split the slots freed meanwhile into two small
	// receives; receiving counts the receives under way.
	gathering sync.Mutex
	receiving atomic.Int32
	// received wakes a gathering loop when a receive returns: the
	// handlers may be about to run out of work without a slot freeing.
	received chan struct{}
	// loops counts the receive loops.
	loops sync.WaitGroup
	// inFlight counts messages handed out and not yet settled with SQS.
	inFlight sync.WaitGroup
	// awaiting counts messages handed out and neither acked nor nacked.
	awaiting atomic.Int32
	// pending are acked messages waiting to be deleted in a batch.
	pending chan pendingDelete
	// settled is closed once the loops have ended and every message
	// handed out is settled.
	settled chan struct{}
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

// receiveLinger bounds how long a receive loop waits for a full batch of
// free slots (ten, or Concurrency when that is less) while its receive
// would not leave the handlers idle: another loop's receive is under way,
// or more than half the handlers are busy. A busy queue then receives
// about ten messages a request rather than one per freed slot (SQS bills
// by request); a queue with little in flight receives at once.
const receiveLinger = 250 * time.Millisecond

// deleteLinger is how long an acked message waits for others to share its
// DeleteMessageBatch, unless the subscription stops. A delete held back
// delays nothing a user sees (the command's events are out already); it
// only widens the window in which a crash leaves the message to be
// redelivered and replayed.
const deleteLinger = 500 * time.Millisecond

func newQueue(s *Subscriber, url string, ctx context.Context) *queue {
	q := &queue{
		sub: s, url: url, requests: context.WithoutCancel(ctx),
		out:      make(chan *message.Message),
		slots:    make(chan struct{}, s.config.Concurrency),
		pending:  make(chan pendingDelete, 10),
		received: make(chan struct{}, 1),
		settled:  make(chan struct{}),
	}
	q.ctx, q.cancel = context.WithCancel(ctx)
	q.stopping, q.stop = context.WithCancel(context.Background())
	go q.deleteBatches()
	return q
}

// close ends the subscription: it stops receiving, closes the channel
// once no message can be in the middle of being handed out, and cancels
// the subscription's context, so messages awaiting their verdict are
// given back.
func (q *queue) close() {
	q.closing.Do(func() {
		q.stop()
		q.sendMu.Lock()
		close(q.out)
		q.sendMu.Unlock()
		q.cancel()
	})
}

// receive asks for messages while there are free slots, until the
// subscription stops: from then on it sends no receive.
func (q *queue) receive() {
	for {
		q.gathering.Lock()
		n := q.acquire(min(10, q.sub.config.Concurrency))
		if n > 0 {
			q.receiving.Add(1)
		}
		q.gathering.Unlock()
		if n == 0 {
			return
		}
		msgs, err := q.receiveMessages(n)
		if err != nil {
			q.receiveEnded()
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
		q.handOut(msgs)
		q.receiveEnded()
	}
}

// receiveEnded counts a receive as over once what it brought is handed
// out, and wakes a loop gathering slots meanwhile.
func (q *queue) receiveEnded() {
	q.receiving.Add(-1)
	select {
	case q.received <- struct{}{}:
	default:
	}
}

// receiveMessages receives up to n messages. Once the subscription stops,
// an unanswered receive is cancelled when it is receiveGrace old (at once
// if it already is), and no new attempt (an SDK retry) is sent.
func (q *queue) receiveMessages(n int) ([]types.Message, error) {
	sent := time.Now()
	var answering atomic.Bool
	ctx, cancel := context.WithCancel(q.requests)
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
// than after the visibility timeout. (Handing it out during a drain
// would save its receive, but nothing guarantees that whoever stopped the
// subscription still handles or waits for it.)
func (q *queue) handOut(msgs []types.Message) {
	for i, m := range msgs {
		if !q.offer(m) {
			q.sub.giveBack(q.url, msgs[i:])
			q.release(len(msgs) - i)
			return
		}
	}
}

// offer hands m out unless the subscription stops first. It holds sendMu
// read-locked from its look at stopping to the end of the send, so close,
// which stops the subscription before it takes sendMu, finds no send
// under way and none starts after it.
func (q *queue) offer(m types.Message) bool {
	q.sendMu.RLock()
	defer q.sendMu.RUnlock()
	if q.stopped() {
		return false
	}
	msg := toMessage(m)
	ctx, cancel := context.WithCancel(q.ctx)
	msg.SetContext(ctx)
	q.inFlight.Add(1)
	q.awaiting.Add(1)
	select {
	case q.out <- msg:
		go q.settle(m, msg, cancel)
		return true
	case <-q.stopping.Done():
		cancel()
		q.awaiting.Add(-1)
		q.inFlight.Done()
		return false
	}
}

func (q *queue) stopped() bool { return q.stopping.Err() != nil }

// acquire takes up to max free slots, waiting for at least one; none once
// the subscription stops. Short of max, it waits up to receiveLinger for
// more while the handlers have work coming (see receiveLinger).
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
	var linger <-chan time.Time
	for n < max {
		select {
		case q.slots <- struct{}{}:
			n++
			continue
		default:
		}
		if q.receiving.Load() == 0 && int(q.awaiting.Load()) <= q.sub.config.Concurrency/2 {
			return n
		}
		if linger == nil {
			t := time.NewTimer(receiveLinger)
			defer t.Stop()
			linger = t.C
		}
		// A verdict lowers awaiting just before it frees its slot; a
		// receive's end is signalled: the moments to look again.
		select {
		case q.slots <- struct{}{}:
			n++
		case <-q.received:
		case <-linger:
			return n
		case <-q.stopping.Done():
			q.release(n)
			return 0
		}
	}
	return n
}

func (q *queue) release(n int) {
	for i := 0; i < n; i++ {
		<-q.slots
	}
}

// settle waits for the router's verdict and cancels the message's
// context on it. The slot is free at once, so the next receive does not
// wait for SQS to confirm this one: an ack deletes the message (in a
// batch with others), a nack makes it visible again after a backoff that
// grows with each receive. A message without a verdict when its
// subscription ends is made visible again at once; a verdict given later
// is ignored. Drain and Close wait for the request.
func (q *queue) settle(m types.Message, msg *message.Message, cancel context.CancelFunc) {
	defer q.inFlight.Done()
	var acked, nacked <-chan struct{} = msg.Acked(), msg.Nacked()
	verdict := func() (ack, nack bool) {
		select {
		case <-acked:
			return true, false
		case <-nacked:
			return false, true
		default:
			return false, false
		}
	}
	select {
	case <-acked:
	case <-nacked:
	case <-q.ctx.Done():
	}
	// A verdict given before the subscription ended wins over its end.
	ack, nack := verdict()
	cancel()
	q.awaiting.Add(-1)
	q.release(1)
	switch {
	case ack:
		q.delete(m, msg.UUID)
	case nack:
		q.sub.setVisibility(q.url, m, q.sub.nackDelay(m))
	default:
		q.sub.giveBack(q.url, []types.Message{m})
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
// it takes the partial token once deleteLinger has passed or the
// subscription stops (a drain or close waits for no linger).
func (q *queue) collect(first pendingDelete, partial chan<- struct{}) (batch []pendingDelete, isPartial bool) {
	batch = []pendingDelete{first}
	linger := time.NewTimer(deleteLinger)
	defer linger.Stop()
	stopping := q.stopping.Done()
	lingered := q.stopped()
	for len(batch) < 10 {
		var ready chan<- struct{}
		if lingered {
			ready = partial
		}
		select {
		case p := <-q.pending:
			batch = append(batch, p)
		case <-linger.C:
			lingered = true
		case <-stopping:
			lingered, stopping = true, nil
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

// giveBack makes messages visible again at once, ten to a request.
func (s *Subscriber) giveBack(url string, msgs []types.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(len(msgs), start+10)]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
		}
		out, err := s.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			s.logger.Error("Cannot give messages back; they are redelivered after their visibility timeout", err, watermill.LogFields{"count": len(chunk)})
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			s.logger.Error("Cannot give a message back; it is redelivered after its visibility timeout",
				errors.New(aws.ToString(f.Message)), watermill.LogFields{"message_id": aws.ToString(chunk[i].MessageId), "code": aws.ToString(f.Code)})
		}
	}
}

// toMessage keeps every message attribute as metadata (strings and
// numbers as sent, binary values as their bytes), as watermill-aws's
// unmarshaler does: producers' attributes and trace context reach the
// handlers. SQS allows ten attributes; the DLQ path, which adds its own,
// keeps within them (deadLetters). A body that SNS wrapped (a
// subscription without raw delivery) is unwrapped first, its attributes
// taken from the notification. The message's UUID, which stands for the
// command ID when the body names none, is the first of: the producer's
// `id` attribute, the Watermill UUID attribute (a Watermill publisher or
// a redrive set it; it is not kept as metadata), the SNS message ID of a
// wrapped body, SQS's message ID. Each is stable across redeliveries.
func toMessage(m types.Message) *message.Message {
	body, snsID := aws.ToString(m.Body), ""
	meta := message.Metadata{}
	for k, v := range m.MessageAttributes {
		// Binary, String and Number, each possibly with a custom type
		// (Binary.gif, Number.float).
		if strings.HasPrefix(aws.ToString(v.DataType), wmsqs.AWSBinaryDataType) {
			meta[k] = string(v.BinaryValue)
		} else if v.StringValue != nil {
			meta[k] = *v.StringValue
		}
	}
	if n, ok := snsNotification(body); ok {
		body, snsID = n.Message, n.MessageID
		for k, v := range n.MessageAttributes {
			meta[k] = v.Value
			if v.Type == wmsqs.AWSBinaryDataType {
				if b, err := base64.StdEncoding.DecodeString(v.Value); err == nil {
					meta[k] = string(b)
				}
			}
		}
	}
	msg := message.NewMessage(cmp.Or(meta[messages.IDAttribute], meta[wmsqs.UUIDAttribute], snsID, aws.ToString(m.MessageId)), []byte(body))
	delete(meta, wmsqs.UUIDAttribute)
	msg.Metadata = meta
	return msg
}
