package emulator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
)

// EndpointVariable names an emulator the user runs (LocalStack, moto) that
// the integration tests use for every service instead of starting their own.
const EndpointVariable = "TRANSIT_TEST_ENDPOINT"

// Endpoint is the value of TRANSIT_TEST_ENDPOINT without a trailing slash,
// or "" when the tests are to start their own emulators.
func Endpoint() string {
	return strings.TrimRight(os.Getenv(EndpointVariable), "/")
}

// Probe checks that something answers HTTP at url and tells whether it is
// moto: moto serves its own API under /moto-api/, LocalStack and AWS do not
// (LocalStack answers that path with an error status).
func Probe(ctx context.Context, url string) (isMoto bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/moto-api/", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("nothing answers at %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode == http.StatusOK, nil
}

// TestPrefix starts the name of everything an integration test creates, so
// a test stack is recognisable among others in a shared emulator or account.
const TestPrefix = "transit-test-"

// TestNames hands out the stack prefixes of one test process and finds what
// is left under them. It looks only at the prefixes it handed out: test
// packages run side by side against the same emulator, and a user's own
// stacks must not count as leftovers.
type TestNames struct {
	mu       sync.Mutex
	prefixes []string
	regions  []string
}

// Prefix returns a new prefix: TestPrefix and 8 hex digits.
func (n *TestNames) Prefix() string {
	p := TestPrefix + uuid.NewString()[:8]
	n.mu.Lock()
	defer n.mu.Unlock()
	n.prefixes = append(n.prefixes, p)
	return p
}

// LambdaRegion notes a region tests may have published Lambda layers in, for
// Leftovers to look there too (layers are listed per region).
func (n *TestNames) LambdaRegion(region string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.regions, region) {
		n.regions = append(n.regions, region)
	}
}

// Owns tells whether name is one of the prefixes handed out or under one.
func (n *TestNames) Owns(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.prefixes {
		if name == p || strings.HasPrefix(name, p+"-") {
			return true
		}
	}
	return false
}

// Leftovers lists the tables, queues, topics, subscriptions and Lambda
// layers (in the regions noted) still named under the prefixes handed out,
// each as "kind name".
func (n *TestNames) Leftovers(ctx context.Context, cfg aws.Config) ([]string, error) {
	left, err := n.LeftoverTables(ctx, dynamodb.NewFromConfig(cfg))
	if err != nil {
		return nil, err
	}
	queues := sqs.NewListQueuesPaginator(sqs.NewFromConfig(cfg), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(TestPrefix), MaxResults: aws.Int32(1000)})
	for queues.HasMorePages() {
		page, err := queues.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		for _, url := range page.QueueUrls {
			if name := lastPart(url, "/"); n.Owns(name) {
				left = append(left, "queue "+name)
			}
		}
	}
	snsc := sns.NewFromConfig(cfg)
	topics := sns.NewListTopicsPaginator(snsc, &sns.ListTopicsInput{})
	for topics.HasMorePages() {
		page, err := topics.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		for _, t := range page.Topics {
			if name := lastPart(aws.ToString(t.TopicArn), ":"); n.Owns(name) {
				left = append(left, "topic "+name)
			}
		}
	}
	subs := sns.NewListSubscriptionsPaginator(snsc, &sns.ListSubscriptionsInput{})
	for subs.HasMorePages() {
		page, err := subs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list subscriptions: %w", err)
		}
		for _, s := range page.Subscriptions {
			topic, endpoint := lastPart(aws.ToString(s.TopicArn), ":"), lastPart(aws.ToString(s.Endpoint), ":")
			if n.Owns(topic) || n.Owns(endpoint) {
				left = append(left, "subscription "+topic+" → "+endpoint)
			}
		}
	}
	n.mu.Lock()
	regions := slices.Clone(n.regions)
	n.mu.Unlock()
	for _, region := range regions {
		layers := lambda.NewListLayersPaginator(lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.Region = region }), &lambda.ListLayersInput{})
		for layers.HasMorePages() {
			page, err := layers.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("list Lambda layers in %s: %w", region, err)
			}
			for _, l := range page.Layers {
				if name := aws.ToString(l.LayerName); n.Owns(name) {
					left = append(left, "layer "+region+"/"+name)
				}
			}
		}
	}
	return left, nil
}

// LeftoverTables lists the tables still named under the prefixes handed
// out; for a process that created nothing else (its emulator may serve
// DynamoDB alone).
func (n *TestNames) LeftoverTables(ctx context.Context, db *dynamodb.Client) ([]string, error) {
	var left []string
	tables := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for tables.HasMorePages() {
		page, err := tables.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		for _, name := range page.TableNames {
			if n.Owns(name) {
				left = append(left, "table "+name)
			}
		}
	}
	return left, nil
}

func lastPart(s, sep string) string { return s[strings.LastIndex(s, sep)+1:] }
