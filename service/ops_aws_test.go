package service_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// /metrics on transit's AWS calls and timers, after a timer.create
// delivered twice with one ID (the second's transaction is cancelled by
// the condition on the command's recorded outcome, and answered from it)
// and the timer firing a second later: requests by operation and outcome,
// capacity by table and index, the cancellation and its condition, and
// how late the callback was called.
func TestOps_metrics_count_aws_calls_and_timer_lateness(t *testing.T) {
	addr := freeAddr(t)
	s := newStack(t, func(c *config.Config) { c.HTTPAddr = addr })
	s.serve(service.ServeOptions{})
	cb := newCallbacks(t)

	id := uuid.NewString()
	executeAt := time.Now().Add(time.Second).Truncate(time.Millisecond)
	create := messages.TimerCreatePayload{TimerID: "lateness", ExecuteAt: executeAt, Callback: cb.URL}
	s.send(id, messages.TimerCreate, create)
	s.eventFor(id, messages.TimerCreated)
	s.send(id, messages.TimerCreate, create)
	s.collect(time.Minute, func(evs []service.TapEvent) bool { return len(causedBy(evs, id)) == 2 })
	cb.waitCalled(t, []string{"lateness"}, time.Minute)
	calledAt := cb.of("lateness")[0].At

	audit := store.TableName(s.cfg.Prefix, store.Audit)
	positive := []string{
		`transit_aws_requests_total{operation="TransactWriteItems",outcome="ok",service="DynamoDB"}`,
		`transit_aws_requests_total{operation="ReceiveMessage",outcome="ok",service="SQS"}`,
		`transit_aws_requests_total{operation="Publish",outcome="ok",service="SNS"}`,
		`transit_dynamodb_consumed_capacity_units_total{index="",kind="write",table="` + audit + `"}`,
		`transit_dynamodb_consumed_capacity_units_total{index="GlobalIndex",kind="write",table="` + audit + `"}`,
		`transit_dynamodb_consumed_capacity_units_total{index="EntityIndex",kind="write",table="` + audit + `"}`,
		`transit_dynamodb_transaction_cancellations_total{reason="ConditionalCheckFailed"}`,
		`transit_dynamodb_conditional_check_failures_total{operation="TransactWriteItems",table="` + audit + `"}`,
		`transit_aws_requests_total{operation="TransactWriteItems",outcome="TransactionCanceledException",service="DynamoDB"}`,
	}
	// The firing's outcome is counted as its delivery ends, just after
	// the callback.
	var got map[string]float64
	require.Eventually(t, func() bool {
		got = scrape(t, "http://"+addr+"/metrics")
		return got[`transit_timer_firing_lateness_seconds_count{}`] == 1
	}, 20*time.Second, 200*time.Millisecond, "timer lateness observed once")
	for _, series := range positive {
		assert.Positive(t, got[series], series)
	}
	assert.Zero(t, got[`transit_dynamodb_transaction_cancellations_total{reason="None"}`], "items that were not the reason are not counted")

	// Observed before the call: no later than the receiver saw it.
	late := histogramSum(t, "http://"+addr+"/metrics", "transit_timer_firing_lateness_seconds")
	assert.GreaterOrEqual(t, late, 0.0)
	assert.LessOrEqual(t, late, calledAt.Sub(executeAt).Seconds())
}

// histogramSum is the sum of the unlabelled histogram name on a /metrics
// page.
func histogramSum(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	require.Contains(t, families, name)
	return families[name].GetMetric()[0].GetHistogram().GetSampleSum()
}
