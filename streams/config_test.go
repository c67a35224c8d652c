package streams_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

func TestSubscriberConfig_validate(t *testing.T) {
	f := newFakeStream("items")
	valid := func() streams.SubscriberConfig {
		return streams.SubscriberConfig{Tables: f.client("a"), Streams: f.client("a"), Leases: newMemLeases(), ConsumerGroup: "g"}
	}

	t.Run("defaults_fill_the_optional_fields", func(t *testing.T) {
		_, err := streams.NewSubscriber(valid(), nil)
		require.NoError(t, err)
	})

	cases := []struct {
		Name              string
		ModifyValidConfig func(*streams.SubscriberConfig)
		ExpectedError     string
	}{
		{Name: "missing_tables", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.Tables = nil }, ExpectedError: "missing Tables"},
		{Name: "missing_streams", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.Streams = nil }, ExpectedError: "missing Streams"},
		{Name: "missing_leases", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.Leases = nil }, ExpectedError: "missing Leases"},
		{Name: "missing_consumer_group", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.ConsumerGroup = "" }, ExpectedError: "missing ConsumerGroup"},
		{Name: "negative_lease_duration", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.LeaseDuration = -time.Second }, ExpectedError: "LeaseDuration must be positive"},
		{Name: "negative_poll_interval", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.PollInterval = -time.Second }, ExpectedError: "PollInterval must be positive"},
		{
			Name:              "renewal_too_rare_for_the_lease",
			ModifyValidConfig: func(c *streams.SubscriberConfig) { c.LeaseDuration, c.RenewInterval = 10*time.Second, 6*time.Second },
			ExpectedError:     "RenewInterval (6s) must be at most half LeaseDuration (10s)",
		},
		{
			Name:              "max_nack_backoff_below_the_first",
			ModifyValidConfig: func(c *streams.SubscriberConfig) { c.NackBackoff, c.MaxNackBackoff = time.Second, time.Millisecond },
			ExpectedError:     "MaxNackBackoff (1ms) must be at least NackBackoff (1s)",
		},
		{Name: "batch_too_large", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.BatchSize = 1001 }, ExpectedError: "BatchSize must be 1 to 1000"},
		{Name: "negative_checkpoint_every", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.CheckpointEvery = -1 }, ExpectedError: "CheckpointEvery must be at least 1, got -1"},
		{Name: "negative_checkpoint_interval", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.CheckpointInterval = -time.Second }, ExpectedError: "CheckpointInterval must be positive"},
		{Name: "negative_batch", ModifyValidConfig: func(c *streams.SubscriberConfig) { c.BatchSize = -1 }, ExpectedError: "BatchSize must be 1 to 1000"},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cfg := valid()
			c.ModifyValidConfig(&cfg)
			_, err := streams.NewSubscriber(cfg, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.ExpectedError)
		})
	}

	t.Run("every_problem_at_once", func(t *testing.T) {
		_, err := streams.NewSubscriber(streams.SubscriberConfig{BatchSize: 5000}, nil)
		require.Error(t, err)
		for _, want := range []string{"missing Tables", "missing Streams", "missing Leases", "missing ConsumerGroup", "BatchSize"} {
			assert.Contains(t, err.Error(), want)
		}
	})
}
