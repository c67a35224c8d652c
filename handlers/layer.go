package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"transit/messages"
	"transit/store"
)

type layerStore interface {
	PublishLayer(ctx context.Context, cmd store.Cmd, p messages.LayerPublishedPayload) (store.LayerPublication, error)
	RecordBuild(ctx context.Context, cmd store.Cmd, p messages.BuildRecordedPayload) (store.BuildRecord, error)
	MarkLayerDeleted(ctx context.Context, cmd store.Cmd, p messages.LayerVersionPayload) (store.LayerVersion, error)
	RecordedLayerRemoval(ctx context.Context, cmd store.Cmd) (store.LayerRemoval, bool, error)
	LayerVersionDeleted(ctx context.Context, cmd store.Cmd, p messages.LayerRemovedPayload) (store.LayerRemoval, error)
	LayerVersionDeleteRefused(ctx context.Context, cmd store.Cmd, p messages.LayerRemovedPayload, answer string) (store.LayerRemoval, error)
}

// layerDeleter deletes layer versions from AWS Lambda.
type layerDeleter interface {
	// DeleteLayerVersion deletes the version an ARN names; one already
	// gone counts as deleted.
	DeleteLayerVersion(ctx context.Context, arn string) error
}

// Layer handles the layers-and-builds commands.
type Layer struct {
	store  layerStore
	lambda layerDeleter
	now    func() time.Time
}

// NewLayer returns the layer handler.
func NewLayer(st layerStore, lambda layerDeleter, now func() time.Time) *Layer {
	if st == nil || lambda == nil || now == nil {
		panic("handlers: NewLayer needs a store, a Lambda client and a clock")
	}
	return &Layer{store: st, lambda: lambda, now: now}
}

// Handle applies one layer command.
func (h *Layer) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	switch p := cmd.Payload.(type) {
	case *messages.LayerPublishedPayload:
		return h.publish(ctx, c, p)
	case *messages.BuildRecordedPayload:
		return h.recordBuild(ctx, c, p)
	case *messages.LayerVersionPayload:
		return h.markDeleted(ctx, c, p)
	case *messages.LayerRemovedPayload:
		return h.removed(ctx, c, p)
	}
	return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no layer handler", cmd.Type)}
}

func (h *Layer) publish(ctx context.Context, c store.Cmd, p *messages.LayerPublishedPayload) ([]messages.Out, error) {
	res, err := h.store.PublishLayer(ctx, c, *p)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.LayerPublishRejected, rej.At, messages.LayerRejectedPayload{
			Region: p.Region, Package: p.Package, Version: p.Version, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.LayerPublishedEvent, unix(res.Version.PublishedAt), messages.LayerPublishedEventPayload{
		LayerVersionPayload: p.LayerVersionPayload, ARN: res.Version.ARN, Latest: res.Latest, Deprecated: res.Deprecated,
	}), nil
}

func (h *Layer) recordBuild(ctx context.Context, c store.Cmd, p *messages.BuildRecordedPayload) ([]messages.Out, error) {
	res, err := h.store.RecordBuild(ctx, c, *p)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.BuildRecordRejected, rej.At, messages.LayerRejectedPayload{
			Package: p.Package, Version: p.Version, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.BuildRecordedEvent, unix(res.Build.RecordedAt), messages.BuildRecordedEventPayload{
		Package: p.Package, Version: p.Version, RequirementsHash: res.Build.RequirementsHash, Latest: res.Latest,
	}), nil
}

func (h *Layer) markDeleted(ctx context.Context, c store.Cmd, p *messages.LayerVersionPayload) ([]messages.Out, error) {
	v, err := h.store.MarkLayerDeleted(ctx, c, *p)
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.LayerDeleteRejected, rej.At, messages.LayerRejectedPayload{
			Region: p.Region, Package: p.Package, Version: p.Version, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.LayerDeletionMarked, unix(v.DeletedDate), *p), nil
}

// removed deletes the layer version from Lambda. A redelivery after the
// outcome was recorded re-emits its event without calling Lambda again.
// A refusal Lambda will repeat (lambdaRefused) is recorded and announced
// as layer.version-delete-failed; any other failure is transient
// (retried, then dead-lettered), since the version must not outlive its
// record unnoticed.
func (h *Layer) removed(ctx context.Context, c store.Cmd, p *messages.LayerRemovedPayload) ([]messages.Out, error) {
	rem, done, err := h.store.RecordedLayerRemoval(ctx, c)
	if !done && err == nil {
		if lerr := h.lambda.DeleteLayerVersion(ctx, p.ARN); lerr == nil {
			rem, err = h.store.LayerVersionDeleted(ctx, c, *p)
		} else if lambdaRefused(lerr) {
			rem, err = h.store.LayerVersionDeleteRefused(ctx, c, *p, lerr.Error())
		} else {
			return nil, lerr
		}
	}
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.LayerVersionDeleteFail, rej.At, messages.LayerRejectedPayload{
			Region: p.Region, Package: p.Package, Version: p.Version, Reason: rej.Reason,
		}), nil
	}
	if err != nil {
		return nil, err
	}
	return one(messages.LayerVersionDeleted, unix(rem.DeletedAt), rem.LayerRemovedPayload), nil
}

// transientLambdaCodes are 4xx answers that a later attempt can get past:
// throttling, an operation in progress on the layer, credentials or a
// signature that a refresh renews.
var transientLambdaCodes = map[string]bool{
	"TooManyRequestsException":  true,
	"ThrottlingException":       true,
	"ResourceConflictException": true,
	"ResourceInUseException":    true,
	"ExpiredTokenException":     true,
	"RequestExpired":            true,
}

// lambdaRefused reports whether Lambda answered the deletion with a
// refusal it will repeat (AccessDenied, an invalid parameter: a 4xx).
// Throttling and the codes above, 5xx and errors without an answer
// (network, timeout) are transient. Not-found never comes here: the
// deleter counts a version already gone as deleted.
func lambdaRefused(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && transientLambdaCodes[api.ErrorCode()] {
		return false
	}
	var resp *smithyhttp.ResponseError
	if !errors.As(err, &resp) {
		return false
	}
	status := resp.HTTPStatusCode()
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}
