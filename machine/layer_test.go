package machine_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
)

// layerItem is a version (or pointer) item of version 3 in state, nil for
// Absent; the state attribute is left out for the machine's Unset state.
func layerItem(t *testing.T, m *machine.Machine[machine.LayerInput], state string) machine.Item {
	t.Helper()
	if state == machine.Absent {
		return nil
	}
	fields := map[string]any{"pk": "lyr#eu-west-1.requests", "sk": "lyrVrsn#v3", "rgn": "eu-west-1", "pckg": "requests", "vrsn": 3, "arn": "arn:aws:lambda:eu-west-1:123456789012:layer:requests:3", "published_at": now - 60}
	if state != m.Unset {
		fields[m.State] = state
	}
	item, err := attributevalue.MarshalMap(fields)
	require.NoError(t, err)
	return item
}

func layerInput(t *testing.T, version int) machine.LayerInput {
	t.Helper()
	row, err := attributevalue.MarshalMap(map[string]any{"pk": "lyr#eu-west-1.requests", "sk": "lyrVrsn#v4", "rgn": "eu-west-1", "pckg": "requests", "vrsn": version, "arn": "arn:aws:lambda:eu-west-1:123456789012:layer:requests:4", "published_at": now})
	require.NoError(t, err)
	pointer := map[string]any{}
	require.NoError(t, attributevalue.UnmarshalMap(row, &pointer))
	pointer["sk"] = "lyrVrsn0#"
	ptr, err := attributevalue.MarshalMap(pointer)
	require.NoError(t, err)
	return machine.LayerInput{Now: now, Expires: now + 3600, Row: row, Pointer: ptr, Version: version}
}

// TestLayer_every_state_and_transition: the version, pointer and build
// machines' tables, written out; the pointer's rows are for a row newer
// than the one it holds (4 over 3).
func TestLayer_every_state_and_transition(t *testing.T) {
	nf, ws, dup := messages.ReasonNotFound, messages.ReasonWrongState, messages.ReasonAlreadyRecorded
	machines := []struct {
		m     *machine.Machine[machine.LayerInput]
		table map[string]map[string]cell
	}{
		{machine.Layer, map[string]map[string]cell{
			machine.LayerPublish: {
				machine.Absent: {to: machine.LayerLatest}, machine.LayerLatest: {reason: dup}, machine.LayerDeprecated: {reason: dup}, machine.LayerDeleted: {reason: dup},
			},
			machine.LayerPublishLate: {
				machine.Absent: {to: machine.LayerDeprecated}, machine.LayerLatest: {reason: dup}, machine.LayerDeprecated: {reason: dup}, machine.LayerDeleted: {reason: dup},
			},
			machine.LayerDeprecate: {
				machine.Absent: {reason: nf}, machine.LayerLatest: {to: machine.LayerDeprecated}, machine.LayerDeprecated: {reason: ws}, machine.LayerDeleted: {reason: ws},
			},
			machine.LayerDelete: {
				machine.Absent: {reason: nf}, machine.LayerLatest: {reason: messages.ReasonIsLatest}, machine.LayerDeprecated: {to: machine.LayerDeleted}, machine.LayerDeleted: {reason: ws},
			},
		}},
		{machine.LayerPointer, map[string]map[string]cell{
			machine.PointerPoint:   {machine.Absent: {to: machine.PointerSet}, machine.PointerSet: {reason: ws}},
			machine.PointerAdvance: {machine.Absent: {reason: nf}, machine.PointerSet: {to: machine.PointerSet}},
			machine.PointerHold:    {machine.Absent: {reason: nf}, machine.PointerSet: {reason: machine.ReasonNewer}},
		}},
		{machine.Build, map[string]map[string]cell{
			machine.BuildRecord: {machine.Absent: {to: machine.BuildRecorded}, machine.BuildRecorded: {reason: dup}},
		}},
	}
	for _, mt := range machines {
		checkTable(t, mt.m, mt.table, func(t *testing.T, state string) machine.Item { return layerItem(t, mt.m, state) }, layerInput(t, 4))
	}
}

// TestLayerPointer_moves_only_forward: from a pointer at version 3, a row
// of 4 advances it, a row of 3 or 2 holds it.
func TestLayerPointer_moves_only_forward(t *testing.T) {
	held := layerItem(t, machine.LayerPointer, machine.PointerSet)
	advance := machine.LayerPointer.Transition(machine.PointerAdvance)
	hold := machine.LayerPointer.Transition(machine.PointerHold)
	for version, wantAdvance := range map[int]bool{2: false, 3: false, 4: true} {
		in := layerInput(t, version)
		assert.Equal(t, wantAdvance, machine.LayerPointer.Decide(advance, held, held, in).Applies(), "advance to %d", version)
		assert.Equal(t, !wantAdvance, machine.LayerPointer.Decide(hold, held, held, in).Applies(), "hold for %d", version)
	}
	next := machine.LayerPointer.Decide(advance, held, held, layerInput(t, 4)).Next
	assert.Equal(t, int64(4), integer(t, next, "vrsn"))
	assert.Equal(t, "lyrVrsn#v3", str(t, next, "sk"), "an advance updates the pointer; its keys stay")
}

// TestLayer_transitions_set_what_they_declare: a publication copies the
// row, a late one and a deprecation add the TTL, a deletion ends it now.
func TestLayer_transitions_set_what_they_declare(t *testing.T) {
	in := layerInput(t, 4)
	published := machine.Layer.Decide(machine.Layer.Transition(machine.LayerPublish), nil, nil, in).Next
	assert.Equal(t, "arn:aws:lambda:eu-west-1:123456789012:layer:requests:4", str(t, published, "arn"))
	assert.NotContains(t, published, "requirementsHsh", "an optional field left out stays out")
	assert.NotContains(t, published, "ttl")

	late := machine.Layer.Decide(machine.Layer.Transition(machine.LayerPublishLate), nil, nil, in).Next
	assert.Equal(t, now+3600, integer(t, late, "ttl"))
	assert.Equal(t, now, integer(t, late, "deprecated_at"))

	latest := layerItem(t, machine.Layer, machine.LayerLatest)
	deprecated := machine.Layer.Decide(machine.Layer.Transition(machine.LayerDeprecate), latest, latest, in).Next
	assert.Equal(t, now+3600, integer(t, deprecated, "ttl"))

	deleted := machine.Layer.Decide(machine.Layer.Transition(machine.LayerDelete), deprecated, deprecated, in).Next
	assert.Equal(t, now, integer(t, deleted, "ttl"))
	assert.Equal(t, now, integer(t, deleted, "deleted_date"))
	assert.NotContains(t, deleted, "dplySts", "a deleted version leaves the status indexes")
}
