package streams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LeaseDB is the part of the DynamoDB client the lease store uses.
type LeaseDB interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Attribute names of the lease table (store.StreamLeases documents them).
const (
	attrPK         = "pk"
	attrSK         = "sk"
	attrOwner      = "owner"
	attrVersion    = "version"
	attrExpires    = "lease_expires_at"
	attrCheckpoint = "checkpoint"
	attrTTL        = "expire_at"
)

const (
	shardPrefix = "shard#"
	ownerPrefix = "owner#"
)

// finishedLeaseTTL is how long a finished shard's lease is kept. A child
// reads its parent's ShardEnd from it until the stream drops the parent
// (24 h after its last record); after that the parent's absence from the
// stream says the same thing.
const finishedLeaseTTL = 72 * time.Hour

// heartbeatTTL is how long an instance's heartbeat item outlives its last
// beat; it only bounds clutter, liveness is read from lease_expires_at.
const heartbeatTTL = time.Hour

// DynamoDBLeaseStore is the LeaseStore on a DynamoDB table shaped as
// store.StreamLeases.
type DynamoDBLeaseStore struct {
	db    LeaseDB
	table string
}

// NewDynamoDBLeaseStore returns the lease store on the table named table
// (store.TableName(prefix, store.StreamLeases)).
func NewDynamoDBLeaseStore(db LeaseDB, table string) *DynamoDBLeaseStore {
	if db == nil || table == "" {
		panic("streams: NewDynamoDBLeaseStore needs a client and a table name")
	}
	return &DynamoDBLeaseStore{db: db, table: table}
}

// leaseItem is one item of the lease table: a shard's lease or an
// instance's heartbeat.
type leaseItem struct {
	// PK is <consumer group>#<stream ARN>: everything one group
	// coordinates on for one stream, read with one Query.
	PK string `dynamodbav:"pk"`
	// SK is shard#<shard ID> for a shard's lease, owner#<owner ID> for an
	// instance's heartbeat.
	SK string `dynamodbav:"sk"`
	// Owner is the instance holding the lease (absent while the shard is
	// free), or on a heartbeat the instance beating.
	Owner string `dynamodbav:"owner,omitempty"`
	// Version is bumped by every write to a lease, and each write is
	// conditioned on the version it read; heartbeats have none.
	Version int64 `dynamodbav:"version,omitempty"`
	// Expires is when the lease, or the instance whose heartbeat this is,
	// lapses without renewal (Unix milliseconds).
	Expires int64 `dynamodbav:"lease_expires_at"`
	// Checkpoint is the sequence number of the shard's last acked record
	// as of the last checkpoint (acks are written in batches), or
	// SHARD_END once the shard was read to its end.
	Checkpoint string `dynamodbav:"checkpoint,omitempty"`
	// TTL is set only on a finished lease (72 h after it finished) and on
	// a heartbeat (an hour after it lapses), so the table does not grow
	// forever (Unix seconds).
	TTL int64 `dynamodbav:"expire_at,omitempty"`
}

func partitionKey(group, streamARN string) string { return group + "#" + streamARN }

func (s *DynamoDBLeaseStore) key(group, streamARN, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: partitionKey(group, streamARN)},
		attrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// List reads the whole partition of group and streamARN.
func (s *DynamoDBLeaseStore) List(ctx context.Context, group, streamARN string) (Snapshot, error) {
	expr, err := expression.NewBuilder().
		WithKeyCondition(expression.KeyEqual(expression.Key(attrPK), expression.Value(partitionKey(group, streamARN)))).
		Build()
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Leases: map[string]Lease{}, Owners: map[string]time.Time{}}
	pages := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		// Coordination reads must see the last conditional write.
		ConsistentRead: aws.Bool(true),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return Snapshot{}, fmt.Errorf("list leases: %w", err)
		}
		var items []leaseItem
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
			return Snapshot{}, fmt.Errorf("decode leases: %w", err)
		}
		for _, it := range items {
			switch {
			case strings.HasPrefix(it.SK, shardPrefix):
				l := it.lease(group, streamARN)
				snap.Leases[l.ShardID] = l
			case strings.HasPrefix(it.SK, ownerPrefix):
				snap.Owners[strings.TrimPrefix(it.SK, ownerPrefix)] = time.UnixMilli(it.Expires)
			}
		}
	}
	return snap, nil
}

func (it leaseItem) lease(group, streamARN string) Lease {
	return Lease{
		Group:      group,
		StreamARN:  streamARN,
		ShardID:    strings.TrimPrefix(it.SK, shardPrefix),
		Owner:      it.Owner,
		Version:    it.Version,
		ExpiresAt:  time.UnixMilli(it.Expires),
		Checkpoint: it.Checkpoint,
	}
}

// Take writes owner on the lease if it is still at seen's version and free
// (no owner, or expired by this instance's clock), and not finished.
func (s *DynamoDBLeaseStore) Take(ctx context.Context, seen Lease, owner string, expires time.Time) (Lease, error) {
	update := expression.
		Set(expression.Name(attrOwner), expression.Value(owner)).
		Set(expression.Name(attrExpires), expression.Value(expires.UnixMilli())).
		Set(expression.Name(attrVersion), expression.Value(seen.Version+1))
	var cond expression.ConditionBuilder
	if seen.Version == 0 {
		cond = expression.AttributeNotExists(expression.Name(attrPK))
	} else {
		free := expression.AttributeNotExists(expression.Name(attrOwner)).
			Or(expression.Name(attrExpires).LessThan(expression.Value(time.Now().UnixMilli())))
		unfinished := expression.AttributeNotExists(expression.Name(attrCheckpoint)).
			Or(expression.Name(attrCheckpoint).NotEqual(expression.Value(ShardEnd)))
		cond = expression.Name(attrVersion).Equal(expression.Value(seen.Version)).And(free, unfinished)
	}
	return s.update(ctx, seen, update, cond)
}

// Renew extends held if owner and version are unchanged.
func (s *DynamoDBLeaseStore) Renew(ctx context.Context, held Lease, expires time.Time) (Lease, error) {
	update := expression.
		Set(expression.Name(attrExpires), expression.Value(expires.UnixMilli())).
		Set(expression.Name(attrVersion), expression.Value(held.Version+1))
	return s.update(ctx, held, update, heldBy(held))
}

// Checkpoint records sequenceNumber on held if owner and version are
// unchanged. A finished lease gets an expiry time for DynamoDB's TTL.
func (s *DynamoDBLeaseStore) Checkpoint(ctx context.Context, held Lease, sequenceNumber string, expires time.Time) (Lease, error) {
	update := expression.
		Set(expression.Name(attrCheckpoint), expression.Value(sequenceNumber)).
		Set(expression.Name(attrExpires), expression.Value(expires.UnixMilli())).
		Set(expression.Name(attrVersion), expression.Value(held.Version+1))
	if sequenceNumber == ShardEnd {
		update = update.Set(expression.Name(attrTTL), expression.Value(time.Now().Add(finishedLeaseTTL).Unix()))
	}
	return s.update(ctx, held, update, heldBy(held))
}

// Release removes the owner of held if owner and version are unchanged.
func (s *DynamoDBLeaseStore) Release(ctx context.Context, held Lease) error {
	update := expression.
		Remove(expression.Name(attrOwner)).
		Set(expression.Name(attrExpires), expression.Value(0)).
		Set(expression.Name(attrVersion), expression.Value(held.Version+1))
	_, err := s.update(ctx, held, update, heldBy(held))
	return err
}

// Heartbeat puts owner's heartbeat item; only owner ever writes it.
func (s *DynamoDBLeaseStore) Heartbeat(ctx context.Context, group, streamARN, owner string, expires time.Time) error {
	item, err := attributevalue.MarshalMap(leaseItem{
		PK:      partitionKey(group, streamARN),
		SK:      ownerPrefix + owner,
		Owner:   owner,
		Expires: expires.UnixMilli(),
		TTL:     expires.Add(heartbeatTTL).Unix(),
	})
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

func heldBy(l Lease) expression.ConditionBuilder {
	return expression.Name(attrOwner).Equal(expression.Value(l.Owner)).
		And(expression.Name(attrVersion).Equal(expression.Value(l.Version)))
}

func (s *DynamoDBLeaseStore) update(ctx context.Context, l Lease, update expression.UpdateBuilder, cond expression.ConditionBuilder) (Lease, error) {
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return Lease{}, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(l.Group, l.StreamARN, shardPrefix+l.ShardID),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return Lease{}, fmt.Errorf("shard %s: %w", l.ShardID, ErrLeaseLost)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("write lease of shard %s: %w", l.ShardID, err)
	}
	var it leaseItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Lease{}, fmt.Errorf("decode lease of shard %s: %w", l.ShardID, err)
	}
	return it.lease(l.Group, l.StreamARN), nil
}
