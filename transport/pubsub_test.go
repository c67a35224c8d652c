package transport_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wmsqs "github.com/ThreeDotsLabs/watermill-aws/sqs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/transport"
)

// TestPubSub runs Watermill's universal Pub/Sub suite against transit's
// SQS subscriber, with watermill-aws's SQS publisher, on moto (or
// TRANSIT_TEST_ENDPOINT), twice: one message in flight at a time, where
// order is kept, and the default concurrency, where it is not. The
// features are those watermill-aws tests its own subscriber with
// (sqs/pubsub_test.go): no consumer groups, at-least-once, persistent,
// and ForceShort, the suite's short message counts, which keep a run on
// moto to about a minute.
func TestPubSub(t *testing.T) {
	endpoint := motoEndpoint(t)
	cfg := awsConfig(endpoint)
	client := sqs.NewFromConfig(cfg)
	// Every queue of the run is named under prefix, and deleted at the end.
	prefix := emulator.TestPrefix + uuid.NewString()[:8]
	t.Cleanup(func() { deleteQueues(t, client, prefix) })

	for _, c := range []struct {
		name        string
		concurrency int
		ordered     bool
	}{
		{"concurrency_1_ordered", 1, true},
		{"default_concurrency", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pubSub := func(t *testing.T) (message.Publisher, message.Subscriber) {
				pub, err := wmsqs.NewPublisher(wmsqs.PublisherConfig{
					AWSConfig: cfg,
					// As watermill-aws's test: a message handed out and
					// never acked comes back soon.
					CreateQueueConfig: wmsqs.QueueConfigAttributes{VisibilityTimeout: "1"},
					Marshaler:         wmsqs.DefaultMarshalerUnmarshaler{},
				}, watermill.NopLogger{})
				require.NoError(t, err)
				sub := transport.NewSubscriber(client, transport.SubscriberConfig{Concurrency: c.concurrency}, watermill.NopLogger{})
				return pub, provisioned{Subscriber: sub, client: client}
			}
			tests.TestPubSub(t, tests.Features{
				ConsumerGroups:      false,
				ExactlyOnceDelivery: false,
				GuaranteedOrder:     c.ordered,
				Persistent:          true,
				ForceShort:          true,
				GenerateTopicFunc: func(tctx tests.TestContext) string {
					return prefix + "-" + string(tctx.TestID)
				},
			}, pubSub, func(t *testing.T, _ string) (message.Publisher, message.Subscriber) { return pubSub(t) })
		})
	}
}

// provisioned is transit's subscriber with the suite's way of creating a
// queue before subscribing to it (message.SubscribeInitializer), which in
// transit is provisioning's: the subscriber itself only reads queues that
// exist. The queue is created as the publisher creates it.
type provisioned struct {
	*transport.Subscriber
	client *sqs.Client
}

func (p provisioned) SubscribeInitialize(topic string) error {
	_, err := p.client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName:  aws.String(topic),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): "1"},
	})
	return err
}

func deleteQueues(t *testing.T, client *sqs.Client, prefix string) {
	pages := sqs.NewListQueuesPaginator(client, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix), MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if !assert.NoError(t, err, "list the suite's queues") {
			return
		}
		for _, url := range page.QueueUrls {
			_, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
			assert.NoError(t, err, "delete %s", url)
		}
	}
}
