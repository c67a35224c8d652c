package router_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/router"
)

// heldReceives holds back the ReceiveMessage requests made while it is
// armed until release is closed, and says when the first one comes, so a
// test can stop a subscriber between asking for a receive and sending it.
type heldReceives struct {
	next    sqs.HTTPClient
	armed   atomic.Bool
	seen    chan struct{}
	release chan struct{}
}

func (c *heldReceives) Do(r *http.Request) (*http.Response, error) {
	if c.armed.Load() && r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" {
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
	endpoint := emulator.Endpoint()
	if endpoint == "" {
		moto, err := emulator.StartMoto(context.Background(), "")
		require.NoError(t, err)
		t.Cleanup(moto.Stop)
		endpoint = moto.URL
	}
	client = sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   httpClient,
	})
	name = emulator.TestPrefix + uuid.NewString()[:8]
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
	return client, name, url
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

// A stop sends no receive, not even one already asked for but not yet
// sent, so a message still queued has not been received once more (which
// counts towards the DLQ's maxReceiveCount); messages in flight are acked
// during the drain and deleted before Close returns.
func TestSubscriber_stop_spends_no_receive_count(t *testing.T) {
	gate := &heldReceives{next: awshttp.NewBuildableClient(), seen: make(chan struct{}, 1), release: make(chan struct{})}
	client, name, url := motoQueue(t, gate)
	const inFlight, queued = 20, 30
	sendMessages(t, client, url, "in flight", inFlight)
	// Two receive loops, one per ten slots.
	sub := router.NewSubscriber(client, router.SubscriberConfig{Concurrency: inFlight, DrainTimeout: 20 * time.Second}, watermill.NopLogger{})
	out, err := sub.Subscribe(context.Background(), name)
	require.NoError(t, err)
	held := take(t, out, inFlight)
	sendMessages(t, client, url, "queued", queued)

	// Two acks free two slots; the stop comes while the receive for them
	// is asked for but held back before it is sent. It is let go well
	// within the 2 s a receive in progress used to get.
	gate.armed.Store(true)
	held[0].Ack()
	held[1].Ack()
	select {
	case <-gate.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no receive after two acks")
	}
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	time.Sleep(300 * time.Millisecond)
	close(gate.release)
	for _, m := range held[2:] {
		m.Ack()
	}
	acked := inFlight
	for m := range out {
		m.Ack()
		acked++
	}
	require.NoError(t, <-closed)

	visible, invisible := queueDepth(t, client, url)
	assert.Equal(t, 0, invisible, "every acked message deleted, none held")
	assert.Equal(t, inFlight+queued-acked, visible)
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
				"%s was received during the stop and given back", aws.ToString(m.Body))
			left++
		}
	}
}

// An idle long poll holds no message, so a stop cancels it at once
// rather than after a grace.
func TestSubscriber_stop_cuts_idle_long_polls(t *testing.T) {
	client, name, _ := motoQueue(t, awshttp.NewBuildableClient())
	sub := router.NewSubscriber(client, router.SubscriberConfig{Concurrency: 20}, watermill.NopLogger{})
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
