package messages

import (
	"regexp"
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

var (
	regionPattern  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	packagePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	layerARN       = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$`)
	hashPattern    = regexp.MustCompile(`^[A-Za-z0-9:+/=_-]{1,128}$`)
)

// LayerVersionPayload names one version of a package's layer in a region.
type LayerVersionPayload struct {
	Region  string `json:"region"`
	Package string `json:"package"`
	Version int    `json:"version"`
}

func (p *LayerVersionPayload) Validate() error {
	switch {
	case !regionPattern.MatchString(p.Region):
		return invalid("region", "%q is not an AWS region name", p.Region)
	case !packagePattern.MatchString(p.Package):
		return invalid("package", "%q is not a package name (letters, digits, . _ -)", p.Package)
	case p.Version < 1:
		return invalid("version", "%d, want 1 or more", p.Version)
	}
	return nil
}

// LayerPublishedPayload reports a layer version published to Lambda.
type LayerPublishedPayload struct {
	LayerVersionPayload
	ARN              string `json:"arn"`
	RequirementsHash string `json:"requirements_hash,omitempty"`
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
	Package          string `json:"package"`
	Version          int    `json:"version"`
	Requirements     string `json:"requirements"`
	RequirementsHash string `json:"requirements_hash"`
}

const maxRequirements = 64 * 1024

func (p *BuildRecordedPayload) Validate() error {
	switch {
	case !packagePattern.MatchString(p.Package):
		return invalid("package", "%q is not a package name (letters, digits, . _ -)", p.Package)
	case p.Version < 1:
		return invalid("version", "%d, want 1 or more", p.Version)
	case len(p.Requirements) > maxRequirements:
		return invalid("requirements", "%d bytes, at most %d", len(p.Requirements), maxRequirements)
	case !hashPattern.MatchString(p.RequirementsHash):
		return invalid("requirements_hash", "%q is not a hash", p.RequirementsHash)
	}
	return nil
}

// LayerRemovedPayload is a layer version whose item left the table.
type LayerRemovedPayload struct {
	LayerVersionPayload
	ARN string `json:"arn"`
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

// LayerRejectedPayload is a refused layer or build command.
type LayerRejectedPayload struct {
	Region  string `json:"region,omitempty"`
	Package string `json:"package"`
	Version int    `json:"version"`
	Reason  string `json:"reason"`
}
