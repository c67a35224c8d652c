package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"transit/messages"
	"transit/transport"
)

// Bus carries an agent's commands to transit and the events published
// for it back.
type Bus interface {
	// Send sends a command: its envelope (messages.NewCommand) and type.
	Send(ctx context.Context, t messages.Type, body []byte) error
	// Events delivers the events for the agent. It is closed when the bus
	// can deliver no more.
	Events() <-chan messages.Envelope
}

// SQSConfig is what an SQSBus needs: the clients, the stack, where its
// task events are published, and whose events to take.
type SQSConfig struct {
	SQS   *sqs.Client
	SNS   *sns.Client
	Stack transport.Stack
	// TopicARN is the ARN of the stack's task event topic.
	TopicARN       string
	OrgID, AgentID string
	Logger         *slog.Logger
}

// SQSBus is a Bus on the stack itself: commands go to the task command
// queue; events come through a queue of the agent's own, subscribed to
// the task event topic with a filter policy on the org and the agent.
type SQSBus struct {
	cfg             SQSConfig
	commandQueueURL string
	queueName       string
	queueURL        string
	subscriptionARN string
	sub             *transport.Subscriber
	stop            context.CancelFunc
	events          chan messages.Envelope
	pumped          chan struct{}
}

// eventRetention is how long an event waits in the agent's queue: one
// older than the longest wait for it is of no use.
const eventRetention = time.Hour

// OpenSQS creates the agent's queue (or takes the one a previous run
// left), subscribes it to the task events for the agent and starts
// receiving. Close undoes all of it.
func OpenSQS(ctx context.Context, cfg SQSConfig) (*SQSBus, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &SQSBus{cfg: cfg, queueName: QueueName(cfg.Stack, cfg.OrgID, cfg.AgentID), events: make(chan messages.Envelope), pumped: make(chan struct{})}
	commands := cfg.Stack.CommandQueue(messages.Task)
	got, err := cfg.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(commands)})
	if err != nil {
		return nil, fmt.Errorf("queue %s (run transit provision first?): %w", commands, err)
	}
	b.commandQueueURL = aws.ToString(got.QueueUrl)
	created, err := cfg.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(b.queueName), Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): fmt.Sprint(int(eventRetention / time.Second)),
	}})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", b.queueName, err)
	}
	b.queueURL = aws.ToString(created.QueueUrl)
	// From here on a failure leaves nothing behind.
	if err := b.subscribe(ctx); err != nil {
		return nil, errors.Join(err, b.Close(ctx))
	}
	if err := b.receive(ctx); err != nil {
		return nil, errors.Join(err, b.Close(ctx))
	}
	return b, nil
}

func (b *SQSBus) subscribe(ctx context.Context) error {
	queueARN, err := transport.QueueARN(ctx, b.cfg.SQS, b.queueURL)
	if err != nil {
		return err
	}
	// Only the events transit publishes for this agent: its leases, its
	// tasks' changes and its refused commands (docs/tasks.md, "Subscribing
	// as an agent").
	filter, err := json.Marshal(map[string][]string{messages.OrgAttribute: {b.cfg.OrgID}, messages.AgentAttribute: {b.cfg.AgentID}})
	if err != nil {
		return fmt.Errorf("filter policy: %w", err)
	}
	subs, err := transport.SubscribeQueue(ctx, b.cfg.SQS, b.cfg.SNS, []string{b.cfg.TopicARN}, b.queueURL, queueARN, string(filter))
	if len(subs) > 0 {
		b.subscriptionARN = subs[0]
	}
	return err
}

// receive consumes the agent's queue with transit's own SQS subscriber
// and passes each event on, acked once taken.
func (b *SQSBus) receive(ctx context.Context) error {
	b.sub = transport.NewSubscriber(b.cfg.SQS, transport.SubscriberConfig{Concurrency: 10, CloseTimeout: 5 * time.Second}, watermill.NewSlogLogger(b.cfg.Logger))
	// Receiving ends with Close, not with the context that opened the bus.
	recvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	msgs, err := b.sub.Subscribe(recvCtx, b.queueName)
	if err != nil {
		stop()
		close(b.pumped)
		return fmt.Errorf("receive from %s: %w", b.queueName, err)
	}
	b.stop = stop
	go func() {
		defer close(b.pumped)
		defer close(b.events)
		for msg := range msgs {
			var env messages.Envelope
			if err := json.Unmarshal(msg.Payload, &env); err != nil {
				b.cfg.Logger.Warn("agent: not an event, dropped", "queue", b.queueName, "message_id", msg.UUID, "error", err)
				msg.Ack()
				continue
			}
			select {
			case b.events <- env:
				msg.Ack()
			case <-recvCtx.Done():
				msg.Nack()
			}
		}
	}()
	return nil
}

// Send sends a command to the task command queue, as any producer would:
// the envelope as the body, its type as the type attribute.
func (b *SQSBus) Send(ctx context.Context, t messages.Type, body []byte) error {
	_, err := b.cfg.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(b.commandQueueURL),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(t))},
		},
	})
	if err != nil {
		return fmt.Errorf("send %s to %s: %w", t, b.cfg.Stack.CommandQueue(messages.Task), err)
	}
	return nil
}

// Events delivers the events for the agent until Close.
func (b *SQSBus) Events() <-chan messages.Envelope { return b.events }

// QueueURL is the agent's own queue.
func (b *SQSBus) QueueURL() string { return b.queueURL }

// Close unsubscribes the agent's queue, stops receiving and deletes the
// queue. It goes on after a failure, and after ctx is cancelled, so a
// stopped agent leaves nothing behind.
func (b *SQSBus) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	// The subscription first: nothing more is sent to a queue about to go.
	if b.subscriptionARN != "" {
		if _, err := b.cfg.SNS.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(b.subscriptionARN)}); err != nil {
			errs = append(errs, fmt.Errorf("unsubscribe %s: %w", b.queueName, err))
		}
		b.subscriptionARN = ""
	}
	if b.sub != nil {
		if b.stop != nil {
			b.stop()
		}
		if err := b.sub.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop receiving from %s: %w", b.queueName, err))
		}
		<-b.pumped
		b.sub = nil
	}
	if b.queueURL != "" {
		if _, err := b.cfg.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(b.queueURL)}); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", b.queueName, err))
		}
		b.queueURL = ""
	}
	return errors.Join(errs...)
}

// maxQueueName is SQS's longest queue name.
const maxQueueName = 80

var notQueueName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// QueueName is the agent's queue: <prefix>-agent-<org>-<agent>. SQS takes
// 80 letters, digits, hyphens and underscores; a name that does not fit
// has the others replaced and is cut short, and then ends in a hash of
// the whole, so two agents never share a queue.
func QueueName(stack transport.Stack, orgID, agentID string) string {
	name := stack.Prefix + "-agent-" + orgID + "-" + agentID
	if len(name) <= maxQueueName && !notQueueName.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := "-" + hex.EncodeToString(sum[:])[:12]
	clean := notQueueName.ReplaceAllString(name, "_")
	return strings.TrimRight(clean[:min(len(clean), maxQueueName-len(hash))], "-") + hash
}
