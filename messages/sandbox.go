package messages

import (
	"fmt"
	"regexp"

	"github.com/invopop/jsonschema"
)

// Sandbox is the sandbox broker's domain (docs/sandbox.md).
const Sandbox Domain = "sandbox"

// Sandbox commands.
var (
	SandboxAllocate     = command[SandboxAllocatePayload](Sandbox, "sandbox.allocate")
	SandboxMarkDeletion = command[SandboxMarkDeletionPayload](Sandbox, "sandbox.mark-deletion")
	SandboxExpire       = command[SandboxExpirePayload](Sandbox, "sandbox.expire")
	SandboxCleanup      = command[SandboxCleanupPayload](Sandbox, "sandbox.cleanup")
	SandboxSync         = command[SandboxSyncPayload](Sandbox, "sandbox.sync")
	SandboxReinstate    = command[SandboxReinstatePayload](Sandbox, "sandbox.reinstate")
	SandboxRetire       = command[SandboxRetirePayload](Sandbox, "sandbox.retire")
)

// Sandbox events.
var (
	SandboxAllocated          = event[SandboxAllocatedPayload](Sandbox, "sandbox.allocated")
	SandboxAllocationRejected = event[SandboxAllocationRejectedPayload](Sandbox, "sandbox.allocation-rejected")
	SandboxDeletionMarked     = event[SandboxDeletionMarkedPayload](Sandbox, "sandbox.deletion-marked")
	SandboxDeletionRejected   = event[SandboxDeletionRejectedPayload](Sandbox, "sandbox.deletion-rejected")
	SandboxExpired            = event[SandboxExpiredPayload](Sandbox, "sandbox.expired")
	SandboxDeleted            = event[SandboxDeletedPayload](Sandbox, "sandbox.deleted")
	SandboxDeletionFailed     = event[SandboxDeletionFailedPayload](Sandbox, "sandbox.deletion-failed")
	SandboxSynced             = event[SandboxSyncedPayload](Sandbox, "sandbox.synced")
	SandboxCleanupStuck       = event[SandboxCleanupStuckPayload](Sandbox, "sandbox.cleanup-stuck")
	SandboxReinstated         = event[SandboxReinstatedPayload](Sandbox, "sandbox.reinstated")
	SandboxReinstateRejected  = event[SandboxRejectedPayload](Sandbox, "sandbox.reinstate-rejected")
	SandboxRetired            = event[SandboxRetiredPayload](Sandbox, "sandbox.retired")
	SandboxRetireRejected     = event[SandboxRejectedPayload](Sandbox, "sandbox.retire-rejected")
)

// Rejection reasons carried by sandbox.*-rejected events.
const (
	ReasonPoolExhausted = "pool_exhausted"
	ReasonNotFound      = "not_found"
	ReasonNotOwner      = "not_owner"
	ReasonExpired       = "expired"
	ReasonWrongState    = "wrong_state"
	// ReasonProviderNotConfigured answers a cleanup when transit runs
	// without a sandbox provider.
	ReasonProviderNotConfigured = "provider_not_configured"
	// ReasonListed refuses to retire a stale sandbox that a sync has
	// listed again since it was staled.
	ReasonListed = "listed"
)

// Field limits. They keep every item far below DynamoDB's 400 KB and every
// message below SQS's 256 KiB.
const (
	maxKeyField = 256
	maxLabHours = 24 * 30
	// minLabHours is one second. It is compared as it is written in the
	// schema (the same float64), so the two agree at the bound.
	minLabHours = 1.0 / 3600
)

// trackIDPattern is what a track ID may look like: an identifier, never
// anything an expression could mistake for syntax.
var trackIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]*$`)

func checkTrackID(v string) error {
	if err := required("track_id", v, maxKeyField); err != nil {
		return err
	}
	if !trackIDPattern.MatchString(v) {
		return invalid("track_id", "%q is not an identifier (letters, digits and . _ : @ / -)", v)
	}
	return nil
}

// sandboxIDPattern is the canonical lower-case UUID form, the form keys
// are stored in; uuid.Parse alone would also take braces, URNs and upper
// case.
var sandboxIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkSandboxID accepts the canonical UUID form only.
func checkSandboxID(v string, optional bool) error {
	switch {
	case v == "" && optional:
		return nil
	case v == "":
		return invalid("sandbox_id", "required")
	case !sandboxIDPattern.MatchString(v):
		return invalid("sandbox_id", "%q is not a UUID in canonical lower-case form", v)
	}
	return nil
}

func trackIDSchema(p *jsonschema.Schema) { patternSchema(p, trackIDPattern, maxKeyField) }

// sandboxIDSchema describes a sandbox_id; an optional one may be empty
// (a sweep), so it carries no uuid format.
func sandboxIDSchema(p *jsonschema.Schema, optional bool) {
	if optional {
		p.Pattern = optionalPattern(sandboxIDPattern)
		nullable(p)
		return
	}
	p.Pattern = sandboxIDPattern.String()
	p.Format = "uuid"
}

// SandboxAllocatePayload asks for one available sandbox for a track.
type SandboxAllocatePayload struct {
	// TrackID names the track; it ends up in keys, so it is an identifier.
	TrackID string `json:"track_id"`
	// IdempotencyKey defaults to TrackID: a track holds at most one live
	// allocation per key.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

func (SandboxAllocatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	trackIDSchema(property(s, "track_id"))
	textSchema(property(s, "idempotency_key"), maxKeyField)
	nullable(property(s, "idempotency_key"))
}

func (p *SandboxAllocatePayload) Validate() error {
	if err := checkTrackID(p.TrackID); err != nil {
		return err
	}
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = p.TrackID
	}
	return checkText("idempotency_key", p.IdempotencyKey, maxKeyField)
}

// SandboxMarkDeletionPayload asks to release a sandbox the track owns.
type SandboxMarkDeletionPayload struct {
	// SandboxID is the sandbox's UUID in canonical lower-case form.
	SandboxID string `json:"sandbox_id"`
	// TrackID must be the track that holds the allocation.
	TrackID string `json:"track_id"`
}

func (SandboxMarkDeletionPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	sandboxIDSchema(property(s, "sandbox_id"), false)
	trackIDSchema(property(s, "track_id"))
}

func (p *SandboxMarkDeletionPayload) Validate() error {
	if err := checkSandboxID(p.SandboxID, false); err != nil {
		return err
	}
	return checkTrackID(p.TrackID)
}

// SandboxExpirePayload moves one overdue allocation to pending_deletion.
// Without a sandbox_id it is a sweep: it finds every overdue allocation
// and sends one sandbox.expire for each.
type SandboxExpirePayload struct {
	SandboxID string `json:"sandbox_id,omitempty"`
}

func (SandboxExpirePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	sandboxIDSchema(property(s, "sandbox_id"), true)
}

func (p *SandboxExpirePayload) Validate() error {
	return checkSandboxID(p.SandboxID, true)
}

// SandboxCleanupPayload deletes one pending_deletion sandbox at the
// provider. Without a sandbox_id it is a sweep over all of them.
type SandboxCleanupPayload struct {
	SandboxID string `json:"sandbox_id,omitempty"`
}

func (SandboxCleanupPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	sandboxIDSchema(property(s, "sandbox_id"), true)
}

func (p *SandboxCleanupPayload) Validate() error {
	return checkSandboxID(p.SandboxID, true)
}

// SandboxSyncPayload is the provider's full inventory, or a request to
// pull it from the provider.
type SandboxSyncPayload struct {
	// Inventory lists every sandbox the provider has, each once: one not
	// yet known is added, an available or allocated one no longer listed
	// is staled, and every one listed has its last_synced refreshed. An
	// empty list means the provider has none; absent (or null), transit
	// asks the provider for its list (GET /sandboxes).
	Inventory []InventoryItem `json:"inventory"`
}

// InventoryItem is one sandbox as the provider lists it.
type InventoryItem struct {
	// ExternalID is the provider's ID of the sandbox.
	ExternalID string `json:"external_id"`
	Name       string `json:"name"`
	// LabDurationHours may be fractional, down to one second (1/3600).
	LabDurationHours float64 `json:"lab_duration_hours"`
}

// Pull reports whether the sync asks transit to pull the inventory from
// the provider.
func (p *SandboxSyncPayload) Pull() bool { return p.Inventory == nil }

func (SandboxSyncPayload) JSONSchemaExtend(s *jsonschema.Schema) {
	// No count limit: a sync writes its changes in as many transactions
	// as they need, and a message's 256 KiB bound what one can carry.
	optional(s, "inventory", nil)
	nullable(property(s, "inventory"))
	goOnly(s, "each external_id appears once in inventory")
}

func (InventoryItem) JSONSchemaExtend(s *jsonschema.Schema) {
	requiredTextSchema(property(s, "external_id"), maxKeyField)
	requiredTextSchema(property(s, "name"), maxKeyField)
	hours := property(s, "lab_duration_hours")
	hours.Minimum = number(minLabHours)
	hours.Maximum = number(maxLabHours)
}

// Validate checks an inventory a producer sent, or one pulled from the
// provider; none is a pull.
func (p *SandboxSyncPayload) Validate() error {
	seen := make(map[string]bool, len(p.Inventory))
	for i := range p.Inventory {
		it := &p.Inventory[i]
		field := fmt.Sprintf("inventory[%d]", i)
		if err := required(field+".external_id", it.ExternalID, maxKeyField); err != nil {
			return err
		}
		if seen[it.ExternalID] {
			return invalid(field+".external_id", "%q listed twice", it.ExternalID)
		}
		seen[it.ExternalID] = true
		if err := required(field+".name", it.Name, maxKeyField); err != nil {
			return err
		}
		if it.LabDurationHours < minLabHours || it.LabDurationHours > maxLabHours {
			return invalid(field+".lab_duration_hours", "%g, want 1/3600 (one second) to %d", it.LabDurationHours, maxLabHours)
		}
	}
	return nil
}

// SandboxReinstatePayload returns a stale sandbox to the pool: an
// operator's answer once the provider lists it again and it is fit for
// use. A stale sandbox becomes available by this command only.
type SandboxReinstatePayload struct {
	// SandboxID is the sandbox's UUID in canonical lower-case form.
	SandboxID string `json:"sandbox_id"`
}

func (SandboxReinstatePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	sandboxIDSchema(property(s, "sandbox_id"), false)
}

func (p *SandboxReinstatePayload) Validate() error { return checkSandboxID(p.SandboxID, false) }

// SandboxRetirePayload removes a stale sandbox for good: an operator's
// answer once it is gone at the provider.
type SandboxRetirePayload struct {
	// SandboxID is the sandbox's UUID in canonical lower-case form.
	SandboxID string `json:"sandbox_id"`
}

func (SandboxRetirePayload) JSONSchemaExtend(s *jsonschema.Schema) {
	sandboxIDSchema(property(s, "sandbox_id"), false)
}

func (p *SandboxRetirePayload) Validate() error { return checkSandboxID(p.SandboxID, false) }

// SandboxAllocatedPayload carries what a track needs to use its sandbox.
type SandboxAllocatedPayload struct {
	SandboxID      string `json:"sandbox_id"`
	ExternalID     string `json:"external_id"`
	Name           string `json:"name"`
	TrackID        string `json:"track_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// AllocatedAt and ExpiresAt are Unix times in seconds.
	AllocatedAt int64 `json:"allocated_at"`
	ExpiresAt   int64 `json:"expires_at"`
}

// SandboxAllocationRejectedPayload is an allocation refused: no sandbox
// is available.
type SandboxAllocationRejectedPayload struct {
	TrackID        string `json:"track_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Reason         string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p SandboxAllocationRejectedPayload) RejectionReason() string { return p.Reason }

// SandboxDeletionMarkedPayload is a sandbox its track released; the
// cleanup deletes it at the provider.
type SandboxDeletionMarkedPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
	TrackID    string `json:"track_id"`
	// DeletionRequestedAt is a Unix time in seconds.
	DeletionRequestedAt int64 `json:"deletion_requested_at"`
}

// SandboxDeletionRejectedPayload is a release refused; Reason says why.
type SandboxDeletionRejectedPayload struct {
	SandboxID string `json:"sandbox_id"`
	TrackID   string `json:"track_id"`
	Reason    string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p SandboxDeletionRejectedPayload) RejectionReason() string { return p.Reason }

// SandboxExpiredPayload is an allocation whose lab time ran out, now
// pending deletion.
type SandboxExpiredPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
	TrackID    string `json:"track_id"`
	// AllocatedAt and DeletionRequestedAt are Unix times in seconds.
	AllocatedAt         int64 `json:"allocated_at"`
	DeletionRequestedAt int64 `json:"deletion_requested_at"`
}

// SandboxDeletedPayload is a sandbox the provider deleted.
type SandboxDeletedPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
}

// SandboxDeletionFailedPayload is a cleanup that did not delete the
// sandbox, which stays pending deletion.
type SandboxDeletionFailedPayload struct {
	SandboxID          string `json:"sandbox_id"`
	ExternalID         string `json:"external_id"`
	DeletionRetryCount int    `json:"deletion_retry_count"`
	// Reason is the provider's error, or provider_not_configured.
	Reason string `json:"reason"`
}

// SandboxSyncedPayload lists the sandboxes a sync added and staled.
type SandboxSyncedPayload struct {
	Added  []string `json:"added"`
	Staled []string `json:"staled"`
}

// SandboxCleanupStuckPayload is a sandbox the provider refused to delete
// on every attempt the cleanup policy allows. It is left cleanup_stuck,
// out of the cleanup sweep, for an operator.
type SandboxCleanupStuckPayload struct {
	SandboxID          string `json:"sandbox_id"`
	ExternalID         string `json:"external_id"`
	DeletionRetryCount int    `json:"deletion_retry_count"`
	// LastError is the provider's answer to the last attempt.
	LastError string `json:"last_error"`
}

// SandboxReinstatedPayload is a stale sandbox returned to the pool.
type SandboxReinstatedPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
	Name       string `json:"name"`
}

// SandboxRetiredPayload is a stale sandbox removed for good.
type SandboxRetiredPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
}

// SandboxRejectedPayload is an operator's command on a sandbox refused;
// Reason says why.
type SandboxRejectedPayload struct {
	SandboxID string `json:"sandbox_id"`
	Reason    string `json:"reason"`
}

// RejectionReason makes it a Rejection.
func (p SandboxRejectedPayload) RejectionReason() string { return p.Reason }
