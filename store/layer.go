package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
	"transit/messages"
)

// Layer deployment statuses (dplySts), the states of machine.Layer; a
// deleted version has none.
const (
	LayerLatest     = machine.LayerLatest
	LayerDeprecated = machine.LayerDeprecated
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
	// CreatedBy is the command that published the version: a redelivery
	// of it finds its own row and finishes the publication (writeRow).
	CreatedBy string `dynamodbav:"created_by,omitempty" json:"-"`
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
	// CreatedBy is the command that recorded the build: a redelivery of
	// it finds its own row and finishes the record (writeRow).
	CreatedBy string `dynamodbav:"created_by,omitempty" json:"-"`
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
	// LayerPointerSK is the sort key of a package's pointer to its latest
	// version in a region.
	LayerPointerSK = "lyrVrsn0#"
	buildPointerPK = "bldVrsn0#"
)

// LayerPK is the partition of a package's versions in a region.
func LayerPK(region, pkg string) string { return "lyr#" + region + "." + pkg }

// layerSKPrefix starts every layer version's sort key.
const layerSKPrefix = "lyrVrsn#v"

// LayerSK is a layer version's sort key.
func LayerSK(version int) string { return layerSKPrefix + strconv.Itoa(version) }

func buildPK(version int) string { return "bld#v" + strconv.Itoa(version) }
func buildSK(pkg string) string  { return "pckg#" + pkg }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func layerEntity(region, pkg string, version int) string {
	return fmt.Sprintf("LAYER#%s.%s#%d", region, pkg, version)
}

// PublishLayer records a published layer version: the version's item as
// latest, the lyrVrsn0# pointer moved to it, and the previous latest
// deprecated with a TTL (writeRow). The pointer only moves forward: a
// version older than the latest is recorded as deprecated straight away.
// A version already recorded is a *Rejection (already_recorded).
func (s *Store) PublishLayer(ctx context.Context, cmd Cmd, p messages.LayerPublishedPayload) (LayerPublication, error) {
	now := cmd.At.Unix()
	pk := LayerPK(p.Region, p.Package)
	v := LayerVersion{PK: pk, SK: LayerSK(p.Version), Region: p.Region, Package: p.Package, Version: p.Version,
		ARN: p.ARN, RequirementsHash: p.RequirementsHash, PublishedAt: now, CreatedBy: cmd.ID}
	pointer := v
	pointer.SK, pointer.CreatedBy = LayerPointerSK, ""
	in, err := layerInput(cmd, s.layerRetention, v, pointer, p.Version)
	if err != nil {
		return LayerPublication{}, err
	}
	deprecate := func(version int) step[machine.LayerInput] {
		return step[machine.LayerInput]{m: machine.Layer, t: machine.Layer.Transition(machine.LayerDeprecate), table: s.layers, key: key(pk, LayerSK(version)), in: in}
	}
	rows := rowSteps{
		row:     step[machine.LayerInput]{m: machine.Layer, table: s.layers, key: key(pk, v.SK), in: in, entity: layerEntity(p.Region, p.Package, p.Version)},
		pointer: step[machine.LayerInput]{m: machine.LayerPointer, table: s.layers, key: key(pk, LayerPointerSK), in: in},
		latest:  machine.LayerPublish, late: machine.LayerPublishLate,
		deprecate: deprecate,
		stale: func(ctx context.Context) ([]int, error) {
			// The table, strongly consistent: an index could miss a
			// version made latest a moment ago.
			kc := expression.Key("pk").Equal(expression.Value(pk)).And(expression.Key("sk").BeginsWith(layerSKPrefix))
			filter := expression.Name("dplySts").Equal(expression.Value(LayerLatest)).And(expression.Name("vrsn").LessThan(expression.Value(p.Version)))
			found, err := query[LayerVersion](ctx, s.db, s.layers, "", kc, &filter, 0)
			versions := make([]int, len(found))
			for i, f := range found {
				versions[i] = f.Version
			}
			return versions, err
		},
	}
	var res LayerPublication
	err = s.writeRow(ctx, cmd, rows, func(latest bool, replaced int) {
		res = LayerPublication{Latest: latest, Deprecated: replaced}
	}, &res.Version, &res)
	return res, err
}

// RecordBuild records a build and moves the bldVrsn0# pointer to it, only
// forward (writeRow). A build already recorded is a *Rejection.
func (s *Store) RecordBuild(ctx context.Context, cmd Cmd, p messages.BuildRecordedPayload) (BuildRecord, error) {
	b := Build{PK: buildPK(p.Version), SK: buildSK(p.Package), Package: p.Package, Version: p.Version,
		Requirements: p.Requirements, RequirementsHash: p.RequirementsHash, RecordedAt: cmd.At.Unix(), CreatedBy: cmd.ID}
	pointer := b
	pointer.PK, pointer.CreatedBy = buildPointerPK, ""
	in, err := layerInput(cmd, s.layerRetention, b, pointer, p.Version)
	if err != nil {
		return BuildRecord{}, err
	}
	rows := rowSteps{
		row:     step[machine.LayerInput]{m: machine.Build, table: s.layers, key: key(b.PK, b.SK), in: in, entity: fmt.Sprintf("BUILD#%s#%d", p.Package, p.Version)},
		pointer: step[machine.LayerInput]{m: machine.BuildPointer, table: s.layers, key: key(buildPointerPK, b.SK), in: in},
		latest:  machine.BuildRecord, late: machine.BuildRecord,
	}
	var res BuildRecord
	err = s.writeRow(ctx, cmd, rows, func(latest bool, _ int) {
		res = BuildRecord{Latest: latest}
	}, &res.Build, &res)
	return res, err
}

func layerInput(cmd Cmd, retention time.Duration, row, pointer any, version int) (machine.LayerInput, error) {
	r, err := rawItem(row)
	if err != nil {
		return machine.LayerInput{}, err
	}
	p, err := rawItem(pointer)
	if err != nil {
		return machine.LayerInput{}, err
	}
	return machine.LayerInput{Now: cmd.At.Unix(), Expires: cmd.At.Add(retention).Unix(), Row: r, Pointer: p, Version: version}, nil
}

// rowSteps are a versioned row and the pointer to its package's latest
// version: the row takes latest when the pointer advances to it, late
// when the pointer holds a newer one. For a layer version, deprecate is
// the transition of an older version replaced (the one the pointer held,
// or the row itself, overtaken), and stale lists the versions older than
// the row still latest in its region.
type rowSteps struct {
	row, pointer step[machine.LayerInput]
	latest, late string
	deprecate    func(version int) step[machine.LayerInput]
	stale        func(context.Context) ([]int, error)
}

// createdByAttr names the command that created a versioned row.
const createdByAttr = "created_by"

// writeRow creates a versioned row and moves its pointer only forward,
// without a transaction, which would bill every write and index entry
// twice (DECISIONS.md, "Layer publications without a transaction"):
//
//  1. the row is put, under attribute_not_exists, naming the command
//     (created_by): the proof the command took effect;
//  2. the pointer advances to it, on condition that it is still as read;
//     a pointer that holds a newer row leaves this one late (a row put
//     as latest and overtaken meanwhile is deprecated again);
//  3. the row the pointer held before is deprecated;
//  4. the outcome is recorded, last.
//
// A delivery that finds the row its command created finishes the steps
// after it: each is conditional and moves only forward, so one repeated
// changes nothing. fill is told whether the row is the latest and the
// version it replaced (0 for none) and fills result; snapshot, part of
// it, then receives the row. A row another command created is a
// *Rejection, its reason decided on the row.
func (s *Store) writeRow(ctx context.Context, cmd Cmd, rows rowSteps, fill func(latest bool, replaced int), snapshot, result any) error {
	// Answered already: replayed, without writing again (its row may be
	// gone since, deleted on request).
	if done, err := s.recorded(ctx, cmd, result); done || err != nil {
		return err
	}
	var row machine.Item // the row as this command created it
	var latest bool
	var replaced int
	// resumed is set when the row was there already, this command's, or
	// a pointer write was refused: an earlier attempt may have moved the
	// pointer, and stopped before deprecating the version it replaced.
	resumed := false
	err := retry(ctx, rows.row.entity, allocateRounds, func() error {
		ptr, err := getRaw(ctx, s.db, rows.pointer.table, rows.pointer.key)
		if err != nil {
			return fmt.Errorf("%s: %w", rows.row.entity, err)
		}
		pointer := rows.pointer
		pointer.t = pointerTransition(ptr, pointer)
		if row == nil {
			create := rows.row
			create.t = create.m.Transition(rows.latest)
			if pointer.t.Name == machine.PointerHold {
				create.t = create.m.Transition(rows.late)
			}
			var ours bool
			if row, ours, resumed, err = s.createRow(ctx, cmd, create); err != nil || !ours {
				if err == nil {
					refused := create.m.Decide(create.t, row, nil, create.in)
					err = s.recordRejection(ctx, cmd, create.entity, &Rejection{Reason: refused.Reason, At: cmd.At}, result)
				}
				row = nil
				return err
			}
		}
		var held int
		if ptr != nil {
			if err := attributevalue.Unmarshal(ptr["vrsn"], &held); err != nil {
				return fmt.Errorf("decode pointer of %s: %w", rows.row.entity, err)
			}
		}
		v := rows.row.in.Version
		switch {
		case ptr != nil && held == v:
			// Moved by an earlier attempt of this command whose answer
			// was lost: the version it replaced is not known, but every
			// older one still latest is.
			latest, replaced = true, 0
			return s.deprecateStale(ctx, rows, &replaced)
		case ptr != nil && held > v:
			latest, replaced = false, 0
			if rows.deprecate == nil {
				return nil
			}
			if state, _ := row[rows.row.m.State].(*types.AttributeValueMemberS); state != nil && state.Value == machine.LayerLatest {
				// Put as latest, overtaken before the pointer moved.
				if err := s.deprecateRow(ctx, rows.deprecate(v)); err != nil {
					return err
				}
				now, err := getRaw(ctx, s.db, rows.row.table, rows.row.key)
				if err != nil {
					return err
				}
				if now != nil {
					row = now
				}
			}
			if resumed {
				// An earlier attempt may have moved the pointer to this
				// row and stopped before deprecating the one before.
				return s.deprecateStale(ctx, rows, new(int))
			}
			return nil
		}
		if _, out, err := writeAlone(ctx, s.db, pointer, ptr); err != nil || !out.Applies() {
			if err == nil {
				// Moved since it was read, perhaps by this very write (the
				// SDK's retry of one that landed is refused): read it again
				// as an earlier attempt would.
				resumed, err = true, errStale
			}
			return err
		}
		latest, replaced = true, held
		if rows.deprecate != nil && held > 0 {
			return s.deprecateRow(ctx, rows.deprecate(held))
		}
		return nil
	})
	if err != nil || row == nil {
		return err // a rejection, recorded or replayed
	}
	fill(latest, replaced)
	if err := attributevalue.UnmarshalMap(row, snapshot); err != nil {
		return fmt.Errorf("decode %s: %w", rows.row.entity, err)
	}
	_, err = s.record(ctx, cmd, rows.row.entity, Applied, "", result, result)
	return err
}

// createRow puts the row st creates (naming cmd, created_by). ours is
// false when a row was there already that another command created; row
// is then that one. A row cmd created before is returned as it is, for
// this delivery to finish (resumed).
func (s *Store) createRow(ctx context.Context, cmd Cmd, st step[machine.LayerInput]) (row machine.Item, ours, resumed bool, err error) {
	written, out, err := writeAlone(ctx, s.db, st, nil)
	if err != nil || out.Applies() {
		return written, err == nil, false, err
	}
	if row, err = getRaw(ctx, s.db, st.table, st.key); err != nil || row == nil {
		if err == nil {
			err = errStale // gone meanwhile: put it again
		}
		return nil, false, false, err
	}
	by, _ := row[createdByAttr].(*types.AttributeValueMemberS)
	ours = by != nil && by.Value == cmd.ID
	return row, ours, ours, nil
}

// deprecateRow deprecates the version st names if it is still latest;
// one already deprecated, deleted or gone is left.
func (s *Store) deprecateRow(ctx context.Context, st step[machine.LayerInput]) error {
	if _, _, err := writeAlone(ctx, s.db, st, nil); err != nil && !errors.Is(err, errStale) {
		return err
	}
	return nil
}

// deprecateStale deprecates every version older than the row still
// latest in its region, and sets replaced to the newest of them.
func (s *Store) deprecateStale(ctx context.Context, rows rowSteps, replaced *int) error {
	if rows.stale == nil {
		return nil
	}
	versions, err := rows.stale(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", rows.row.entity, err)
	}
	for _, v := range versions {
		if err := s.deprecateRow(ctx, rows.deprecate(v)); err != nil {
			return err
		}
		*replaced = max(*replaced, v)
	}
	return nil
}

// pointerTransition is the pointer's transition for the row: point when
// there is none, advance to a newer row, hold for an older one.
func pointerTransition(ptr machine.Item, st step[machine.LayerInput]) *machine.Transition[machine.LayerInput] {
	if ptr == nil {
		return st.m.Transition(machine.PointerPoint)
	}
	advance := st.m.Transition(machine.PointerAdvance)
	if st.m.Decide(advance, ptr, ptr, st.in).Applies() {
		return advance
	}
	return st.m.Transition(machine.PointerHold)
}

// MarkLayerDeleted takes a deprecated version out of service: dplySts
// removed (so it leaves both GSIs), deleted_date set, and its TTL brought
// to now so DynamoDB removes it and the stream deletes the Lambda layer
// version. A refusal is a *Rejection: not_found, is_latest, wrong_state
// (already deleted).
func (s *Store) MarkLayerDeleted(ctx context.Context, cmd Cmd, p messages.LayerVersionPayload) (LayerVersion, error) {
	var v LayerVersion
	st := step[machine.LayerInput]{
		m: machine.Layer, t: machine.Layer.Transition(machine.LayerDelete), table: s.layers,
		key: key(LayerPK(p.Region, p.Package), LayerSK(p.Version)), in: machine.LayerInput{Now: cmd.At.Unix()},
		entity: layerEntity(p.Region, p.Package, p.Version),
	}
	if err := apply(ctx, s, cmd, st, &v); err != nil {
		return v, fmt.Errorf("delete %s: %w", st.entity, err)
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
	return getItem[LayerVersion](ctx, s.db, s.layers, key(LayerPK(region, pkg), LayerPointerSK))
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
