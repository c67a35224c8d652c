package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The types of stream records, in the message's "type" metadata and the
// payload's "type" field.
const (
	TypeInsert = "dynamodb.insert"
	TypeModify = "dynamodb.modify"
	TypeRemove = "dynamodb.remove"
)

// TypeAttribute is the one metadata key a stream message carries: SQS
// allows 10 message attributes and the DLQ path adds its own, so
// everything else rides in the payload. It is the same key as the
// commands' and events' type attribute, so router rules route on it alike.
const TypeAttribute = "type"

// Record is the JSON payload of a stream message: one change to one item.
// Keys and images are plain JSON (strings, numbers, booleans, null, lists,
// objects; binaries are base64 strings, sets are arrays), with numbers kept
// as DynamoDB wrote them so large integers lose no digits.
type Record struct {
	// Type is TypeInsert, TypeModify or TypeRemove.
	Type string `json:"type"`
	// Table is the table's name, the topic subscribed to.
	Table string `json:"table"`
	// Keys are the item's key attributes.
	Keys map[string]any `json:"keys"`
	// OldImage is the item before the change; absent for an insert or when
	// the stream's view type does not carry it.
	OldImage map[string]any `json:"old_image,omitempty"`
	// NewImage is the item after the change; absent for a remove or when
	// the stream's view type does not carry it.
	NewImage map[string]any `json:"new_image,omitempty"`
	// SequenceNumber orders the record within its shard.
	SequenceNumber string `json:"sequence_number"`
	// ShardID is the stream shard the record was read from.
	ShardID string `json:"shard_id"`
	// EventID is the record's unique ID, also the message UUID.
	EventID string `json:"event_id"`
	// ApproximateCreationTime is when the change was made (RFC 3339). AWS
	// rounds it to the second; DynamoDB Local to the minute.
	ApproximateCreationTime time.Time `json:"approximate_creation_time"`
	// TTLRemoval is true for a remove done by DynamoDB's TTL expiry rather
	// than by a client.
	TTLRemoval bool `json:"ttl_removal"`
}

// ttlPrincipal is the userIdentity DynamoDB puts on removals done by TTL.
const ttlPrincipal = "dynamodb.amazonaws.com"

// newRecord converts a stream record of table read from shardID.
func newRecord(table, shardID string, r types.Record) (Record, error) {
	sr := r.Dynamodb
	if sr == nil {
		return Record{}, errors.New("stream record without a dynamodb section")
	}
	out := Record{
		Table:          table,
		ShardID:        shardID,
		EventID:        aws.ToString(r.EventID),
		SequenceNumber: aws.ToString(sr.SequenceNumber),
	}
	switch r.EventName {
	case types.OperationTypeInsert:
		out.Type = TypeInsert
	case types.OperationTypeModify:
		out.Type = TypeModify
	case types.OperationTypeRemove:
		out.Type = TypeRemove
	default:
		return Record{}, fmt.Errorf("unknown stream event name %q", r.EventName)
	}
	if sr.ApproximateCreationDateTime != nil {
		out.ApproximateCreationTime = sr.ApproximateCreationDateTime.UTC()
	}
	if id := r.UserIdentity; id != nil {
		out.TTLRemoval = aws.ToString(id.Type) == "Service" && aws.ToString(id.PrincipalId) == ttlPrincipal
	}
	var err error
	if out.Keys, err = plainJSON(sr.Keys); err != nil {
		return Record{}, fmt.Errorf("keys: %w", err)
	}
	if out.OldImage, err = plainJSON(sr.OldImage); err != nil {
		return Record{}, fmt.Errorf("old image: %w", err)
	}
	if out.NewImage, err = plainJSON(sr.NewImage); err != nil {
		return Record{}, fmt.Errorf("new image: %w", err)
	}
	return out, nil
}

// plainJSON turns stream attribute values into values encoding/json writes
// as plain JSON. A nil or empty map stays nil, so an absent image is
// omitted rather than written as {}.
func plainJSON(m map[string]types.AttributeValue) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	av, err := attributevalue.FromDynamoDBStreamsMap(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	// UseNumber: the default float64 would round integers beyond 2^53
	// (IDs, nanosecond times); DynamoDB numbers have up to 38 digits.
	if err := attributevalue.UnmarshalMapWithOptions(av, &out, func(o *attributevalue.DecoderOptions) { o.UseNumber = true }); err != nil {
		return nil, err
	}
	return jsonNumbers(out).(map[string]any), nil
}

// jsonNumbers replaces attributevalue.Number (which encoding/json would
// write as a string) with json.Number (written as a bare number).
func jsonNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = jsonNumbers(e)
		}
		return v
	case attributevalue.Number:
		return json.Number(v)
	case []attributevalue.Number:
		out := make([]json.Number, len(v))
		for i, n := range v {
			out[i] = json.Number(n)
		}
		return out
	}
	return v
}

// encode converts a stream record and marshals its payload.
func encode(table, shardID string, raw types.Record) (Record, []byte, error) {
	rec, err := newRecord(table, shardID, raw)
	if err != nil {
		return Record{}, nil, err
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		return Record{}, nil, err
	}
	return rec, payload, nil
}

// message builds a Watermill message of r: its UUID is the record's event
// ID, stable however often the record is read again. Each delivery needs
// a new message: a nacked one cannot be acked again.
func (r Record) message(payload []byte) *message.Message {
	msg := message.NewMessage(r.EventID, payload)
	msg.Metadata.Set(TypeAttribute, r.Type)
	return msg
}

func sequenceNumber(r types.Record) string {
	if r.Dynamodb == nil {
		return ""
	}
	return aws.ToString(r.Dynamodb.SequenceNumber)
}
