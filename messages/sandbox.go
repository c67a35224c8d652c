package messages

import (
	"fmt"
	"regexp"

	"github.com/google/uuid"
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
)

// Field limits. They keep every item far below DynamoDB's 400 KB and every
// message below SQS's 256 KiB.
const (
	maxKeyField   = 256
	maxInventory  = 1000
	maxLabHours   = 24 * 30
	sandboxIDSize = MaxIDLength
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

// checkSandboxID accepts the canonical UUID form only (seed: sandbox IDs
// are UUIDs), the form keys are stored in.
func checkSandboxID(v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	if err := required("sandbox_id", v, sandboxIDSize); err != nil {
		return err
	}
	if u, err := uuid.Parse(v); err != nil || u.String() != v {
		return invalid("sandbox_id", "%q is not a UUID in canonical lower-case form", v)
	}
	return nil
}

// SandboxAllocatePayload asks for one available sandbox for a track.
type SandboxAllocatePayload struct {
	TrackID string `json:"track_id"`
	// IdempotencyKey defaults to TrackID, as in the seed: a track holds at
	// most one live allocation per key.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
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
	SandboxID string `json:"sandbox_id"`
	TrackID   string `json:"track_id"`
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

func (p *SandboxExpirePayload) Validate() error {
	return checkSandboxID(p.SandboxID, true)
}

// SandboxCleanupPayload deletes one pending_deletion sandbox at the
// provider. Without a sandbox_id it is a sweep over all of them.
type SandboxCleanupPayload struct {
	SandboxID string `json:"sandbox_id,omitempty"`
}

func (p *SandboxCleanupPayload) Validate() error {
	return checkSandboxID(p.SandboxID, true)
}

// SandboxSyncPayload is the provider's full inventory.
type SandboxSyncPayload struct {
	Inventory []InventoryItem `json:"inventory"`
}

// InventoryItem is one sandbox as the provider lists it.
type InventoryItem struct {
	ExternalID string `json:"external_id"`
	Name       string `json:"name"`
	// LabDurationHours may be fractional, down to one second (1/3600).
	LabDurationHours float64 `json:"lab_duration_hours"`
}

func (p *SandboxSyncPayload) Validate() error {
	if len(p.Inventory) > maxInventory {
		return invalid("inventory", "%d entries, at most %d", len(p.Inventory), maxInventory)
	}
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
		if it.LabDurationHours*3600 < 1 || it.LabDurationHours > maxLabHours {
			return invalid(field+".lab_duration_hours", "%g, want 1/3600 (one second) to %d", it.LabDurationHours, maxLabHours)
		}
	}
	return nil
}

// SandboxAllocatedPayload carries what a track needs to use its sandbox.
type SandboxAllocatedPayload struct {
	SandboxID      string `json:"sandbox_id"`
	ExternalID     string `json:"external_id"`
	Name           string `json:"name"`
	TrackID        string `json:"track_id"`
	IdempotencyKey string `json:"idempotency_key"`
	AllocatedAt    int64  `json:"allocated_at"`
	ExpiresAt      int64  `json:"expires_at"`
}

type SandboxAllocationRejectedPayload struct {
	TrackID        string `json:"track_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Reason         string `json:"reason"`
}

type SandboxDeletionMarkedPayload struct {
	SandboxID           string `json:"sandbox_id"`
	ExternalID          string `json:"external_id"`
	TrackID             string `json:"track_id"`
	DeletionRequestedAt int64  `json:"deletion_requested_at"`
}

type SandboxDeletionRejectedPayload struct {
	SandboxID string `json:"sandbox_id"`
	TrackID   string `json:"track_id"`
	Reason    string `json:"reason"`
}

type SandboxExpiredPayload struct {
	SandboxID           string `json:"sandbox_id"`
	ExternalID          string `json:"external_id"`
	TrackID             string `json:"track_id"`
	AllocatedAt         int64  `json:"allocated_at"`
	DeletionRequestedAt int64  `json:"deletion_requested_at"`
}

type SandboxDeletedPayload struct {
	SandboxID  string `json:"sandbox_id"`
	ExternalID string `json:"external_id"`
}

type SandboxDeletionFailedPayload struct {
	SandboxID          string `json:"sandbox_id"`
	ExternalID         string `json:"external_id"`
	DeletionRetryCount int    `json:"deletion_retry_count"`
	Reason             string `json:"reason"`
}

type SandboxSyncedPayload struct {
	Added  []string `json:"added"`
	Staled []string `json:"staled"`
}
