package messages

import (
	"regexp"
	"unicode/utf8"

	"github.com/invopop/jsonschema"
)

// Layer is the layers-and-builds domain (docs/layers.md).
const Layer Domain = "layer"

// Layer commands.
var (
	LayerPublished       = command[LayerPublishedPayload](Layer, "layer.published")
	BuildRecorded        = command[BuildRecordedPayload](Layer, "build.recorded")
	LayerDeleteRequested = command[LayerVersionPayload](Layer, "layer.delete-requested")
	// LayerRemoved comes from the stream fan-in: a layer version item left
	// the table (its TTL expired).
	LayerRemoved = command[LayerRemovedPayload](Layer, "layer.removed")
)

// Layer events.
var (
	LayerPublishedEvent    = event[LayerPublishedEventPayload](Layer, "layer.published")
	LayerPublishRejected   = event[LayerRejectedPayload](Layer, "layer.publish-rejected")
	BuildRecordedEvent     = event[BuildRecordedEventPayload](Layer, "build.recorded")
	BuildRecordRejected    = event[LayerRejectedPayload](Layer, "build.record-rejected")
	LayerDeletionMarked    = event[LayerVersionPayload](Layer, "layer.deletion-marked")
	LayerDeleteRejected    = event[LayerRejectedPayload](Layer, "layer.delete-rejected")
	LayerVersionDeleted    = event[LayerRemovedPayload](Layer, "layer.version-deleted")
	LayerVersionDeleteFail = event[LayerRejectedPayload](Layer, "layer.version-delete-failed")
)

// Layer rejection reasons.
const (
	ReasonAlreadyRecorded = "already_recorded"
	ReasonIsLatest        = "is_latest"
)

// maxSafeInteger bounds integer fields: the largest integer every JSON
// reader holds exactly (a float64 mantissa), so producers in any language
// and the schema's maximum mean the same number.
const maxSafeInteger = 1<<53 - 1

var (
	regionPattern  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	packagePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	layerARN       = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$`)
	hashPattern    = regexp.MustCompile(`^[A-Za-z0-9:+/=_-]{1,128}$`)
)

// LayerVersionPayload names one version of a package's layer in a region.
type LayerVersionPayload struct {
	// Region is an AWS region name, e.g. eu-west-1.
	Region  string `json:"region"`
	Package string `json:"package"`
	// Version is the Lambda layer version number.
	Version int `json:"version"`
}

func (p *LayerVersionPayload) Validate() error {
	switch {
	case !regionPattern.MatchString(p.Region):
		return invalid("region", "%q is not an AWS region name", p.Region)
	case !packagePattern.MatchString(p.Package):
		return invalid("package", "%q is not a package name (letters, digits, . _ -)", p.Package)
	}
	return checkVersion(p.Version)
}

func checkVersion(v int) error {
	if v < 1 || int64(v) > maxSafeInteger {
		return invalid("version", "%d, want 1 to %d", v, int64(maxSafeInteger))
	}
	return nil
}

func (LayerVersionPayload) JSONSchemaExtend(s *jsonschema.Schema) { layerVersionSchema(s) }

// layerVersionSchema describes the fields of an embedded
// LayerVersionPayload: the generator flattens them into the outer type
// without calling the embedded type's JSONSchemaExtend.
func layerVersionSchema(s *jsonschema.Schema) {
	property(s, "region").Pattern = regionPattern.String()
	property(s, "package").Pattern = packagePattern.String()
	integerRange(property(s, "version"), 1, maxSafeInteger)
}

// LayerPublishedPayload reports a layer version published to Lambda.
type LayerPublishedPayload struct {
	LayerVersionPayload
	// ARN is the layer version's ARN, ending in its version number.
	ARN              string `json:"arn"`
	RequirementsHash string `json:"requirements_hash,omitempty"`
}

func (LayerPublishedPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	layerVersionSchema(s)
	property(s, "arn").Pattern = layerARN.String()
	hash := property(s, "requirements_hash")
	hash.Pattern = optionalPattern(hashPattern)
	nullable(hash)
}

func (p *LayerPublishedPayload) Validate() error {
	if err := p.LayerVersionPayload.Validate(); err != nil {
		return err
	}
	if err := checkLayerARN(p.ARN); err != nil {
		return err
	}
	if p.RequirementsHash != "" && !hashPattern.MatchString(p.RequirementsHash) {
		return invalid("requirements_hash", "%q is not a hash", p.RequirementsHash)
	}
	return nil
}

// BuildRecordedPayload records a package build and its requirements.
type BuildRecordedPayload struct {
	Package string `json:"package"`
	Version int    `json:"version"`
	// Requirements is the build's requirements file as text; empty for
	// a package without any.
	Requirements     string `json:"requirements"`
	RequirementsHash string `json:"requirements_hash"`
}

const maxRequirements = 64 * 1024

func (BuildRecordedPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	property(s, "package").Pattern = packagePattern.String()
	integerRange(property(s, "version"), 1, maxSafeInteger)
	// Empty requirements (a package with none) are valid, and encoding/json
	// reads a missing member as empty.
	optional(s, "requirements", "")
	req := property(s, "requirements")
	req.MaxLength = count(maxRequirements)
	nullable(req)
	property(s, "requirements_hash").Pattern = hashPattern.String()
}

func (p *BuildRecordedPayload) Validate() error {
	if !packagePattern.MatchString(p.Package) {
		return invalid("package", "%q is not a package name (letters, digits, . _ -)", p.Package)
	}
	if err := checkVersion(p.Version); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(p.Requirements); n > maxRequirements {
		return invalid("requirements", "%d characters, at most %d", n, maxRequirements)
	}
	if !hashPattern.MatchString(p.RequirementsHash) {
		return invalid("requirements_hash", "%q is not a hash", p.RequirementsHash)
	}
	return nil
}

// LayerRemovedPayload is a layer version whose item left the table.
type LayerRemovedPayload struct {
	LayerVersionPayload
	ARN string `json:"arn"`
}

func (LayerRemovedPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	layerVersionSchema(s)
	property(s, "arn").Pattern = layerARN.String()
}

func (p *LayerRemovedPayload) Validate() error {
	if err := p.LayerVersionPayload.Validate(); err != nil {
		return err
	}
	return checkLayerARN(p.ARN)
}

func checkLayerARN(arn string) error {
	if !layerARN.MatchString(arn) {
		return invalid("arn", "%q is not a Lambda layer version ARN", arn)
	}
	return nil
}

// LayerPublishedEventPayload is the recorded publication: Latest is false
// when a newer version was already recorded (the pointer only moves
// forward), and Deprecated names the version it replaced, if any.
type LayerPublishedEventPayload struct {
	LayerVersionPayload
	ARN        string `json:"arn"`
	Latest     bool   `json:"latest"`
	Deprecated int    `json:"deprecated,omitempty"`
}

// BuildRecordedEventPayload is the recorded build; Latest is false when a
// newer build of the package was already recorded.
type BuildRecordedEventPayload struct {
	Package          string `json:"package"`
	Version          int    `json:"version"`
	RequirementsHash string `json:"requirements_hash"`
	Latest           bool   `json:"latest"`
}

// LayerRejectedPayload is a refused layer or build command, or a layer
// version Lambda refused to delete.
type LayerRejectedPayload struct {
	Region  string `json:"region,omitempty"`
	Package string `json:"package"`
	Version int    `json:"version"`
	Reason  string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p LayerRejectedPayload) RejectionReason() string { return p.Reason }
