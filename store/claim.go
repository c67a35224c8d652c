package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/machine"
)

// IdempotencyClaim is the SandboxPool item that holds a track's
// idempotency key: it names the allocation decided under the key. An
// allocation claims the key after putting its pending outcome and before
// writing its sandbox, each write conditional on the one before it still
// standing (Allocate), so of two commands with one key only one
// allocates; the other reads the claim and answers with that allocation.
// It has none of the indexes' keys, so no index holds it.
type IdempotencyClaim struct {
	// PK is IDEM#<idempotency_key>.
	PK string `dynamodbav:"PK"`
	// SK is TRACK#<track_id>: keys are per track.
	SK string `dynamodbav:"SK"`
	// SandboxID is the sandbox the claim's allocation took, or decided to.
	SandboxID string `dynamodbav:"sandbox_id"`
	// AllocatedAt is that allocation's allocated_at (Unix seconds): with
	// the sandbox ID it names one allocation, not the sandbox's next one.
	AllocatedAt int64 `dynamodbav:"allocated_at"`
	// CommandID is the allocation's command.
	CommandID string `dynamodbav:"command_id,omitempty"`
	// Nonce names the command's decision, as its pending outcome does:
	// while that outcome is pending with this nonce, the sandbox's write
	// may still land.
	Nonce string `dynamodbav:"nonce,omitempty"`
}

func claimKey(trackID, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "IDEM#" + key},
		"SK": &types.AttributeValueMemberS{Value: "TRACK#" + trackID},
	}
}

// claimLive returns the sandbox claim names, and whether the allocation
// the claim names is still live.
func (s *Store) claimLive(ctx context.Context, claim IdempotencyClaim, in machine.SandboxInput) (Sandbox, bool, error) {
	sb, ok, err := s.GetSandbox(ctx, claim.SandboxID)
	live := ok && sb.Status == StatusAllocated && sb.AllocatedToTrack == in.TrackID &&
		sb.IdempotencyKey == in.IdempotencyKey && sb.AllocatedAt == claim.AllocatedAt
	return sb, live, err
}

// putClaim makes claim the key's, over no claim (found false) or over the
// claim read, unchanged since. put is false when the claim changed since
// it was read.
func (s *Store) putClaim(ctx context.Context, in machine.SandboxInput, claim, read IdempotencyClaim, found bool) (put bool, err error) {
	cond := expression.AttributeNotExists(expression.Name("PK"))
	switch {
	case found && read.Nonce != "":
		cond = expression.Name("nonce").Equal(expression.Value(read.Nonce))
	case found:
		// A claim written before claims named decisions.
		cond = expression.Name("sandbox_id").Equal(expression.Value(read.SandboxID)).
			And(expression.Name("allocated_at").Equal(expression.Value(read.AllocatedAt))).
			And(expression.AttributeNotExists(expression.Name("nonce")))
	}
	key := claimKey(in.TrackID, in.IdempotencyKey)
	claim.PK, claim.SK = key["PK"].(*types.AttributeValueMemberS).Value, key["SK"].(*types.AttributeValueMemberS).Value
	item, err := putIn(s.sandboxes, claim, cond)
	if err != nil {
		return false, fmt.Errorf("claim key for %s: %w", claim.SandboxID, err)
	}
	return refused(putAlone(ctx, s.db, item.Put), "claim key for "+claim.SandboxID)
}
