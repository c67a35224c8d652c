package router

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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

	closing  chan struct{}
	inFlight sync.WaitGroup
	loops    sync.WaitGroup
	once     sync.Once
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

// Subscribe consumes the queue named topic. Each message's context is not
// cancelled by Close, so work in flight can finish during a drain.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closing:
		return nil, errors.New("subscriber closed")
	default:
	}
	got, err := s.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(topic)})
	if err != nil {
		return nil, fmt.Errorf("look up queue %s: %w", topic, err)
	}
	url := aws.ToString(got.QueueUrl)
	out := make(chan *message.Message)
	q := newQueue(s, url)
	// Stopping does not cut a receive short at once: SQS may already have
	// handed it messages, which would then stay invisible for the whole
	// visibility timeout. A receive in progress gets receiveGrace to
	// return (a busy queue answers at once) and what it brings is given
	// back; only an idle long poll is cancelled.
	receiveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-s.closing:
		case <-ctx.Done():
		}
		close(q.stop)
		time.AfterFunc(receiveGrace, cancel)
	}()
	// One receive loop per ten slots: a receive returns at most ten
	// messages. More loops did not raise throughput reliably, and each
	// extra receive during a stop counts towards a message's
	// maxReceiveCount (a bounced message reached the DLQ).
	loops := (s.config.Concurrency + 9) / 10
	var wg sync.WaitGroup
	for i := 0; i < loops; i++ {
		wg.Add(1)
		s.loops.Add(1)
		go func() {
			defer wg.Done()
			defer s.loops.Done()
			q.receive(receiveCtx, out)
		}()
	}
	go func() {
		wg.Wait()
		s.inFlight.Wait()
		close(q.pending)
		close(out)
	}()
	return out, nil
}

// queue is one subscription: its receive loops, its slots (each queue
// has its own, so a long poll on an idle queue never starves another) and
// the batching of its deletes.
type queue struct {
	sub   *Subscriber
	url   string
	slots chan struct{}
	// stop is closed when the subscription stops receiving.
	stop chan struct{}
	// pending are acked messages waiting to be deleted in a batch.
	pending chan pendingDelete
}

type pendingDelete struct {
	m    types.Message
	uuid string
	done chan struct{}
}

// receiveGrace is how long a receive in progress when the subscription
// stops may take to return before it is cancelled.
const receiveGrace = 2 * time.Second

// deleteLinger is the longest an acked message waits for others to share
// its DeleteMessageBatch.
const deleteLinger = 5 * time.Millisecond

func newQueue(s *Subscriber, url string) *queue {
	q := &queue{sub: s, url: url, slots: make(chan struct{}, s.config.Concurrency), stop: make(chan struct{}), pending: make(chan pendingDelete, 10)}
	go q.deleteBatches()
	return q
}

func (q *queue) receive(ctx context.Context, out chan<- *message.Message) {
	s := q.sub
	logFields := watermill.LogFields{"queue": q.url}
	for !q.stopped() {
		n := q.acquire(10)
		if n == 0 {
			return
		}
		res, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(q.url),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             s.config.WaitTimeSeconds,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			q.release(n)
			if ctx.Err() != nil {
				return
			}
			s.logger.Error("Cannot receive messages", err, logFields)
			select {
			case <-time.After(time.Second):
			case <-q.stop:
			}
			continue
		}
		q.release(n - len(res.Messages))
		for _, m := range res.Messages {
			if !q.stopped() {
				msg := toMessage(m)
				select {
				case out <- msg:
					s.inFlight.Add(1)
					go q.settle(m, msg)
					continue
				case <-q.stop:
				}
			}
			// Stopping: give back what was received but not handed out, so
			// another consumer takes it now rather than after the
			// visibility timeout.
			s.setVisibility(q.url, m, 0)
			q.release(1)
		}
	}
}

func (q *queue) stopped() bool {
	select {
	case <-q.stop:
		return true
	default:
		return false
	}
}

// acquire takes up to max free slots, waiting for at least one.
func (q *queue) acquire(max int) int {
	select {
	case q.slots <- struct{}{}:
	case <-q.stop:
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

// busy is how many slots are taken: messages in flight, or asked for.
func (q *queue) busy() int { return len(q.slots) }

// settle waits for the router's verdict: an ack deletes the message (in a
// batch with others), a nack makes it visible again after a backoff that
// grows with each receive.
func (q *queue) settle(m types.Message, msg *message.Message) {
	defer q.sub.inFlight.Done()
	defer q.release(1)
	select {
	case <-msg.Acked():
		q.delete(m, msg.UUID)
	case <-msg.Nacked():
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

// deleteBatches sends up to ten deletes per DeleteMessageBatch. It sends
// at once when every message in flight has been acked, so a lone command
// is never held back; otherwise it waits up to deleteLinger for more.
func (q *queue) deleteBatches() {
	for first := range q.pending {
		batch := []pendingDelete{first}
		linger := time.NewTimer(deleteLinger)
	collect:
		for len(batch) < 10 && len(batch) < q.busy() {
			select {
			case p := <-q.pending:
				batch = append(batch, p)
			case <-linger.C:
				break collect
			}
		}
		linger.Stop()
		q.flush(batch)
	}
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
		close(s.closing)
		done := make(chan struct{})
		go func() {
			s.loops.Wait()
			s.inFlight.Wait()
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
// send up to ten, and the DLQ path must still have room for its own. The
// message's UUID is the Watermill UUID attribute when a Watermill
// publisher (or a redrive) set it, else SQS's message ID: both are stable
// across redeliveries, so they can stand for a command ID.
func toMessage(m types.Message) *message.Message {
	id := aws.ToString(m.MessageId)
	if v, ok := m.MessageAttributes[wmsqs.UUIDAttribute]; ok && aws.ToString(v.StringValue) != "" {
		id = aws.ToString(v.StringValue)
	}
	msg := message.NewMessage(id, []byte(aws.ToString(m.Body)))
	for _, k := range []string{messages.TypeAttribute, messages.CorrelationAttribute} {
		if v, ok := m.MessageAttributes[k]; ok && v.StringValue != nil {
			msg.Metadata.Set(k, *v.StringValue)
		}
	}
	return msg
}
