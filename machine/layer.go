package machine

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"transit/messages"
)

// Layer version states: the values of a layer version item's dplySts. A
// version whose deletion was requested has none (it leaves both status
// indexes) until its TTL removes it.
const (
	LayerLatest     = "latest"
	LayerDeprecated = "deprecated"
	LayerDeleted    = "deleted"
)

// Pointer and build states. Neither item has a state attribute: an item
// that exists is in the one state.
const (
	PointerSet    = "set"
	BuildRecorded = "recorded"
)

// Reasons a pointer transition is not taken; they choose between the
// pointer's transitions and never reach a producer.
const (
	ReasonNotNewer = "not_newer"
	ReasonNewer    = "newer"
)

// LayerInput is what a layer or build transition decides on besides the
// item.
type LayerInput struct {
	// Now is the command's decision time, Unix seconds; Expires the TTL
	// of a version deprecated now.
	Now, Expires int64
	// Row is the version or build item a command writes, and Pointer the
	// copy of it its pointer holds, both as DynamoDB stores them.
	Row, Pointer Item
	// Version is the row's version number.
	Version int
}

// Names of the layer and build transitions.
const (
	LayerPublish     = "publish"
	LayerPublishLate = "publish-late"
	LayerDeprecate   = "deprecate"
	LayerDelete      = "delete"
	PointerPoint     = "point"
	PointerAdvance   = "advance"
	PointerHold      = "hold"
	BuildRecord      = "record"
)

var (
	layerAttrs = []string{"pk", "sk", "rgn", "pckg", "vrsn", "arn", "requirementsHsh", "published_at", "created_by"}
	buildAttrs = []string{"pk", "sk", "pckg", "vrsn", "requirements", "requirementsHsh", "recorded_at", "created_by"}
)

// Layer is the state machine of a layer version item. A version is
// published as the latest, or straight away deprecated when a newer one
// already is (the pointer only moves forward); publishing a newer version
// deprecates it, and a deprecated version's deletion request takes it out
// of service until its TTL removes it.
var Layer = &Machine[LayerInput]{
	Name:   "layer",
	State:  "dplySts",
	Key:    "pk",
	Unset:  LayerDeleted,
	States: []string{LayerLatest, LayerDeprecated, LayerDeleted},
	Transitions: []Transition[LayerInput]{
		{
			Name: LayerPublish, Command: messages.LayerPublished, Doc: "newer than the latest",
			From: []string{Absent}, To: LayerLatest, Set: copyRow(layerAttrs),
			Event: messages.LayerPublishedEvent, Rejected: messages.LayerPublishRejected, Refuse: alreadyRecorded(LayerLatest, LayerDeprecated, LayerDeleted),
		},
		{
			Name: LayerPublishLate, Command: messages.LayerPublished, Doc: "older than the latest",
			From: []string{Absent}, To: LayerDeprecated,
			Set:   append(copyRow(layerAttrs), Assign[LayerInput]{"deprecated_at", layerNow}, Assign[LayerInput]{"ttl", expires}),
			Event: messages.LayerPublishedEvent, Rejected: messages.LayerPublishRejected, Refuse: alreadyRecorded(LayerLatest, LayerDeprecated, LayerDeleted),
		},
		{
			Name: LayerDeprecate, Command: messages.LayerPublished, Doc: "a newer version is published",
			From: []string{LayerLatest}, To: LayerDeprecated,
			Set: []Assign[LayerInput]{{"deprecated_at", layerNow}, {"ttl", expires}},
		},
		{
			Name: LayerDelete, Command: messages.LayerDeleteRequested, Doc: "TTL brought to now",
			From: []string{LayerDeprecated}, To: LayerDeleted,
			Set:   []Assign[LayerInput]{{"deleted_date", layerNow}, {"ttl", layerNow}},
			Event: messages.LayerDeletionMarked, Rejected: messages.LayerDeleteRejected,
			Refuse: map[string]string{LayerLatest: messages.ReasonIsLatest},
		},
	},
}

// LayerPointer is the lyrVrsn0# item of a region and package: a copy of
// its latest version.
var LayerPointer = pointer("layer-pointer", messages.LayerPublished, layerAttrs)

// Build is the state machine of a build item: recorded once.
var Build = &Machine[LayerInput]{
	Name:   "build",
	State:  "status",
	Key:    "pk",
	Unset:  BuildRecorded,
	States: []string{BuildRecorded},
	Transitions: []Transition[LayerInput]{{
		Name: BuildRecord, Command: messages.BuildRecorded, From: []string{Absent}, To: BuildRecorded, Set: copyRow(buildAttrs),
		Event: messages.BuildRecordedEvent, Rejected: messages.BuildRecordRejected, Refuse: alreadyRecorded(BuildRecorded),
	}},
}

// BuildPointer is the bldVrsn0# item of a package: a copy of its latest
// build.
var BuildPointer = pointer("build-pointer", messages.BuildRecorded, buildAttrs)

// pointer is the machine of an item that copies the newest row it was
// given and only ever moves forward: a row older than the one it holds
// leaves it as it is (hold, which writes nothing).
func pointer(name string, command messages.Type, attrs []string) *Machine[LayerInput] {
	unchanged := Guard[LayerInput]{Name: "unchanged", Attr: "vrsn", Op: Eq, Value: func(_ LayerInput, read Item) any {
		return readNumber(read, "vrsn")
	}}
	return &Machine[LayerInput]{
		Name:   name,
		State:  "status",
		Key:    "pk",
		Unset:  PointerSet,
		States: []string{PointerSet},
		Transitions: []Transition[LayerInput]{
			{Name: PointerPoint, Command: command, Doc: "the first row", From: []string{Absent}, To: PointerSet, Set: copyPointer(attrs)},
			{
				// An update: the keys (the first two attributes) stay.
				Name: PointerAdvance, Command: command, Doc: "a newer row", From: []string{PointerSet}, To: PointerSet, Set: copyPointer(attrs[2:]),
				Guards: []Guard[LayerInput]{
					{Name: "newer", Reason: ReasonNotNewer, Attr: "vrsn", Op: Lt, Value: version},
					unchanged,
				},
			},
			{
				Name: PointerHold, Command: command, Doc: "an older row", From: []string{PointerSet}, To: PointerSet,
				Guards: []Guard[LayerInput]{
					{Name: "older", Reason: ReasonNewer, Attr: "vrsn", Op: Ge, Value: version},
					unchanged,
				},
			},
		},
	}
}

func alreadyRecorded(states ...string) map[string]string {
	refuse := map[string]string{}
	for _, s := range states {
		refuse[s] = messages.ReasonAlreadyRecorded
	}
	return refuse
}

func copyRow(attrs []string) []Assign[LayerInput] {
	return copyFrom(attrs, func(in LayerInput) Item { return in.Row })
}

func copyPointer(attrs []string) []Assign[LayerInput] {
	return copyFrom(attrs, func(in LayerInput) Item { return in.Pointer })
}

// copyFrom assigns each attribute its value in the item from; one the
// item lacks (an optional field) is left out.
func copyFrom[In any](attrs []string, from func(In) Item) []Assign[In] {
	assigns := make([]Assign[In], len(attrs))
	for i, attr := range attrs {
		assigns[i] = Assign[In]{attr, func(in In, _ Item) any {
			av, ok := from(in)[attr]
			if !ok {
				return nil
			}
			var v any
			if err := attributevalue.Unmarshal(av, &v); err != nil {
				return nil
			}
			return v
		}}
	}
	return assigns
}

func layerNow(in LayerInput, _ Item) any { return in.Now }
func expires(in LayerInput, _ Item) any  { return in.Expires }
func version(in LayerInput, _ Item) any  { return in.Version }
