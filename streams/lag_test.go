package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/metrics"
)

// transit_stream_lag_seconds, as /metrics serves it from the
// subscriber: a held shard has a series, the age of the record being
// delivered while it waits for its ack, 0 once the shard is caught up;
// the series goes when the shard is handed back.
func TestSubscriber_lag_of_each_held_shard(t *testing.T) {
	for _, e := range emulators {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			db, st := clients(e.URL(t))
			table, leases := provision(t, db)
			_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "a"}, "sk": &types.AttributeValueMemberS{Value: "b"}}})
			require.NoError(t, err)

			sub := newSubscriber(t, emulatorConfig(db, st, leases, "lag", "a"), nil)
			m := metrics.New()
			m.Watch(metrics.State{StreamShards: sub.Lags, Queues: func() []metrics.QueueDepth { return nil }})
			msg := receive(t, subscribe(t, sub, table))
			rec := decode(t, msg)
			time.Sleep(1500 * time.Millisecond)

			// Unacked, the record ages on the gauge from its creation time.
			before := max(time.Since(rec.ApproximateCreationTime), 0).Seconds()
			lags := streamLags(t, m)
			after := time.Since(rec.ApproximateCreationTime).Seconds()
			require.Contains(t, lags, [2]string{table, rec.ShardID}, "the held shard's series")
			assert.Len(t, lags, 1)
			lag := lags[[2]string{table, rec.ShardID}]
			assert.GreaterOrEqual(t, lag, before)
			assert.LessOrEqual(t, lag, after)
			assert.Greater(t, lag, 1.0, "older than the wait for its ack")
			assert.Equal(t, 1.0, gauge(t, m, "transit_stream_leases_owned"))

			msg.Ack()
			waitFor(t, "the shard caught up", 10*time.Second, func() bool {
				return streamLags(t, m)[[2]string{table, rec.ShardID}] == 0
			})
			assert.Contains(t, streamLags(t, m), [2]string{table, rec.ShardID}, "still held")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, sub.Drain(ctx))
			assert.Empty(t, streamLags(t, m), "no series once the shard is handed back")
			assert.Equal(t, 0.0, gauge(t, m, "transit_stream_leases_owned"))
		})
	}
}

// streamLags are the transit_stream_lag_seconds series m serves, by table
// and shard.
func streamLags(t *testing.T, m *metrics.Metrics) map[[2]string]float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	out := map[[2]string]float64{}
	for _, f := range families {
		if f.GetName() != "transit_stream_lag_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[[2]string{labels["table"], labels["shard"]}] = s.GetGauge().GetValue()
		}
	}
	return out
}

// gauge is the value of the unlabelled gauge name.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not served", name)
	return 0
}
