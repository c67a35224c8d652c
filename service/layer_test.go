package service_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/internal/emulator"
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

// deleteLayerItem deletes a layer version's item as a client would; with
// TRANSIT_LAYER_DELETE_ON_ANY_REMOVE it stands in for its TTL expiry, which
// the emulators neither perform nor mark.
func (s *stack) deleteLayerItem(region, pkg string, version int) {
	s.t.Helper()
	_, err := s.svc.DynamoDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName: aws.String(store.TableName(s.cfg.Prefix, store.Layers)),
		Key: map[string]dynamodbtypes.AttributeValue{
			"pk": &dynamodbtypes.AttributeValueMemberS{Value: "lyr#" + region + "." + pkg},
			"sk": &dynamodbtypes.AttributeValueMemberS{Value: "lyrVrsn#v" + strconv.Itoa(version)},
		},
	})
	require.NoError(s.t, err)
}

// TestLayers_removal_through_the_stream: deleting a deprecated version's
// item (standing in for its TTL expiry, TRANSIT_LAYER_DELETE_ON_ANY_REMOVE)
// reaches the fan-in, which sends layer.removed; the Lambda version is
// deleted and layer.version-deleted published once, although the fan-in
// crashed before sending the command the first time and was restarted.
func TestLayers_removal_through_the_stream(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.LayerDeleteOnAnyRemove = true })
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
	s.deleteLayerItem(region, pkg, 1)
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

// TestLayers_client_delete_keeps_the_Lambda_version: by default only a TTL
// removal deletes a layer version from Lambda, so a client's DeleteItem of
// a deprecated version's item leaves the version in Lambda. A probe rule
// turns every inserted layer version into a timer.delete named after its
// ARN (a no-op answered timer.deleted; one that cancels no transaction, so
// it holds on moto too): once v3's comes, the fan-in has read past the
// removal, which lies between v2's insert and v3's in the item's shard.
func TestLayers_client_delete_keeps_the_Lambda_version(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.StreamRules = `[{"table": "Layers", "event": "dynamodb.insert", "key_prefixes": {"pk": "lyr#", "sk": "lyrVrsn#v"},
			"command": "timer.delete", "fields": {"timer_id": "arn"}}]`
	})
	require.False(t, s.cfg.LayerDeleteOnAnyRemove, "the default")
	s.serve(service.ServeOptions{})
	const region, pkg = "us-east-1", "requests"
	arns := map[int]string{}
	for v := 1; v <= 2; v++ {
		arns[v] = s.publishLambdaLayer(region, pkg)
		s.publish(region, pkg, v, arns[v])
	}
	s.deleteLayerItem(region, pkg, 1)
	_, found := s.layerItem(region, pkg, 1)
	require.False(t, found, "v1's item is gone")
	arns[3] = s.publishLambdaLayer(region, pkg)
	s.publish(region, pkg, 3, arns[3])

	probed := func(evs []service.TapEvent, arn string) bool {
		for _, ev := range evs {
			if ev.Envelope.Type == messages.TimerDeleted && payloadOf[messages.TimerDeletedPayload](t, ev).TimerID == arn {
				return true
			}
		}
		return false
	}
	s.collect(90*time.Second, func(evs []service.TapEvent) bool { return probed(evs, arns[2]) && probed(evs, arns[3]) })
	// A layer.removed sent for the removal would be on the queue before
	// v3's probe; give a concurrent consumer time to finish it.
	time.Sleep(2 * time.Second)
	events := s.collect(time.Second, func([]service.TapEvent) bool { return true })
	for _, ev := range events {
		assert.NotEqual(t, messages.LayerVersionDeleted, ev.Envelope.Type, "no deletion: %s", ev.Envelope.Payload)
	}
	assert.ElementsMatch(t, []int64{1, 2, 3}, s.lambdaVersions(region, pkg), "v1 is still in Lambda")
}

// refusingLambda starts a moto server of the test's own with IAM
// authentication on, so it refuses every call signed with the test
// credentials with a 403, as Lambda refuses a role without
// lambda:DeleteLayerVersion. Turning authentication off again (off) makes
// it answer normally. Private: authentication on the shared moto would
// refuse every other test's calls too.
func refusingLambda(t *testing.T) (endpoint string, off func()) {
	t.Helper()
	m, err := emulator.StartMoto(context.Background(), "")
	if err != nil {
		t.Skipf("needs a moto server of its own: %v", err)
	}
	t.Cleanup(m.Stop)
	auth := func(count string) {
		resp, err := http.Post(m.URL+"/moto-api/reset-auth", "text/plain", strings.NewReader(count))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	auth("0")
	return m.URL, func() { auth("inf") }
}

// lambdaAt sends the Lambda calls of a configuration to endpoint, and the
// other services' where they were going: set after the endpoint is
// resolved and before the request is signed.
func lambdaAt(endpoint string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		if _, ok := st.Finalize.Get("ResolveEndpointV2"); !ok {
			return nil
		}
		return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("LambdaAt", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok && awsmiddleware.GetServiceID(ctx) == "Lambda" {
				u, err := url.Parse(endpoint)
				if err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, err
				}
				req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
			}
			return next.HandleFinalize(ctx, in)
		}), "ResolveEndpointV2", middleware.After)
	}
}

// TestLayers_version_delete_refused: Lambda refusing the deletion for good
// (a 4xx) ends layer.removed in layer.version-delete-failed with Lambda's
// answer, recorded as the command's outcome: a redelivery replays it
// without asking Lambda again, even once Lambda would now answer.
func TestLayers_version_delete_refused(t *testing.T) {
	s := newStack(t)
	endpoint, authOff := refusingLambda(t)
	svc, err := service.New(context.Background(), s.cfg, func(c *aws.Config) {
		c.APIOptions = append(c.APIOptions, lambdaAt(endpoint))
	})
	require.NoError(t, err)
	s.serveOn(svc, service.ServeOptions{})

	const region, pkg = "us-east-1", "requests"
	arn := s.publishLambdaLayer(region, pkg)
	cmd := uuid.NewString()
	payload := messages.LayerRemovedPayload{LayerVersionPayload: messages.LayerVersionPayload{Region: region, Package: pkg, Version: 1}, ARN: arn}
	s.send(cmd, messages.LayerRemoved, payload)
	ev := s.eventFor(cmd, messages.LayerVersionDeleteFail)
	failed := payloadOf[messages.LayerRejectedPayload](t, ev)
	assert.Equal(t, messages.LayerRejectedPayload{Region: region, Package: pkg, Version: 1, Reason: failed.Reason}, failed)
	assert.Contains(t, failed.Reason, "StatusCode: 403", "Lambda's answer is in the event")
	assert.Contains(t, failed.Reason, arn, "and names the version to delete by hand")
	rec := s.audit(cmd)
	require.NotNil(t, rec)
	assert.Equal(t, store.Rejected, rec["status"])
	assert.Equal(t, failed.Reason, rec["reason"])

	// Lambda would now delete it (the refusing server does not hold it, so
	// it would answer not found: deleted); the recorded refusal stands.
	authOff()
	s.send(cmd, messages.LayerRemoved, payload)
	events := s.collect(30*time.Second, func(evs []service.TapEvent) bool { return len(causedBy(evs, cmd)) == 2 })
	for _, ev := range causedBy(events, cmd) {
		assert.Equal(t, messages.LayerVersionDeleteFail, ev.Envelope.Type)
		assert.Equal(t, messages.DerivedID(cmd, messages.LayerVersionDeleteFail, ""), ev.MessageID)
		assert.Equal(t, failed, payloadOf[messages.LayerRejectedPayload](t, ev))
	}
	assert.Equal(t, []int64{1}, s.lambdaVersions(region, pkg), "the version is still in Lambda")
}

// TestLayers_concurrent_publications_leave_one_latest: ten versions of one
// package published at once, in any order, leave the pointer on the
// newest, that version the only latest, and every other deprecated.
func TestLayers_concurrent_publications_leave_one_latest(t *testing.T) {
	s := newStack(t)
	s.serve(service.ServeOptions{})
	const region, pkg, n = "us-east-1", "requests", 10
	cmds := make([]string, 0, n)
	for v := n; v >= 1; v-- {
		cmd := uuid.NewString()
		cmds = append(cmds, cmd)
		s.send(cmd, messages.LayerPublished, messages.LayerPublishedPayload{
			LayerVersionPayload: messages.LayerVersionPayload{Region: region, Package: pkg, Version: v}, ARN: fmt.Sprintf("arn:aws:lambda:%s:123456789012:layer:%s:%d", region, pkg, v),
		})
	}
	for _, cmd := range cmds {
		s.eventFor(cmd, messages.LayerPublishedEvent)
	}
	ptr, found, err := s.svc.Store.LatestLayer(context.Background(), region, pkg)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, n, ptr.Version)
	for v := 1; v <= n; v++ {
		item, ok := s.layerItem(region, pkg, v)
		require.True(t, ok, "v%d recorded", v)
		want := store.LayerDeprecated
		if v == n {
			want = store.LayerLatest
		}
		assert.Equal(t, want, item.Status, "v%d", v)
	}
}

// A layer publication whose answer is lost after its pointer moved: the
// next attempt finds its own version's row and the pointer on it, finishes
// by deprecating the version before, and answers once.
func TestLayers_publication_answer_lost_after_the_pointer_moved(t *testing.T) {
	publishedOnce(t, &lostAnswer{op: "UpdateItem", has: []string{"lyrVrsn0#"}})
}

// A layer publication whose process dies after putting its version's row,
// before moving the pointer: the redelivery finds its own row, moves the
// pointer, deprecates the version before, and answers once.
func TestLayers_publication_finished_after_a_crash_before_the_pointer(t *testing.T) {
	publishedOnce(t, &lostAnswer{op: "UpdateItem", has: []string{"lyrVrsn0#"}, die: true})
}

// publishedOnce publishes v1, then v2 through a process that loses the
// answer lost matches (the pointer's move to v2), and checks v2 ends up
// the latest, v1 deprecated, and v2's command answered once.
func publishedOnce(t *testing.T, lost *lostAnswer) {
	s := newStack(t)
	const region, pkg = "us-east-1", "requests"
	stop := s.serveLosing(t, lost)
	ev := s.publish(region, pkg, 1, s.publishLambdaLayer(region, pkg))
	require.Equal(t, messages.LayerPublishedEvent, ev.Envelope.Type)

	cmd := uuid.NewString()
	arn := s.publishLambdaLayer(region, pkg)
	s.send(cmd, messages.LayerPublished, messages.LayerPublishedPayload{
		LayerVersionPayload: messages.LayerVersionPayload{Region: region, Package: pkg, Version: 2}, ARN: arn,
	})
	if lost.die {
		lost.await(t)
		v2, _ := s.layerItem(region, pkg, 2)
		require.Equal(t, store.LayerLatest, v2.Status, "the row is put, the pointer not moved")
		_ = stop()
		s.serve(service.ServeOptions{})
	}
	p := payloadOf[messages.LayerPublishedEventPayload](t, s.eventFor(cmd, messages.LayerPublishedEvent))
	require.True(t, lost.hit.Load(), "the fault was reached")
	assert.True(t, p.Latest)
	assert.Equal(t, 1, p.Deprecated)
	assert.Equal(t, arn, p.ARN, "the event carries the version's ARN")

	ptr, found, err := s.svc.Store.LatestLayer(context.Background(), region, pkg)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 2, ptr.Version)
	assert.Equal(t, arn, ptr.ARN)
	v1, _ := s.layerItem(region, pkg, 1)
	assert.Equal(t, store.LayerDeprecated, v1.Status)
	assert.NotZero(t, v1.TTL, "v1 expires")
	v2, _ := s.layerItem(region, pkg, 2)
	assert.Equal(t, store.LayerLatest, v2.Status)
	assert.Equal(t, store.Applied, s.audit(cmd)["status"])
	time.Sleep(time.Second)
	assert.Len(t, causedBy(s.collect(time.Second, func([]service.TapEvent) bool { return true }), cmd), 1, "one answer")
}

// A publication of v2 paused after moving the pointer, before deprecating
// v1, then v3 published meanwhile, then v2's request fails and it is tried
// again: the retry finds its own row overtaken and still deprecates v1,
// which no other command would, so only v3 is left latest.
func TestLayers_publication_resumed_after_being_overtaken(t *testing.T) {
	s := newStack(t)
	const region, pkg = "us-east-1", "requests"
	lost := &lostAnswer{op: "UpdateItem", has: []string{"lyrVrsn#v1", `"deprecated"`}, stall: make(chan struct{}), drop: true}
	s.serveLosing(t, lost)
	s.publish(region, pkg, 1, s.publishLambdaLayer(region, pkg))
	v2 := uuid.NewString()
	s.send(v2, messages.LayerPublished, messages.LayerPublishedPayload{
		LayerVersionPayload: messages.LayerVersionPayload{Region: region, Package: pkg, Version: 2}, ARN: s.publishLambdaLayer(region, pkg),
	})
	lost.await(t)

	ev := s.publish(region, pkg, 3, s.publishLambdaLayer(region, pkg))
	require.Equal(t, messages.LayerPublishedEvent, ev.Envelope.Type)
	require.Nil(t, s.audit(v2), "v2 not answered before v3")
	close(lost.stall)
	s.eventFor(v2, messages.LayerPublishedEvent)

	ptr, _, err := s.svc.Store.LatestLayer(context.Background(), region, pkg)
	require.NoError(t, err)
	assert.Equal(t, 3, ptr.Version)
	for v, want := range map[int]string{1: store.LayerDeprecated, 2: store.LayerDeprecated, 3: store.LayerLatest} {
		item, ok := s.layerItem(region, pkg, v)
		require.True(t, ok, "v%d recorded", v)
		assert.Equal(t, want, item.Status, "v%d", v)
	}
}
