package service_test

import (
	"archive/zip"
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
	"transit/service"
	"transit/store"
)

// publishLambdaLayer publishes a real layer version on the emulator's
// Lambda and returns its ARN.
func (s *stack) publishLambdaLayer(region, pkg string) string {
	s.t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create("python/" + pkg + ".py")
	require.NoError(s.t, err)
	_, _ = f.Write([]byte("# " + pkg))
	require.NoError(s.t, zw.Close())
	out, err := s.lambda(region).PublishLayerVersion(context.Background(), &lambda.PublishLayerVersionInput{
		LayerName: aws.String(s.cfg.Prefix + "-" + pkg),
		Content:   &lambdatypes.LayerVersionContentInput{ZipFile: buf.Bytes()},
	})
	require.NoError(s.t, err)
	return aws.ToString(out.LayerVersionArn)
}

func (s *stack) lambda(region string) *lambda.Client {
	return lambda.NewFromConfig(s.svc.AWS, func(o *lambda.Options) { o.Region = region })
}

// publish sends layer.published for a version and returns its event.
func (s *stack) publish(region, pkg string, version int, arn string) service.TapEvent {
	s.t.Helper()
	cmd := uuid.NewString()
	s.send(cmd, messages.LayerPublished, messages.LayerPublishedPayload{
		LayerVersionPayload: messages.LayerVersionPayload{Region: region, Package: pkg, Version: version}, ARN: arn,
	})
	events := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, cmd)) > 0 })
	return causedBy(events, cmd)[0]
}

func (s *stack) layerItem(region, pkg string, version int) (store.LayerVersion, bool) {
	all, err := s.svc.Store.RegionLayers(context.Background(), region)
	require.NoError(s.t, err)
	for _, v := range all {
		if v.Package == pkg && v.Version == version {
			return v, true
		}
	}
	return store.LayerVersion{}, false
}

// TestLayers_pointer_moves_only_forward: v1, v2, v3 published in order
// leave the pointer on v3, v3 latest, v1 and v2 deprecated with a TTL; a
// repeated v2 and a late v0 change nothing that is newer.
func TestLayers_pointer_moves_only_forward(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	const region, pkg = "us-east-1", "requests"
	arns := map[int]string{}
	for v := 1; v <= 3; v++ {
		arns[v] = s.publishLambdaLayer(region, pkg)
		ev := s.publish(region, pkg, v, arns[v])
		require.Equal(t, messages.LayerPublishedEvent, ev.Envelope.Type, string(ev.Envelope.Payload))
		p := payloadOf[messages.LayerPublishedEventPayload](t, ev)
		assert.True(t, p.Latest)
		assert.Equal(t, v-1, p.Deprecated)
	}
	ptr, found, err := s.svc.Store.LatestLayer(context.Background(), region, pkg)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 3, ptr.Version)
	assert.Equal(t, arns[3], ptr.ARN)
	v3, _ := s.layerItem(region, pkg, 3)
	assert.Equal(t, store.LayerLatest, v3.Status)
	assert.Zero(t, v3.TTL, "the latest version does not expire")
	for _, v := range []int{1, 2} {
		item, ok := s.layerItem(region, pkg, v)
		require.True(t, ok)
		assert.Equal(t, store.LayerDeprecated, item.Status)
		assert.InDelta(t, time.Now().Add(s.cfg.LayerRetention).Unix(), item.TTL, 60, "v%d expires after the retention", v)
	}

	before, err := s.svc.Store.RegionLayers(context.Background(), region)
	require.NoError(t, err)
	ev := s.publish(region, pkg, 2, arns[2])
	require.Equal(t, messages.LayerPublishRejected, ev.Envelope.Type)
	assert.Equal(t, messages.ReasonAlreadyRecorded, payloadOf[messages.LayerRejectedPayload](t, ev).Reason)
	after, err := s.svc.Store.RegionLayers(context.Background(), region)
	require.NoError(t, err)
	assert.ElementsMatch(t, before, after, "publishing v2 again changes nothing")
	ptr, _, _ = s.svc.Store.LatestLayer(context.Background(), region, pkg)
	assert.Equal(t, 3, ptr.Version)

	// An older version published late is recorded, deprecated, and does
	// not take the pointer.
	late := s.publishLambdaLayer(region, pkg)
	ev = s.publish(region, "requests", 5, late)
	require.True(t, payloadOf[messages.LayerPublishedEventPayload](t, ev).Latest)
	ev = s.publish(region, "requests", 4, arns[1])
	p := payloadOf[messages.LayerPublishedEventPayload](t, ev)
	assert.False(t, p.Latest)
	v4, _ := s.layerItem(region, pkg, 4)
	assert.Equal(t, store.LayerDeprecated, v4.Status)
	ptr, _, _ = s.svc.Store.LatestLayer(context.Background(), region, pkg)
	assert.Equal(t, 5, ptr.Version)
}

// TestLayers_access_patterns: every access pattern of docs/layers.md returns
// exactly the expected items, from the pointers and the GSIs.
func TestLayers_access_patterns(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	for _, l := range []struct {
		region, pkg string
		version     int
	}{
		{"us-east-1", "requests", 1}, {"us-east-1", "requests", 2}, {"eu-west-1", "requests", 1},
		{"us-east-1", "numpy", 7}, {"eu-west-1", "numpy", 3}, {"eu-west-1", "numpy", 4},
	} {
		ev := s.publish(l.region, l.pkg, l.version, s.publishLambdaLayer(l.region, l.pkg))
		require.Equal(t, messages.LayerPublishedEvent, ev.Envelope.Type)
	}
	for _, b := range []messages.BuildRecordedPayload{
		{Package: "requests", Version: 1, Requirements: "urllib3==1", RequirementsHash: "h1"},
		{Package: "requests", Version: 2, Requirements: "urllib3==2", RequirementsHash: "h2"},
		{Package: "numpy", Version: 9, Requirements: "", RequirementsHash: "n9"},
	} {
		cmd := uuid.NewString()
		s.send(cmd, messages.BuildRecorded, b)
		s.eventFor(cmd, messages.BuildRecordedEvent)
	}
	ctx := context.Background()

	latest, found, err := s.svc.Store.LatestLayer(ctx, "eu-west-1", "numpy")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 4, latest.Version, "latest ARN in a region for a package")

	everywhere, err := s.svc.Store.LatestLayers(ctx, "requests")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"us-east-1/2", "eu-west-1/1"}, regionVersions(everywhere), "latest for a package in all regions")

	deployed, err := s.svc.Store.RegionLayers(ctx, "us-east-1")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"us-east-1/1", "us-east-1/2", "us-east-1/7"}, regionVersions(deployed), "all deployed in a region, latest and deprecated")

	build, found, err := s.svc.Store.LatestBuild(ctx, "requests")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "h2", build.RequirementsHash, "latest requirements hash for one package")
	assert.Equal(t, "urllib3==2", build.Requirements)

	builds, err := s.svc.Store.LatestBuilds(ctx)
	require.NoError(t, err)
	hashes := map[string]string{}
	for _, b := range builds {
		hashes[b.Package] = b.RequirementsHash
	}
	assert.Equal(t, map[string]string{"requests": "h2", "numpy": "n9"}, hashes, "latest requirements hash for all packages")

	// Deleting takes a deprecated version out of both GSIs; the latest
	// cannot be deleted.
	cmd := uuid.NewString()
	s.send(cmd, messages.LayerDeleteRequested, messages.LayerVersionPayload{Region: "us-east-1", Package: "requests", Version: 1})
	s.eventFor(cmd, messages.LayerDeletionMarked)
	deployed, err = s.svc.Store.RegionLayers(ctx, "us-east-1")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"us-east-1/2", "us-east-1/7"}, regionVersions(deployed))
	cmd = uuid.NewString()
	s.send(cmd, messages.LayerDeleteRequested, messages.LayerVersionPayload{Region: "us-east-1", Package: "requests", Version: 2})
	ev := s.eventFor(cmd, messages.LayerDeleteRejected)
	assert.Equal(t, messages.ReasonIsLatest, payloadOf[messages.LayerRejectedPayload](t, ev).Reason)
}

func regionVersions(vs []store.LayerVersion) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Region+"/"+strconv.Itoa(v.Version))
	}
	return out
}

// TestLayers_removed_deletes_the_Lambda_version: layer.removed deletes the
// version from Lambda once and emits layer.version-deleted; redeliveries
// re-emit the same event.
func TestLayers_removed_deletes_the_Lambda_version(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	arn := s.publishLambdaLayer("us-east-1", "requests")
	cmd := uuid.NewString()
	payload := messages.LayerRemovedPayload{LayerVersionPayload: messages.LayerVersionPayload{Region: "us-east-1", Package: "requests", Version: 1}, ARN: arn}
	for range 3 {
		s.send(cmd, messages.LayerRemoved, payload)
	}
	events := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, cmd)) == 3 })
	for _, ev := range causedBy(events, cmd) {
		assert.Equal(t, messages.DerivedID(cmd, messages.LayerVersionDeleted, ""), ev.MessageID)
		assert.Equal(t, messages.LayerVersionDeleted, ev.Envelope.Type)
	}
	assert.Empty(t, s.lambdaVersions("us-east-1", "requests"), "the layer version is gone from Lambda")
}

// lambdaVersions lists the versions Lambda has of a package's layer.
func (s *stack) lambdaVersions(region, pkg string) []int64 {
	out, err := s.lambda(region).ListLayerVersions(context.Background(), &lambda.ListLayerVersionsInput{LayerName: aws.String(s.cfg.Prefix + "-" + pkg)})
	require.NoError(s.t, err)
	var vs []int64
	for _, v := range out.LayerVersions {
		vs = append(vs, v.Version)
	}
	return vs
}

// TestLayers_removal_through_the_stream: deleting a deprecated version's
// item (standing in for its TTL expiry) reaches the fan-in, which sends
// layer.removed; the Lambda version is deleted and layer.version-deleted
// published once, although the fan-in crashed before sending the command
// the first time and was restarted.
func TestLayers_removal_through_the_stream(t *testing.T) {
	s := newStack(t)
	setup := s.serve(service.ServeOptions{})
	const region, pkg = "us-east-1", "requests"
	for v := 1; v <= 2; v++ {
		s.publish(region, pkg, v, s.publishLambdaLayer(region, pkg))
	}
	require.NoError(t, setup())

	crashed := make(chan struct{})
	stop := s.serve(service.ServeOptions{WrapPublisher: func(p message.Publisher) message.Publisher {
		return &crashingPublisher{Publisher: p, typ: messages.LayerRemoved, crash: func() { close(crashed) }}
	}})
	_, err := s.svc.DynamoDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, store.Layers)),
		Key: map[string]dynamodbtypes.AttributeValue{
			"pk": &dynamodbtypes.AttributeValueMemberS{Value: "lyr#" + region + "." + pkg},
			"sk": &dynamodbtypes.AttributeValueMemberS{Value: "lyrVrsn#v1"},
		},
	})
	require.NoError(t, err)
	select {
	case <-crashed:
	case <-time.After(60 * time.Second):
		t.Fatal("the fan-in never turned the removal into a command")
	}
	_ = stop()
	assert.ElementsMatch(t, []int64{1, 2}, s.lambdaVersions(region, pkg), "nothing deleted before the crash")

	s.serve(service.ServeOptions{})
	deleted := func(evs []service.TapEvent) []service.TapEvent {
		var out []service.TapEvent
		for _, ev := range evs {
			if ev.Envelope.Type == messages.LayerVersionDeleted {
				out = append(out, ev)
			}
		}
		return out
	}
	events := s.collect(90*time.Second, func(evs []service.TapEvent) bool { return len(deleted(evs)) > 0 })
	p := payloadOf[messages.LayerRemovedPayload](t, deleted(events)[0])
	assert.Equal(t, 1, p.Version)
	assert.Equal(t, []int64{2}, s.lambdaVersions(region, pkg), "v1 is gone from Lambda, v2 stays")
	// However often the record and its command were delivered, one event ID.
	time.Sleep(2 * time.Second)
	events = s.collect(time.Second, func([]service.TapEvent) bool { return true })
	ids := map[string]bool{}
	for _, ev := range deleted(events) {
		ids[ev.MessageID] = true
	}
	assert.Len(t, ids, 1)
}
