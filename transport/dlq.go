package transport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"transit/messages"
	"transit/tracing"
)

// DeadLetter is a message in a DLQ.
type DeadLetter struct {
	MessageID  string
	Attributes map[string]string
	Body       string
	// Reason is why transit dead-lettered it; empty when SQS moved it
	// after MaxReceiveCount deliveries.
	Reason string
	// SentAt is SQS's SentTimestamp: when transit dead-lettered it, or,
	// for a message SQS moved after MaxReceiveCount, when it was first
	// sent to its command queue (SQS keeps the original).
	SentAt time.Time
}

// poisonKeys are the attributes the DLQ path adds; a redrive removes them.
var poisonKeys = []string{
	middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey,
	middleware.PoisonedHandlerKey, middleware.PoisonedSubscriberKey,
}

// maxAttributes is how many message attributes SQS takes on one message.
const maxAttributes = 10

// DeadLetters publishes to a DLQ within SQS's attribute limit. A message
// carries its producer's attributes as metadata; the DLQ path adds its
// four (the poison keys) and the SQS publisher the Watermill UUID, so a
// message with more than five of its own would be refused by SQS and
// never reach the DLQ. The poison keys are kept, then type, id and
// correlation_id, then traceparent (a traced publisher replaces it with
// its own, in the same slot), then the others by name, as many as fit;
// the reason names those left out.
func DeadLetters(pub message.Publisher) message.Publisher { return deadLetters{pub} }

type deadLetters struct{ message.Publisher }

func (p deadLetters) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		fitAttributes(msg)
	}
	return p.Publisher.Publish(topic, msgs...)
}

func fitAttributes(msg *message.Message) {
	room := MaxMetadata
	if len(msg.Metadata) <= room {
		return
	}
	first := append(append([]string{}, poisonKeys...), messages.TypeAttribute, messages.IDAttribute, messages.CorrelationAttribute, tracing.TraceparentAttribute)
	keys := slices.Sorted(maps.Keys(msg.Metadata))
	slices.SortStableFunc(keys, func(a, b string) int {
		ia, ib := slices.Index(first, a), slices.Index(first, b)
		if ia < 0 {
			ia = len(first)
		}
		if ib < 0 {
			ib = len(first)
		}
		return ia - ib
	})
	dropped := keys[room:]
	for _, k := range dropped {
		delete(msg.Metadata, k)
	}
	if reason, ok := msg.Metadata[middleware.ReasonForPoisonedKey]; ok {
		msg.Metadata.Set(middleware.ReasonForPoisonedKey, fmt.Sprintf("%s (attributes not kept, SQS takes %d: %s)", reason, maxAttributes, strings.Join(dropped, ", ")))
	}
}

// ListDeadLetters reads up to max messages of a DLQ without removing them:
// they are hidden while being read and made visible again at the end.
func ListDeadLetters(ctx context.Context, sqsc *sqs.Client, dlqURL string, max int) ([]DeadLetter, error) {
	var out []DeadLetter
	var handles []*string
	defer func() {
		// Release with a fresh context: the listing is over either way.
		for _, h := range handles {
			_, _ = sqsc.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(dlqURL), ReceiptHandle: h, VisibilityTimeout: 0,
			})
		}
	}()
	err := receiveAll(ctx, sqsc, dlqURL, max, func(m types.Message) error {
		handles = append(handles, m.ReceiptHandle)
		out = append(out, toDeadLetter(m))
		return nil
	})
	return out, err
}

// Redrive moves up to max messages from a DLQ back to its command queue,
// without the DLQ attributes, keeping each message's ID so a command that
// was partly applied is recognised. With pick, only the messages it
// picks move; the others are made visible again at once. It returns how
// many it moved.
func Redrive(ctx context.Context, sqsc *sqs.Client, dlqURL, queueURL string, max int, pick func(DeadLetter) bool) (int, error) {
	moved := 0
	var left []*string
	defer func() {
		for _, h := range left {
			_, _ = sqsc.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(dlqURL), ReceiptHandle: h, VisibilityTimeout: 0,
			})
		}
	}()
	err := receiveAll(ctx, sqsc, dlqURL, max, func(m types.Message) error {
		if pick != nil && !pick(toDeadLetter(m)) {
			left = append(left, m.ReceiptHandle)
			return nil
		}
		attrs := map[string]types.MessageAttributeValue{}
		for k, v := range m.MessageAttributes {
			attrs[k] = v
		}
		for _, k := range poisonKeys {
			delete(attrs, k)
		}
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(queueURL), MessageBody: m.Body, MessageAttributes: attrs,
		}); err != nil {
			return fmt.Errorf("redrive %s: %w", aws.ToString(m.MessageId), err)
		}
		if _, err := sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			return fmt.Errorf("remove redriven %s from the DLQ: %w", aws.ToString(m.MessageId), err)
		}
		moved++
		return nil
	})
	return moved, err
}

// receiveAll receives until the queue answers empty or max messages were seen.
func receiveAll(ctx context.Context, sqsc *sqs.Client, url string, max int, each func(types.Message) error) error {
	seen := map[string]bool{}
	for len(seen) < max {
		res, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         int32(min(10, max-len(seen))),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
			VisibilityTimeout:           60,
			WaitTimeSeconds:             1,
		})
		if err != nil {
			return fmt.Errorf("receive from %s: %w", url, err)
		}
		if len(res.Messages) == 0 {
			return nil
		}
		for _, m := range res.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			if err := each(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func toDeadLetter(m types.Message) DeadLetter {
	d := DeadLetter{MessageID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Attributes: map[string]string{}}
	for k, v := range m.MessageAttributes {
		d.Attributes[k] = aws.ToString(v.StringValue)
	}
	d.Reason = d.Attributes[middleware.ReasonForPoisonedKey]
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.SentAt = time.UnixMilli(ms).UTC()
	}
	return d
}
