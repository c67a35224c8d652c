package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// TestSubscriber_changes_become_messages runs the real clients and lease
// store against both emulators. moto's streams have one shard and never
// split, which is why lineage is tested with the fake.
func TestSubscriber_changes_become_messages(t *testing.T) {
	for _, e := range emulators {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, st := clients(e.URL(t))
			table, leases := provision(t, db)

			item, err := attributevalue.MarshalMap(map[string]any{
				"pk": "SBX#1", "sk": "META", "count": 1, "active": true,
				"tags": []string{"a", "b"}, "profile": map[string]any{"name": "x", "limits": []any{1, "two"}},
			})
			require.NoError(t, err)
			// Beyond float64's 2^53.
			item["big"] = &types.AttributeValueMemberN{Value: "12345678901234567890123"}
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
			require.NoError(t, err)
			key := map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "SBX#1"}, "sk": &types.AttributeValueMemberS{Value: "META"},
			}
			upd, err := expression.NewBuilder().WithUpdate(expression.
				Set(expression.Name("count"), expression.Value(2)).
				Set(expression.Name("status"), expression.Value("allocated"))).Build()
			require.NoError(t, err)
			_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key, UpdateExpression: upd.Update(),
				ExpressionAttributeNames: upd.Names(), ExpressionAttributeValues: upd.Values(),
			})
			require.NoError(t, err)
			_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
			require.NoError(t, err)

			sub := newSubscriber(t, emulatorConfig(db, st, leases, "it", "a"), nil)
			msgs := subscribe(t, sub, table)
			var got []*message.Message
			for range 3 {
				m := receive(t, msgs)
				m.Ack()
				got = append(got, m)
			}

			const before = `{"pk":"SBX#1","sk":"META","count":1,"active":true,"big":12345678901234567890123,
				"tags":["a","b"],"profile":{"name":"x","limits":[1,"two"]}}`
			const after = `{"pk":"SBX#1","sk":"META","count":2,"active":true,"big":12345678901234567890123,
				"tags":["a","b"],"profile":{"name":"x","limits":[1,"two"]},"status":"allocated"}`
			want := []struct{ typ, old, new string }{
				{streams.TypeInsert, "", before},
				{streams.TypeModify, before, after},
				{streams.TypeRemove, after, ""},
			}
			seen := map[string]bool{}
			var lastSeq *big.Int
			for i, m := range got {
				parts := map[string]json.RawMessage{}
				require.NoError(t, json.Unmarshal(m.Payload, &parts))
				r := decode(t, m)
				assert.Equal(t, want[i].typ, r.Type)
				assert.Equal(t, want[i].typ, m.Metadata.Get(streams.TypeAttribute))
				assert.Equal(t, table, r.Table)
				assert.JSONEq(t, `{"pk":"SBX#1","sk":"META"}`, string(parts["keys"]))
				assertImage(t, want[i].old, parts["old_image"])
				assertImage(t, want[i].new, parts["new_image"])
				assert.Contains(t, string(m.Payload), `"big":12345678901234567890123`, "numbers arrive digit for digit")
				assert.False(t, r.TTLRemoval, "a client's delete")
				assert.Equal(t, r.EventID, m.UUID)
				assert.False(t, seen[r.EventID], "event IDs are unique")
				seen[r.EventID] = true
				assert.NotEmpty(t, r.ShardID)
				// DynamoDB Local rounds creation times to the minute.
				assert.WithinDuration(t, time.Now(), r.ApproximateCreationTime, 2*time.Minute)
				seq, ok := new(big.Int).SetString(r.SequenceNumber, 10)
				require.True(t, ok, r.SequenceNumber)
				if lastSeq != nil {
					assert.Equal(t, 1, seq.Cmp(lastSeq), "sequence numbers grow")
				}
				lastSeq = seq
			}

			// The last ack is checkpointed for the shard.
			last := decode(t, got[2])
			store := streams.NewDynamoDBLeaseStore(db, leases)
			arn := tableStream(t, db, table)
			waitFor(t, "the checkpoint of the last ack", 5*time.Second, func() bool {
				snap, err := store.List(ctx, "it", arn)
				require.NoError(t, err)
				return snap.Leases[last.ShardID].Checkpoint == last.SequenceNumber
			})
		})
	}
}

func assertImage(t *testing.T, want string, got json.RawMessage) {
	t.Helper()
	if want == "" {
		assert.Nil(t, got, "no image expected")
		return
	}
	assert.JSONEq(t, want, string(got))
}

func tableStream(t *testing.T, db *dynamodb.Client, table string) string {
	t.Helper()
	out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	return aws.ToString(out.Table.LatestStreamArn)
}

// TestSubscriber_resumes_after_checkpoint: an instance acks part of 500
// changes and closes; the next instance of the same group replays none of
// what was acked and misses none of the rest. A second group reads all
// 500 meanwhile: groups keep their own checkpoints, and it is the
// reference for "misses nothing".
func TestSubscriber_resumes_after_checkpoint(t *testing.T) {
	ctx := context.Background()
	db, st := clients(dynamoDBLocalURL(t))
	table, leases := provision(t, db)
	for i := range 500 {
		key := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%03d", i%300)},
			"sk": &types.AttributeValueMemberS{Value: "META"},
		}
		var err error
		switch {
		case i < 300: // 300 inserts
			item := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "n": &types.AttributeValueMemberN{Value: fmt.Sprint(i)}}
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		case i < 450: // 150 modifies
			item := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "n": &types.AttributeValueMemberN{Value: fmt.Sprint(i)}}
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		default: // 50 removes
			_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
		}
		require.NoError(t, err)
	}

	reference := newSubscriber(t, emulatorConfig(db, st, leases, "reference", "r"), nil)
	j := newJournal()
	refDone := consume(subscribe(t, reference, table), j.handler("reference", 0))

	first := newSubscriber(t, emulatorConfig(db, st, leases, "g", "a"), nil)
	msgs := subscribe(t, first, table)
	ackedFirst, nacked := map[string]bool{}, map[string]bool{}
	lastFirst := map[string]string{} // shard → last acked sequence number
	for len(ackedFirst) < 200 {
		m := receive(t, msgs)
		r := decode(t, m)
		require.False(t, ackedFirst[r.EventID], "delivered again after its ack: %s", r.EventID)
		if len(ackedFirst)%50 == 49 && !nacked[r.EventID] {
			// A nack on the way: the same record comes back, and is
			// acked once.
			nacked[r.EventID] = true
			m.Nack()
			continue
		}
		ackedFirst[r.EventID] = true
		lastFirst[r.ShardID] = r.SequenceNumber
		m.Ack()
	}
	require.Len(t, nacked, 4)
	closeWithin(t, first)

	second := newSubscriber(t, emulatorConfig(db, st, leases, "g", "b"), nil)
	msgs = subscribe(t, second, table)
	ackedSecond := map[string]bool{}
	firstSecond := map[string]string{} // shard → first sequence number delivered
	for len(ackedFirst)+len(ackedSecond) < 500 {
		m := receive(t, msgs)
		r := decode(t, m)
		require.False(t, ackedFirst[r.EventID], "replayed %s, acked before the restart", r.EventID)
		require.False(t, ackedSecond[r.EventID], "delivered twice: %s", r.EventID)
		if _, ok := firstSecond[r.ShardID]; !ok {
			firstSecond[r.ShardID] = r.SequenceNumber
		}
		ackedSecond[r.EventID] = true
		m.Ack()
	}
	closeWithin(t, second)

	waitFor(t, "the reference group's 500 records", 20*time.Second, func() bool { return len(j.acked("")) == 500 })
	closeWithin(t, reference)
	waitClosed(t, refDone)

	all := j.acked("")
	for id := range ackedFirst {
		assert.Equal(t, 1, all[id], "%s is not a record of the table", id)
	}
	for id := range ackedSecond {
		assert.Equal(t, 1, all[id], "%s is not a record of the table", id)
	}
	assert.Len(t, ackedFirst, 200)
	assert.Len(t, ackedSecond, 300, "together, every record once")
	for shard, last := range lastFirst {
		if next, ok := firstSecond[shard]; ok {
			a, _ := new(big.Int).SetString(last, 10)
			b, _ := new(big.Int).SetString(next, 10)
			assert.Equal(t, 1, b.Cmp(a), "%s: the second instance starts after the first one's last ack", shard)
		}
	}
	assert.NotEmpty(t, firstSecond)
}
