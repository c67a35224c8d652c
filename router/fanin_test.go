package router_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/router"
	"transit/store"
	"transit/streams"
	"transit/transport"
)

// fanIn runs RegisterFanIn for the Layers table with rules on the
// in-memory pub/sub, feeds it records in order and returns the commands
// it sent. Every publish waits for its ack on both sides (gochannel alone
// keeps no order between publishes, which a stream shard does), so once
// the last record's publish returns, every command is in.
func fanIn(t *testing.T, rules []router.StreamRule, records []streams.Record) []*message.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := watermill.NopLogger{}
	blocking := gochannel.Config{BlockPublishUntilSubscriberAck: true}
	stream, commands := gochannel.NewGoChannel(blocking, logger), gochannel.NewGoChannel(blocking, logger)
	out, err := commands.Subscribe(ctx, transport.ByType)
	require.NoError(t, err)
	var mu sync.Mutex
	var got []*message.Message
	go func() {
		for m := range out {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			m.Ack()
		}
	}()
	r, err := message.NewRouter(message.RouterConfig{}, logger)
	require.NoError(t, err)
	const table = "test-Layers"
	router.RegisterFanIn(r, table, store.Layers.Name, stream, commands, rules, slog.Default())
	go func() { _ = r.Run(ctx) }()
	<-r.Running()

	for _, rec := range records {
		payload, err := json.Marshal(rec)
		require.NoError(t, err)
		msg := message.NewMessage(rec.EventID, payload)
		msg.Metadata.Set(streams.TypeAttribute, rec.Type)
		require.NoError(t, stream.Publish(table, msg))
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}

func layerRemoval(eventID, sk string, ttl bool) streams.Record {
	keys := map[string]any{"pk": "lyr#eu-west-1.requests", "sk": sk}
	return streams.Record{
		Type: streams.TypeRemove, Table: "test-Layers", EventID: eventID, TTLRemoval: ttl, Keys: keys,
		OldImage: map[string]any{"pk": keys["pk"], "sk": sk, "rgn": "eu-west-1", "pckg": "requests", "vrsn": json.Number("1"),
			"arn": "arn:aws:lambda:eu-west-1:123456789012:layer:requests:1"},
		ApproximateCreationTime: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
	}
}

// TestFanIn_layer_rule_fires_on_TTL_removals_only: a client's DeleteItem of
// a layer version sends nothing, DynamoDB's TTL removal of it sends
// layer.removed (ID from the record's event ID), and the pointer's removal
// sends nothing; with LayerRemovedOnAnyRemove the client's delete fires too.
func TestFanIn_layer_rule_fires_on_TTL_removals_only(t *testing.T) {
	records := []streams.Record{
		layerRemoval("client-delete", "lyrVrsn#v1", false),
		layerRemoval("pointer-ttl", "lyrVrsn0#", true),
		layerRemoval("version-ttl", "lyrVrsn#v1", true),
	}
	got := fanIn(t, []router.StreamRule{router.LayerRemovedRule}, records)
	require.Len(t, got, 1)
	assert.Equal(t, messages.DerivedID("version-ttl", messages.LayerRemoved, ""), got[0].UUID)
	assert.Equal(t, string(messages.LayerRemoved), got[0].Metadata.Get(messages.TypeAttribute))
	cmd, err := messages.Decode(got[0].Payload, messages.Meta{ID: got[0].UUID})
	require.NoError(t, err)
	assert.Equal(t, &messages.LayerRemovedPayload{
		LayerVersionPayload: messages.LayerVersionPayload{Region: "eu-west-1", Package: "requests", Version: 1},
		ARN:                 "arn:aws:lambda:eu-west-1:123456789012:layer:requests:1",
	}, cmd.Payload)

	got = fanIn(t, []router.StreamRule{router.LayerRemovedOnAnyRemove()}, records)
	require.Len(t, got, 2)
	assert.Equal(t, messages.DerivedID("client-delete", messages.LayerRemoved, ""), got[0].UUID)
	assert.Equal(t, messages.DerivedID("version-ttl", messages.LayerRemoved, ""), got[1].UUID)
	assert.True(t, router.LayerRemovedRule.TTLOnly, "the built-in rule itself stays TTL-only")
}
