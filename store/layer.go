package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Layer deployment statuses (dplySts); a deleted version has none.
const (
	LayerLatest     = "latest"
	LayerDeprecated = "deprecated"
)

// LayerVersion is a layer version item (sk lyrVrsn#v<version>) or, with
// sk lyrVrsn0#, the pointer to a package's latest version in a region.
type LayerVersion struct {
	// PK is lyr#<region>.<package>: a package's versions in one region
	// share a partition.
	PK string `dynamodbav:"pk" json:"-"`
	// SK is lyrVrsn#v<version>, or lyrVrsn0# for the pointer to the latest
	// version, which only ever moves to a higher version.
	SK string `dynamodbav:"sk" json:"-"`
	// Region is the AWS region the layer version is published in.
	Region string `dynamodbav:"rgn" json:"region"`
	// Package is the package the layer carries.
	Package string `dynamodbav:"pckg" json:"package"`
	// Version is the layer version's number; on the pointer, the latest
	// version's.
	Version int `dynamodbav:"vrsn" json:"version"`
	// ARN is the Lambda layer version's ARN.
	ARN string `dynamodbav:"arn" json:"arn"`
	// Status is latest or deprecated while the version is deployed. It is
	// absent on the pointer and on a version marked for deletion, so both
	// GSIs hold deployed versions only.
	Status string `dynamodbav:"dplySts,omitempty" json:"status,omitempty"`
	// RequirementsHash is the hash of the requirements the layer was built
	// from, when the producer gave one.
	RequirementsHash string `dynamodbav:"requirementsHsh,omitempty" json:"requirements_hash,omitempty"`
	// PublishedAt is when transit recorded the publication (Unix seconds).
	PublishedAt int64 `dynamodbav:"published_at" json:"published_at"`
	// DeprecatedAt is when a newer version replaced this one, or when it
	// was recorded already older than the latest (Unix seconds).
	DeprecatedAt int64 `dynamodbav:"deprecated_at,omitempty" json:"deprecated_at,omitempty"`
	// DeletedDate is when layer.delete-requested took the version out of
	// service (Unix seconds).
	DeletedDate int64 `dynamodbav:"deleted_date,omitempty" json:"deleted_date,omitempty"`
	// TTL is when DynamoDB removes the item, which the stream turns into
	// the deletion of the Lambda layer version (Unix seconds): the
	// deprecation time plus TRANSIT_LAYER_RETENTION, or the time of a
	// layer.delete-requested.
	TTL int64 `dynamodbav:"ttl,omitempty" json:"ttl,omitempty"`
}

// Build is a build item (pk bld#v<version>) or, with pk bldVrsn0#, the
// pointer to a package's latest build.
type Build struct {
	// PK is bld#v<version>, or bldVrsn0# for the pointers to every
	// package's latest build (one Query reads them all).
	PK string `dynamodbav:"pk" json:"-"`
	// SK is pckg#<package>.
	SK string `dynamodbav:"sk" json:"-"`
	// Package is the package built.
	Package string `dynamodbav:"pckg" json:"package"`
	// Version is the build's number; on the pointer, the latest build's.
	Version int `dynamodbav:"vrsn" json:"version"`
	// Requirements is the requirements file the build used (up to 64 KiB).
	Requirements string `dynamodbav:"requirements" json:"requirements"`
	// RequirementsHash is the hash of the requirements file.
	RequirementsHash string `dynamodbav:"requirementsHsh" json:"requirements_hash"`
	// RecordedAt is when transit recorded the build (Unix seconds).
	RecordedAt int64 `dynamodbav:"recorded_at" json:"recorded_at"`
}

// LayerPublication is what publishing a version did.
type LayerPublication struct {
	Version LayerVersion `json:"version"`
	// Latest is false when a newer version was already the latest.
	Latest bool `json:"latest"`
	// Deprecated is the version this one replaced as latest, or 0.
	Deprecated int `json:"deprecated,omitempty"`
}

// BuildRecord is what recording a build did.
type BuildRecord struct {
	Build  Build `json:"build"`
	Latest bool  `json:"latest"`
}

const (
	layerPointerSK = "lyrVrsn0#"
	buildPointerPK = "bldVrsn0#"
)

func layerPK(region, pkg string) string { return "lyr#" + region + "." + pkg }
func layerSK(version int) string        { return "lyrVrsn#v" + strconv.Itoa(version) }
func buildPK(version int) string        { return "bld#v" + strconv.Itoa(version) }
func buildSK(pkg string) string         { return "pckg#" + pkg }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func layerEntity(region, pkg string, version int) string {
	return fmt.Sprintf("LAYER#%s.%s#%d", region, pkg, version)
}

// PublishLayer records a published layer version in one transaction: the
// version's item as latest, the lyrVrsn0# pointer moved to it, and the
// previous latest deprecated with a TTL. The pointer only moves forward: a
// version older than the latest is recorded as deprecated straight away.
// A version already recorded is a *Rejection (already_recorded).
func (s *Store) PublishLayer(ctx context.Context, cmd Cmd, p messages.LayerPublishedPayload) (LayerPublication, error) {
	now := cmd.At.Unix()
	entity := layerEntity(p.Region, p.Package, p.Version)
	pk := layerPK(p.Region, p.Package)
	for round := 0; round < allocateRounds; round++ {
		ptr, found, err := getItem[LayerVersion](ctx, s.db, s.layers, key(pk, layerPointerSK))
		if err != nil {
			return LayerPublication{}, fmt.Errorf("publish %s: %w", entity, err)
		}
		v := LayerVersion{PK: pk, SK: layerSK(p.Version), Region: p.Region, Package: p.Package, Version: p.Version,
			ARN: p.ARN, RequirementsHash: p.RequirementsHash, PublishedAt: now}
		res := LayerPublication{Latest: !found || ptr.Version < p.Version}
		var items []types.TransactWriteItem
		if res.Latest {
			v.Status = LayerLatest
			pointer := v
			pointer.SK, pointer.Status = layerPointerSK, ""
			pointerCond := expression.AttributeNotExists(expression.Name("pk"))
			if found {
				pointerCond = expression.Name("vrsn").Equal(expression.Value(ptr.Version))
			}
			put, err := putIn(s.layers, pointer, pointerCond)
			if err != nil {
				return LayerPublication{}, err
			}
			items = append(items, put)
			if found {
				res.Deprecated = ptr.Version
				deprecate, err := updateIn(s.layers, key(pk, layerSK(ptr.Version)),
					expression.Set(expression.Name("dplySts"), expression.Value(LayerDeprecated)).
						Set(expression.Name("deprecated_at"), expression.Value(now)).
						Set(expression.Name("ttl"), expression.Value(cmd.At.Add(s.layerRetention).Unix())),
					expression.Name("dplySts").Equal(expression.Value(LayerLatest)))
				if err != nil {
					return LayerPublication{}, err
				}
				items = append(items, deprecate)
			}
		} else {
			// Late: a newer version is the latest; keep it so.
			v.Status, v.DeprecatedAt, v.TTL = LayerDeprecated, now, cmd.At.Add(s.layerRetention).Unix()
			check, err := conditionCheck(s.layers, key(pk, layerPointerSK), expression.Name("vrsn").Equal(expression.Value(ptr.Version)))
			if err != nil {
				return LayerPublication{}, err
			}
			items = append(items, check)
		}
		row, err := putIn(s.layers, v, expression.AttributeNotExists(expression.Name("pk")))
		if err != nil {
			return LayerPublication{}, err
		}
		res.Version = v
		put, err := s.newAuditPut(cmd, entity, Applied, "", res)
		if err != nil {
			return LayerPublication{}, err
		}
		items = append([]types.TransactWriteItem{row}, append(items, put)...)
		err = s.settle(ctx, cmd, items, &res)
		switch {
		case conflictOn(err, 0):
			var replayed LayerPublication
			return replayed, s.recordRejection(ctx, cmd, entity, &Rejection{Reason: messages.ReasonAlreadyRecorded, At: cmd.At}, &replayed)
		case errors.Is(err, errConflict):
			continue // the pointer moved: decide again
		case err != nil:
			return LayerPublication{}, fmt.Errorf("publish %s: %w", entity, err)
		}
		return res, nil
	}
	return LayerPublication{}, fmt.Errorf("publish %s: %w", entity, errConflict)
}

// RecordBuild records a build and moves the bldVrsn0# pointer to it, only
// forward, in one transaction. A build already recorded is a *Rejection.
func (s *Store) RecordBuild(ctx context.Context, cmd Cmd, p messages.BuildRecordedPayload) (BuildRecord, error) {
	now := cmd.At.Unix()
	entity := fmt.Sprintf("BUILD#%s#%d", p.Package, p.Version)
	for round := 0; round < allocateRounds; round++ {
		ptr, found, err := getItem[Build](ctx, s.db, s.layers, key(buildPointerPK, buildSK(p.Package)))
		if err != nil {
			return BuildRecord{}, fmt.Errorf("record %s: %w", entity, err)
		}
		b := Build{PK: buildPK(p.Version), SK: buildSK(p.Package), Package: p.Package, Version: p.Version,
			Requirements: p.Requirements, RequirementsHash: p.RequirementsHash, RecordedAt: now}
		res := BuildRecord{Build: b, Latest: !found || ptr.Version < p.Version}
		row, err := putIn(s.layers, b, expression.AttributeNotExists(expression.Name("pk")))
		if err != nil {
			return BuildRecord{}, err
		}
		var pointerItem types.TransactWriteItem
		switch {
		case !found:
			pointer := b
			pointer.PK = buildPointerPK
			pointerItem, err = putIn(s.layers, pointer, expression.AttributeNotExists(expression.Name("pk")))
		case res.Latest:
			pointer := b
			pointer.PK = buildPointerPK
			pointerItem, err = putIn(s.layers, pointer, expression.Name("vrsn").Equal(expression.Value(ptr.Version)))
		default:
			pointerItem, err = conditionCheck(s.layers, key(buildPointerPK, buildSK(p.Package)), expression.Name("vrsn").Equal(expression.Value(ptr.Version)))
		}
		if err != nil {
			return BuildRecord{}, err
		}
		put, err := s.newAuditPut(cmd, entity, Applied, "", res)
		if err != nil {
			return BuildRecord{}, err
		}
		err = s.settle(ctx, cmd, []types.TransactWriteItem{row, pointerItem, put}, &res)
		switch {
		case conflictOn(err, 0):
			var replayed BuildRecord
			return replayed, s.recordRejection(ctx, cmd, entity, &Rejection{Reason: messages.ReasonAlreadyRecorded, At: cmd.At}, &replayed)
		case errors.Is(err, errConflict):
			continue
		case err != nil:
			return BuildRecord{}, fmt.Errorf("record %s: %w", entity, err)
		}
		return res, nil
	}
	return BuildRecord{}, fmt.Errorf("record %s: %w", entity, errConflict)
}

// MarkLayerDeleted takes a deprecated version out of service: dplySts
// removed (so it leaves both GSIs), deleted_date set, and
// its TTL brought to now so DynamoDB removes it and the stream deletes the
// Lambda layer version. The latest version is a *Rejection (is_latest).
func (s *Store) MarkLayerDeleted(ctx context.Context, cmd Cmd, p messages.LayerVersionPayload) (LayerVersion, error) {
	now := cmd.At.Unix()
	entity := layerEntity(p.Region, p.Package, p.Version)
	k := key(layerPK(p.Region, p.Package), layerSK(p.Version))
	v, found, err := getItem[LayerVersion](ctx, s.db, s.layers, k)
	if err != nil {
		return LayerVersion{}, fmt.Errorf("delete %s: %w", entity, err)
	}
	reason := ""
	switch {
	case !found:
		reason = messages.ReasonNotFound
	case v.Status == LayerLatest:
		reason = messages.ReasonIsLatest
	case v.Status != LayerDeprecated:
		reason = messages.ReasonWrongState
	}
	if reason != "" {
		var replayed LayerVersion
		return replayed, s.recordRejection(ctx, cmd, entity, &Rejection{Reason: reason, At: cmd.At}, &replayed)
	}
	v.Status, v.DeletedDate, v.TTL = "", now, now
	update, err := updateIn(s.layers, k,
		expression.Remove(expression.Name("dplySts")).
			Set(expression.Name("deleted_date"), expression.Value(now)).
			Set(expression.Name("ttl"), expression.Value(now)),
		expression.Name("dplySts").Equal(expression.Value(LayerDeprecated)))
	if err != nil {
		return LayerVersion{}, err
	}
	put, err := s.newAuditPut(cmd, entity, Applied, "", v)
	if err != nil {
		return LayerVersion{}, err
	}
	if err := s.settle(ctx, cmd, []types.TransactWriteItem{update, put}, &v); err != nil {
		return LayerVersion{}, fmt.Errorf("delete %s: %w", entity, err)
	}
	return v, nil
}

// LayerRemoval is a layer version deleted from Lambda after its item left
// the table.
type LayerRemoval struct {
	messages.LayerRemovedPayload
	DeletedAt int64 `json:"deleted_at"`
}

// LayerVersionDeleted records that a removed layer version is gone from
// Lambda. Callers ask RecordedLayerRemoval first, so a redelivery does not
// call Lambda again.
func (s *Store) LayerVersionDeleted(ctx context.Context, cmd Cmd, p messages.LayerRemovedPayload) (LayerRemoval, error) {
	r := LayerRemoval{LayerRemovedPayload: p, DeletedAt: cmd.At.Unix()}
	_, err := s.record(ctx, cmd, layerEntity(p.Region, p.Package, p.Version), Applied, "", r, &r)
	return r, err
}

// LayerVersionDeleteRefused records that Lambda refused to delete a
// removed layer version, as a rejection whose reason is Lambda's answer,
// and returns it as a *Rejection; the command is not tried again. A
// command that already has an outcome gets that one instead.
func (s *Store) LayerVersionDeleteRefused(ctx context.Context, cmd Cmd, p messages.LayerRemovedPayload, answer string) (LayerRemoval, error) {
	var r LayerRemoval
	err := s.recordRejection(ctx, cmd, layerEntity(p.Region, p.Package, p.Version), &Rejection{Reason: answer, At: cmd.At}, &r)
	return r, err
}

// RecordedLayerRemoval returns the recorded outcome of a layer.removed
// command, if it has one: a deletion, or a refusal as a *Rejection.
func (s *Store) RecordedLayerRemoval(ctx context.Context, cmd Cmd) (LayerRemoval, bool, error) {
	var r LayerRemoval
	done, err := s.recorded(ctx, cmd, &r)
	return r, done, err
}

// LatestLayer is the pointer to a package's latest version in a region.
func (s *Store) LatestLayer(ctx context.Context, region, pkg string) (LayerVersion, bool, error) {
	return getItem[LayerVersion](ctx, s.db, s.layers, key(layerPK(region, pkg), layerPointerSK))
}

// LatestLayers lists a package's latest version in every region, from
// PackageStatusIndex.
func (s *Store) LatestLayers(ctx context.Context, pkg string) ([]LayerVersion, error) {
	kc := expression.Key("pckg").Equal(expression.Value(pkg)).And(expression.Key("dplySts").Equal(expression.Value(LayerLatest)))
	return query[LayerVersion](ctx, s.db, s.layers, "PackageStatusIndex", kc, nil, 0)
}

// RegionLayers lists every deployed (latest or deprecated) version in a
// region, from RegionStatusIndex.
func (s *Store) RegionLayers(ctx context.Context, region string) ([]LayerVersion, error) {
	return query[LayerVersion](ctx, s.db, s.layers, "RegionStatusIndex", expression.Key("rgn").Equal(expression.Value(region)), nil, 0)
}

// LatestBuild is the pointer to a package's latest build.
func (s *Store) LatestBuild(ctx context.Context, pkg string) (Build, bool, error) {
	return getItem[Build](ctx, s.db, s.layers, key(buildPointerPK, buildSK(pkg)))
}

// LatestBuilds lists the latest build of every package: one query.
func (s *Store) LatestBuilds(ctx context.Context) ([]Build, error) {
	return query[Build](ctx, s.db, s.layers, "", expression.Key("pk").Equal(expression.Value(buildPointerPK)), nil, 0)
}
