package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"transit/messages"
	"transit/transport"
)

// Tap is a temporary queue subscribed to event topics, for
// `transit send --wait` and for tests to see what transit published.
type Tap struct {
	svc      *Service
	queueURL string
	subARNs  []string
}

// TapEvent is one event read from a tap.
type TapEvent struct {
	// MessageID is the SNS message's Watermill UUID attribute: the event ID.
	MessageID  string
	Attributes map[string]string
	Envelope   messages.Envelope
}

// NewTap subscribes a new queue to the event topics of the given domains.
// A non-empty correlationID delivers only that correlation's events (an
// SNS filter policy on the correlation_id attribute).
func (s *Service) NewTap(ctx context.Context, correlationID string, domains ...messages.Domain) (*Tap, error) {
	name := s.Config.Prefix + "-tap-" + uuid.NewString()[:8]
	created, err := s.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("create tap queue: %w", err)
	}
	t := &Tap{svc: s, queueURL: aws.ToString(created.QueueUrl)}
	queueARN, err := transport.QueueARN(ctx, s.SQS, t.queueURL)
	if err != nil {
		t.Close(ctx)
		return nil, err
	}
	filter := ""
	if correlationID != "" {
		b, _ := json.Marshal(map[string][]string{messages.CorrelationAttribute: {correlationID}})
		filter = string(b)
	}
	var topics []string
	for _, d := range domains {
		topicARN, err := s.TopicARN(ctx, s.Stack.EventTopic(d))
		if err != nil {
			t.Close(ctx)
			return nil, err
		}
		topics = append(topics, topicARN)
	}
	if t.subARNs, err = transport.SubscribeQueue(ctx, s.SQS, s.SNS, topics, t.queueURL, queueARN, filter); err != nil {
		t.Close(ctx)
		return nil, err
	}
	return t, nil
}

// TopicARN builds the ARN of one of the stack's topics in the caller's account.
func (s *Service) TopicARN(ctx context.Context, name string) (string, error) {
	resolver, err := s.topicResolver(ctx)
	if err != nil {
		return "", err
	}
	arn, err := resolver.ResolveTopic(ctx, name)
	return string(arn), err
}

// Receive returns the events that arrive within one long poll (up to
// waitSeconds), deleting them from the tap.
func (t *Tap) Receive(ctx context.Context, waitSeconds int32) ([]TapEvent, error) {
	res, err := t.svc.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(t.queueURL),
		MaxNumberOfMessages:   10,
		WaitTimeSeconds:       waitSeconds,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from tap: %w", err)
	}
	var out []TapEvent
	var done []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range res.Messages {
		ev := TapEvent{Attributes: map[string]string{}}
		for k, v := range m.MessageAttributes {
			ev.Attributes[k] = aws.ToString(v.StringValue)
		}
		ev.MessageID = ev.Attributes[wmsqs.UUIDAttribute]
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev.Envelope); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", aws.ToString(m.MessageId), err)
		}
		out = append(out, ev)
		done = append(done, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(done) > 0 {
		if _, err := t.svc.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(t.queueURL), Entries: done}); err != nil {
			return nil, fmt.Errorf("delete from tap: %w", err)
		}
	}
	return out, nil
}

// Close unsubscribes and deletes the tap's queue.
func (t *Tap) Close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, sub := range t.subARNs {
		_, _ = t.svc.SNS.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(sub)})
	}
	_, _ = t.svc.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(t.queueURL)})
}
