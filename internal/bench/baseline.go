package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"transit/handlers"
	"transit/messages"
	"transit/router"
	"transit/service"
)

// noProvider stands in for the sandbox provider: the pipeline sends no cleanup.
type noProvider struct{}

func (noProvider) DeleteSandbox(context.Context, string) error {
	return errors.New("the benchmark has no sandbox provider")
}

// Baseline is the comparison loop: concurrency goroutines, each receiving
// one command, applying it with the same handler and store transitions,
// publishing its events, sending the commands it produces and deleting
// it, with the SDK alone: no Watermill, no router, no middleware. The
// difference to transit is their cost. It serves one domain, as
// TRANSIT_DOMAINS (--domains) names it: sandbox (the default) or task.
func Baseline(ctx context.Context, svc *service.Service, concurrency int) error {
	switch d := messages.Domain(svc.Config.Domains); d {
	case "", messages.Sandbox:
		return runBaseline(ctx, svc, messages.Sandbox, handlers.NewSandbox(svc.Store, noProvider{}, time.Now), concurrency)
	case messages.Task:
		h := handlers.NewTaskFor(svc.Store, svc.Config, svc.Stack.CommandQueue(messages.Task), time.Now)
		return runBaseline(ctx, svc, d, h, concurrency)
	default:
		return fmt.Errorf("baseline: --domains %q, want one of sandbox or task", svc.Config.Domains)
	}
}

// runBaseline runs the comparison loop on domain d's queue with h.
func runBaseline(ctx context.Context, svc *service.Service, d messages.Domain, h router.Handler, concurrency int) error {
	q, err := svc.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(svc.Stack.CommandQueue(d))})
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	topic, err := svc.TopicARN(ctx, svc.Stack.EventTopic(d))
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	b := baseline{svc: svc, handler: h, queueURL: aws.ToString(q.QueueUrl), topicARN: topic, queues: &sync.Map{}}
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.loop(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type baseline struct {
	svc      *service.Service
	handler  router.Handler
	queueURL string
	topicARN string
	// queues caches the URLs of the command queues produced commands
	// go to (a lease's timer.create), by domain, read on first use.
	queues *sync.Map
}

func (b baseline) loop(ctx context.Context) error {
	for ctx.Err() == nil {
		res, err := b.svc.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(b.queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 20, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("baseline receive: %w", err)
		}
		for _, m := range res.Messages {
			// Finish a received command even when stopping, as transit does.
			if err := b.handle(context.WithoutCancel(ctx), m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b baseline) handle(ctx context.Context, m sqstypes.Message) error {
	typ := ""
	if v, ok := m.MessageAttributes[messages.TypeAttribute]; ok {
		typ = aws.ToString(v.StringValue)
	}
	cmd, err := messages.Decode([]byte(aws.ToString(m.Body)), messages.Meta{ID: aws.ToString(m.MessageId), Type: typ})
	if err != nil {
		return fmt.Errorf("baseline decode: %w", err)
	}
	outs, err := b.handler.Handle(ctx, cmd)
	if err != nil {
		return err
	}
	for _, out := range outs {
		if err := b.publish(ctx, cmd, out); err != nil {
			return err
		}
	}
	if _, err := b.svc.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("baseline delete: %w", err)
	}
	return nil
}

// publish sends out where transit's router sends it: an event to the
// domain's topic, a command to its domain's queue (one SendMessage, in
// the wire form of transit's SQS publisher), with the same attributes.
func (b baseline) publish(ctx context.Context, cmd messages.Command, out messages.Out) error {
	id, body, err := messages.Encode(cmd, out)
	if err != nil {
		return err
	}
	attrs := map[string]string{messages.TypeAttribute: string(out.Type), messages.CorrelationAttribute: cmd.CorrelationID}
	if r, ok := out.Payload.(messages.Routed); ok {
		for k, v := range r.RoutingAttributes() {
			// SQS and SNS refuse an empty attribute value.
			if v != "" {
				attrs[k] = v
			}
		}
	}
	if out.Command {
		return b.send(ctx, id, body, out.Type, attrs)
	}
	str := func(v string) snstypes.MessageAttributeValue {
		return snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	ma := map[string]snstypes.MessageAttributeValue{wmsqs.UUIDAttribute: str(id)}
	for k, v := range attrs {
		ma[k] = str(v)
	}
	if _, err := b.svc.SNS.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(b.topicARN), Message: aws.String(string(body)), MessageAttributes: ma,
	}); err != nil {
		return fmt.Errorf("baseline publish: %w", err)
	}
	return nil
}

// send sends a produced command to its domain's queue.
func (b baseline) send(ctx context.Context, id string, body []byte, t messages.Type, attrs map[string]string) error {
	d, _ := messages.DomainOf(t)
	url, ok := b.queues.Load(d)
	if !ok {
		q, err := b.svc.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(b.svc.Stack.CommandQueue(d))})
		if err != nil {
			return fmt.Errorf("baseline send %s: %w", t, err)
		}
		url, _ = b.queues.LoadOrStore(d, aws.ToString(q.QueueUrl))
	}
	msg := message.NewMessage(id, body)
	for k, v := range attrs {
		msg.Metadata.Set(k, v)
	}
	var marshaler wmsqs.DefaultMarshalerUnmarshaler
	m, err := marshaler.Marshal(msg)
	if err != nil {
		return fmt.Errorf("baseline send: %w", err)
	}
	if _, err := b.svc.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(url.(string)), MessageBody: m.Body, MessageAttributes: m.MessageAttributes,
	}); err != nil {
		return fmt.Errorf("baseline send: %w", err)
	}
	return nil
}
