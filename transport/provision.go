package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"transit/messages"
)

// QueueSettings are the command queues' delivery settings.
type QueueSettings struct {
	// VisibilityTimeoutSeconds is how long a received command stays hidden
	// from other consumers; it must exceed the command timeout.
	VisibilityTimeoutSeconds int
	// MaxReceiveCount is how many deliveries a command gets before SQS
	// moves it to the DLQ.
	MaxReceiveCount int
}

// dlqRetentionSeconds keeps dead letters for SQS's maximum, 14 days.
const dlqRetentionSeconds = 14 * 24 * 3600

// Provision creates, for every domain, the DLQ, the command queue with its
// redrive policy, the command topic subscribed by the queue, and the event
// topic. Existing resources get their attributes set again; running it
// twice changes nothing.
func Provision(ctx context.Context, sqsc *sqs.Client, snsc *sns.Client, stack Stack, qs QueueSettings) error {
	for _, d := range messages.Domains() {
		if err := provisionDomain(ctx, sqsc, snsc, stack, d, qs); err != nil {
			return fmt.Errorf("provision %s messaging: %w", d, err)
		}
	}
	return nil
}

func provisionDomain(ctx context.Context, sqsc *sqs.Client, snsc *sns.Client, stack Stack, d messages.Domain, qs QueueSettings) error {
	_, dlqARN, err := ensureQueue(ctx, sqsc, stack.DeadLetterQueue(d), map[string]string{
		"MessageRetentionPeriod": strconv.Itoa(dlqRetentionSeconds),
	})
	if err != nil {
		return err
	}
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": strconv.Itoa(qs.MaxReceiveCount)})
	queueURL, queueARN, err := ensureQueue(ctx, sqsc, stack.CommandQueue(d), map[string]string{
		"VisibilityTimeout": strconv.Itoa(qs.VisibilityTimeoutSeconds),
		"RedrivePolicy":     string(redrive),
	})
	if err != nil {
		return err
	}
	cmdTopic, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(stack.CommandTopic(d))})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", stack.CommandTopic(d), err)
	}
	if _, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(stack.EventTopic(d))}); err != nil {
		return fmt.Errorf("create topic %s: %w", stack.EventTopic(d), err)
	}
	_, err = SubscribeQueue(ctx, sqsc, snsc, []string{aws.ToString(cmdTopic.TopicArn)}, queueURL, queueARN, "")
	return err
}

// SubscribeQueue subscribes a queue to topics with raw delivery, allowing
// exactly those topics to send to the queue (the queue's whole policy: a
// queue fed by several topics is subscribed in one call). A non-empty
// filterPolicy (SNS JSON) narrows what is delivered. Subscribing again is
// a no-op. It returns the subscriptions' ARNs.
func SubscribeQueue(ctx context.Context, sqsc *sqs.Client, snsc *sns.Client, topicARNs []string, queueURL, queueARN, filterPolicy string) ([]string, error) {
	policy, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect":    "Allow",
			"Principal": map[string]string{"Service": "sns.amazonaws.com"},
			"Action":    "sqs:SendMessage",
			"Resource":  queueARN,
			"Condition": map[string]any{"ArnEquals": map[string][]string{"aws:SourceArn": topicARNs}},
		}},
	})
	if _, err := sqsc.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(queueURL),
		Attributes: map[string]string{"Policy": string(policy)},
	}); err != nil {
		return nil, fmt.Errorf("allow %v to send to %s: %w", topicARNs, queueARN, err)
	}
	attrs := map[string]string{"RawMessageDelivery": "true"}
	if filterPolicy != "" {
		attrs["FilterPolicy"] = filterPolicy
	}
	var subs []string
	for _, topicARN := range topicARNs {
		sub, err := snsc.Subscribe(ctx, &sns.SubscribeInput{
			TopicArn:              aws.String(topicARN),
			Protocol:              aws.String("sqs"),
			Endpoint:              aws.String(queueARN),
			Attributes:            attrs,
			ReturnSubscriptionArn: true,
		})
		if err != nil {
			return subs, fmt.Errorf("subscribe %s to %s: %w", queueARN, topicARN, err)
		}
		subs = append(subs, aws.ToString(sub.SubscriptionArn))
	}
	return subs, nil
}

// ensureQueue creates a queue or, when it exists, sets its attributes, and
// returns its URL and ARN.
func ensureQueue(ctx context.Context, sqsc *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	got, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	var missing *sqstypes.QueueDoesNotExist
	switch {
	case errors.As(err, &missing):
		created, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return "", "", fmt.Errorf("create queue %s: %w", name, err)
		}
		url = aws.ToString(created.QueueUrl)
	case err != nil:
		return "", "", fmt.Errorf("look up queue %s: %w", name, err)
	default:
		url = aws.ToString(got.QueueUrl)
		if _, err := sqsc.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
			return "", "", fmt.Errorf("set attributes of queue %s: %w", name, err)
		}
	}
	arn, err = QueueARN(ctx, sqsc, url)
	return url, arn, err
}

// QueueARN reads a queue's ARN.
func QueueARN(ctx context.Context, sqsc *sqs.Client, url string) (string, error) {
	out, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("read ARN of %s: %w", url, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// Deprovision deletes what Provision creates, found by the same names
// (Stack.Topics and Stack.Queues): every subscription of the stack's
// topics (the command queues' and any tap's), the topics, the command
// queues and their DLQs. What is already gone is skipped, so it can
// finish an interrupted run.
func Deprovision(ctx context.Context, sqsc *sqs.Client, snsc *sns.Client, stack Stack) error {
	// Topics are deleted by ARN, whose account part only the listing gives
	// without an STS call.
	arns := map[string]string{}
	pages := sns.NewListTopicsPaginator(snsc, &sns.ListTopicsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		for _, t := range page.Topics {
			arn := aws.ToString(t.TopicArn)
			arns[arn[strings.LastIndex(arn, ":")+1:]] = arn
		}
	}
	var errs []error
	for _, name := range stack.Topics() {
		arn, ok := arns[name]
		if !ok {
			continue
		}
		// DeleteTopic drops the subscriptions on AWS; not every emulator
		// does, so they go first, explicitly.
		subs := sns.NewListSubscriptionsByTopicPaginator(snsc, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)})
		for subs.HasMorePages() {
			page, err := subs.NextPage(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("list subscriptions of %s: %w", name, err))
				break
			}
			for _, s := range page.Subscriptions {
				// A pending confirmation has no ARN to unsubscribe.
				if sub := aws.ToString(s.SubscriptionArn); strings.HasPrefix(sub, "arn:") {
					if _, err := snsc.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(sub)}); err != nil {
						errs = append(errs, fmt.Errorf("unsubscribe %s: %w", sub, err))
					}
				}
			}
		}
		if _, err := snsc.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(arn)}); err != nil {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", name, err))
		}
	}
	for _, name := range stack.Queues() {
		got, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		var missing *sqstypes.QueueDoesNotExist
		switch {
		case errors.As(err, &missing):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("look up queue %s: %w", name, err))
			continue
		}
		if _, err := sqsc.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: got.QueueUrl}); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
