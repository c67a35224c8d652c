package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// IdempotencyClaim is the SandboxPool item that holds a track's
// idempotency key: it names the allocation made under the key. An
// allocation writes it in its own transaction, so of two commands with
// one key allocating at the same instant only one commits; the other
// reads the claim and answers with that allocation. It has none of the
// indexes' keys, so no index holds it.
type IdempotencyClaim struct {
	// PK is IDEM#<idempotency_key>.
	PK string `dynamodbav:"PK"`
	// SK is TRACK#<track_id>: keys are per track.
	SK string `dynamodbav:"SK"`
	// SandboxID is the sandbox the claim's allocation took.
	SandboxID string `dynamodbav:"sandbox_id"`
	// AllocatedAt is that allocation's allocated_at (Unix seconds): with
	// the sandbox ID it names one allocation, not the sandbox's next one.
	AllocatedAt int64 `dynamodbav:"allocated_at"`
}

func claimKey(trackID, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "IDEM#" + key},
		"SK": &types.AttributeValueMemberS{Value: "TRACK#" + trackID},
	}
}

// claimed returns the live allocation the track's key names, if any, and
// the claim as read (found false when there is none).
func (s *Store) claimed(ctx context.Context, trackID, key string) (live Sandbox, isLive bool, claim IdempotencyClaim, found bool, err error) {
	claim, found, err = getItem[IdempotencyClaim](ctx, s.db, s.sandboxes, claimKey(trackID, key))
	if err != nil || !found {
		return Sandbox{}, false, claim, found, err
	}
	sb, ok, err := s.GetSandbox(ctx, claim.SandboxID)
	isLive = ok && sb.Status == StatusAllocated && sb.AllocatedToTrack == trackID &&
		sb.IdempotencyKey == key && sb.AllocatedAt == claim.AllocatedAt
	return sb, isLive, claim, true, err
}

// claimWrite is the transaction item that makes sb's allocation the one
// its key names: over no claim, or over the spent claim that was read.
func (s *Store) claimWrite(sb Sandbox, spent IdempotencyClaim, found bool) (types.TransactWriteItem, error) {
	cond := expression.AttributeNotExists(expression.Name("PK"))
	if found {
		cond = expression.Name("sandbox_id").Equal(expression.Value(spent.SandboxID)).
			And(expression.Name("allocated_at").Equal(expression.Value(spent.AllocatedAt)))
	}
	key := claimKey(sb.AllocatedToTrack, sb.IdempotencyKey)
	item, err := putIn(s.sandboxes, IdempotencyClaim{
		PK: key["PK"].(*types.AttributeValueMemberS).Value, SK: key["SK"].(*types.AttributeValueMemberS).Value,
		SandboxID: sb.SandboxID, AllocatedAt: sb.AllocatedAt,
	}, cond)
	if err != nil {
		return item, fmt.Errorf("claim key of %s: %w", sb.SandboxID, err)
	}
	return item, nil
}
