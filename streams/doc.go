// Package streams is transit's DynamoDB Streams fan-in (docs/fanin.md): a
// Watermill message.Subscriber whose topics are table names and whose
// messages are the tables' item changes, so router rules can map them to
// commands (e.g. the removal of a "lyr#…" item → layer.removed).
//
// Each message's payload is a Record in JSON, its UUID the stream record's
// event ID, and its one metadata entry "type" one of TypeInsert,
// TypeModify, TypeRemove:
//
//	{"type":"dynamodb.remove","table":"transit-SandboxPool",
//	 "keys":{"PK":"SBX#…","SK":"META"},"old_image":{…},
//	 "sequence_number":"…","shard_id":"shardId-…","event_id":"…",
//	 "approximate_creation_time":"2026-11-22T10:00:00Z","ttl_removal":true}
//
// Delivery is at least once and in order within a shard (DynamoDB keeps
// all changes to one item in one shard lineage): the next record of a
// shard is delivered only after the previous one was acked, and a child
// shard only after its parent was read to its end. Acks are
// checkpointed per shard in a lease table (store.StreamLeases), where the
// instances of one consumer group also hold one lease per shard: each
// shard is read by one instance at a time, the shards are shared evenly
// between live instances, and a crashed instance's shards are taken over
// once its leases lapse. Checkpoints are batched
// (SubscriberConfig.CheckpointEvery, CheckpointInterval) and always
// written at a shard's end and before a lease is handed back, so a clean
// hand-over delivers nothing again. A record is delivered again only if
// it was not acked, or its ack was not yet checkpointed (a crash, a lost
// lease: at most one batch), before its shard changed hands; consumers
// must be idempotent by the message UUID, the record's event ID.
//
// Wiring it with the real clients:
//
//	db := dynamodb.NewFromConfig(awsCfg)
//	sub, err := streams.NewSubscriber(streams.SubscriberConfig{
//		Tables:        db,
//		Streams:       dynamodbstreams.NewFromConfig(awsCfg),
//		Leases:        streams.NewDynamoDBLeaseStore(db, store.TableName(prefix, store.StreamLeases)),
//		ConsumerGroup: "layer-cleanup",
//	}, logger)
//	...
//	router.AddConsumerHandler("layer-removed", store.TableName(prefix, layersTable), sub,
//		func(msg *message.Message) error {
//			var rec streams.Record
//			if err := json.Unmarshal(msg.Payload, &rec); err != nil {
//				return err
//			}
//			...
//		})
package streams
