package streams_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"transit/streams"
)

// fakeStream is one table's stream in memory, with the shard lineage,
// trimming and iterator expiry that moto and DynamoDB Local cannot be made
// to produce on demand. Each instance under test reads it through its own
// client (reader), so tests can tell who read which shard when.
type fakeStream struct {
	mu       sync.Mutex
	table    string
	arn      string
	shards   []*fakeShard
	seq      int
	iters    map[string]fakeIter
	nextIter int
	// pageSize is how many shards one DescribeStream returns, so every
	// test goes through pagination.
	pageSize int
	// batch caps the records one GetRecords returns.
	batch int

	reads []shardRead
	// guard, when set, is asked on every read whether the reader may read
	// the shard now; its complaints are kept in violations.
	guard          func(reader, shard string) error
	violations     []string
	iteratorCalls  []dynamodbstreams.GetShardIteratorInput
	describeStarts []string
}

type fakeShard struct {
	id, parent string
	records    []types.Record
	closed     bool
	// trimmed is how many of the oldest records the stream has dropped.
	trimmed int
	// expire makes the next GetRecords on the shard fail with an expired
	// iterator.
	expire bool
}

type fakeIter struct {
	shard *fakeShard
	pos   int
}

// shardRead is one GetRecords call that returned records or an empty page.
type shardRead struct {
	reader, shard string
	at            time.Time
}

func newFakeStream(table string) *fakeStream {
	return &fakeStream{
		table:    table,
		arn:      "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-01-01T00:00:00.000",
		iters:    map[string]fakeIter{},
		pageSize: 1,
		batch:    3,
	}
}

func (f *fakeStream) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	panic("fake: no shard " + id)
}

func (f *fakeStream) addShard(id, parent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards = append(f.shards, &fakeShard{id: id, parent: parent})
}

// put appends n inserts to a shard and returns their event IDs.
func (f *fakeStream) put(shardID string, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(shardID)
	var ids []string
	for range n {
		f.seq++
		id := fmt.Sprintf("ev-%04d", f.seq)
		s.records = append(s.records, types.Record{
			EventID:   aws.String(id),
			EventName: types.OperationTypeInsert,
			Dynamodb: &types.StreamRecord{
				SequenceNumber:              aws.String(fmt.Sprintf("%021d", f.seq)),
				ApproximateCreationDateTime: aws.Time(time.Unix(1_700_000_000+int64(f.seq), 0)),
				Keys:                        map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
				NewImage:                    map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
			},
		})
		ids = append(ids, id)
	}
	return ids
}

// putRecord appends a record as given, with the next sequence number.
func (f *fakeStream) putRecord(shardID string, r types.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	r.Dynamodb.SequenceNumber = aws.String(fmt.Sprintf("%021d", f.seq))
	s := f.shard(shardID)
	s.records = append(s.records, r)
}

func (f *fakeStream) closeShard(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(id).closed = true
}

func (f *fakeStream) trim(id string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(id).trimmed = n
}

func (f *fakeStream) expireNextRead(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(id).expire = true
}

func (f *fakeStream) readsOf(shard string) []shardRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []shardRead
	for _, r := range f.reads {
		if r.shard == shard {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeStream) allReads() []shardRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]shardRead(nil), f.reads...)
}

// client is reader's view of the stream.
func (f *fakeStream) client(reader string) *fakeClient { return &fakeClient{f: f, reader: reader} }

type fakeClient struct {
	f      *fakeStream
	reader string
}

var _ streams.StreamsAPI = (*fakeClient)(nil)
var _ streams.TableAPI = (*fakeClient)(nil)

func (c *fakeClient) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	switch aws.ToString(in.TableName) {
	case c.f.table:
		return &dynamodb.DescribeTableOutput{Table: &ddbtypes.TableDescription{
			TableName:           in.TableName,
			LatestStreamArn:     aws.String(c.f.arn),
			StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
		}}, nil
	case "no-stream":
		return &dynamodb.DescribeTableOutput{Table: &ddbtypes.TableDescription{TableName: in.TableName}}, nil
	}
	return nil, &ddbtypes.ResourceNotFoundException{Message: aws.String("no table " + aws.ToString(in.TableName))}
}

func (c *fakeClient) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.StreamArn) != f.arn {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no stream")}
	}
	f.describeStarts = append(f.describeStarts, aws.ToString(in.ExclusiveStartShardId))
	start := 0
	if in.ExclusiveStartShardId != nil {
		for i, s := range f.shards {
			if s.id == *in.ExclusiveStartShardId {
				start = i + 1
			}
		}
	}
	desc := &types.StreamDescription{StreamArn: aws.String(f.arn), StreamStatus: types.StreamStatusEnabled}
	end := min(start+f.pageSize, len(f.shards))
	for _, s := range f.shards[start:end] {
		sh := types.Shard{ShardId: aws.String(s.id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("0")}}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		if s.closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String(strconv.Itoa(f.seq))
		}
		desc.Shards = append(desc.Shards, sh)
	}
	if end < len(f.shards) {
		desc.LastEvaluatedShardId = aws.String(f.shards[end-1].id)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: desc}, nil
}

func (c *fakeClient) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.iteratorCalls = append(f.iteratorCalls, *in)
	var s *fakeShard
	for _, sh := range f.shards {
		if sh.id == aws.ToString(in.ShardId) {
			s = sh
		}
	}
	if s == nil {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no shard")}
	}
	pos := s.trimmed
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
	case types.ShardIteratorTypeAfterSequenceNumber:
		after, _ := strconv.Atoi(aws.ToString(in.SequenceNumber))
		pos = len(s.records)
		for i, r := range s.records {
			if n, _ := strconv.Atoi(aws.ToString(r.Dynamodb.SequenceNumber)); n > after {
				pos = i
				break
			}
		}
		if pos < s.trimmed {
			return nil, &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
	default:
		panic("fake: iterator type " + string(in.ShardIteratorType))
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(f.newIter(s, pos))}, nil
}

func (f *fakeStream) newIter(s *fakeShard, pos int) string {
	f.nextIter++
	token := f.table + "/it-" + strconv.Itoa(f.nextIter)
	f.iters[token] = fakeIter{shard: s, pos: pos}
	return token
}

func (c *fakeClient) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	it, ok := f.iters[aws.ToString(in.ShardIterator)]
	if !ok {
		panic("fake: unknown iterator")
	}
	s := it.shard
	if s.expire {
		s.expire = false
		return nil, &types.ExpiredIteratorException{Message: aws.String("expired")}
	}
	if it.pos < s.trimmed {
		return nil, &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
	}
	f.reads = append(f.reads, shardRead{reader: c.reader, shard: s.id, at: time.Now()})
	if f.guard != nil {
		if err := f.guard(c.reader, s.id); err != nil {
			f.violations = append(f.violations, err.Error())
		}
	}
	end := min(it.pos+f.batch, len(s.records))
	if in.Limit != nil {
		end = min(end, it.pos+int(*in.Limit))
	}
	out := &dynamodbstreams.GetRecordsOutput{Records: append([]types.Record(nil), s.records[it.pos:end]...)}
	if !s.closed || end < len(s.records) {
		out.NextShardIterator = aws.String(f.newIter(s, end))
	}
	return out, nil
}

// memLeases is an in-memory LeaseStore with the DynamoDB store's
// conditions; the contract test holds both to the same behaviour.
type memLeases struct {
	mu     sync.Mutex
	leases map[[3]string]streams.Lease
	owners map[[3]string]time.Time
}

func newMemLeases() *memLeases {
	return &memLeases{leases: map[[3]string]streams.Lease{}, owners: map[[3]string]time.Time{}}
}

var _ streams.LeaseStore = (*memLeases)(nil)

func leaseKey(l streams.Lease) [3]string { return [3]string{l.Group, l.StreamARN, l.ShardID} }

func (m *memLeases) List(_ context.Context, group, arn string) (streams.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := streams.Snapshot{Leases: map[string]streams.Lease{}, Owners: map[string]time.Time{}}
	for k, l := range m.leases {
		if k[0] == group && k[1] == arn {
			snap.Leases[k[2]] = l
		}
	}
	for k, until := range m.owners {
		if k[0] == group && k[1] == arn {
			snap.Owners[k[2]] = until
		}
	}
	return snap, nil
}

func (m *memLeases) Take(_ context.Context, seen streams.Lease, owner string, expires time.Time) (streams.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.leases[leaseKey(seen)]
	switch {
	case seen.Version == 0 && ok,
		seen.Version != 0 && (!ok || cur.Version != seen.Version),
		ok && cur.Owner != "" && !cur.ExpiresAt.Before(time.Now()),
		ok && cur.Checkpoint == streams.ShardEnd:
		return streams.Lease{}, streams.ErrLeaseLost
	}
	if !ok {
		cur = streams.Lease{Group: seen.Group, StreamARN: seen.StreamARN, ShardID: seen.ShardID}
	}
	cur.Owner, cur.ExpiresAt, cur.Version = owner, truncMilli(expires), cur.Version+1
	m.leases[leaseKey(seen)] = cur
	return cur, nil
}

func (m *memLeases) update(held streams.Lease, change func(*streams.Lease)) (streams.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.leases[leaseKey(held)]
	if !ok || cur.Owner != held.Owner || cur.Version != held.Version {
		return streams.Lease{}, streams.ErrLeaseLost
	}
	change(&cur)
	cur.Version++
	m.leases[leaseKey(held)] = cur
	return cur, nil
}

func (m *memLeases) Renew(_ context.Context, held streams.Lease, expires time.Time) (streams.Lease, error) {
	return m.update(held, func(l *streams.Lease) { l.ExpiresAt = truncMilli(expires) })
}

func (m *memLeases) Checkpoint(_ context.Context, held streams.Lease, seq string, expires time.Time) (streams.Lease, error) {
	return m.update(held, func(l *streams.Lease) { l.Checkpoint, l.ExpiresAt = seq, truncMilli(expires) })
}

func (m *memLeases) Release(_ context.Context, held streams.Lease) error {
	_, err := m.update(held, func(l *streams.Lease) { l.Owner, l.ExpiresAt = "", time.UnixMilli(0) })
	return err
}

func (m *memLeases) Heartbeat(_ context.Context, group, arn, owner string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owners[[3]string{group, arn, owner}] = truncMilli(expires)
	return nil
}

// steal hands a shard's lease to another owner behind its holder's back,
// as an instance that (wrongly or after a lapse) took it would.
func (m *memLeases) steal(group, arn, shard, thief string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{group, arn, shard}
	l := m.leases[k]
	l.Owner, l.Version, l.ExpiresAt = thief, l.Version+1, time.Now().Add(time.Hour)
	m.leases[k] = l
}

func (m *memLeases) get(group, arn, shard string) streams.Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leases[[3]string{group, arn, shard}]
}

// holderGuard lets only the holder of a live lease read a shard: with
// every read checked, two instances never read one shard at the same time.
func (m *memLeases) holderGuard(group, arn string) func(reader, shard string) error {
	return func(reader, shard string) error {
		l := m.get(group, arn, shard)
		if l.Owner != reader || !l.ExpiresAt.After(time.Now()) {
			return fmt.Errorf("%s read %s while the lease was %+v", reader, shard, l)
		}
		return nil
	}
}

func (f *fakeStream) guardViolations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}

// truncMilli stores times as the DynamoDB store does.
func truncMilli(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// flakyLeases is a lease store an instance can be cut off from. cut
// waits for calls in flight, so what the store holds afterwards is final.
type flakyLeases struct {
	streams.LeaseStore
	mu   sync.RWMutex
	down bool
}

var errUnreachable = errors.New("lease store unreachable")

func (f *flakyLeases) cut() { f.mu.Lock(); f.down = true; f.mu.Unlock() }

func (f *flakyLeases) do(call func() error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.down {
		return errUnreachable
	}
	return call()
}

func (f *flakyLeases) List(ctx context.Context, group, arn string) (snap streams.Snapshot, err error) {
	err = f.do(func() error { snap, err = f.LeaseStore.List(ctx, group, arn); return err })
	return snap, err
}

func (f *flakyLeases) Take(ctx context.Context, seen streams.Lease, owner string, expires time.Time) (l streams.Lease, err error) {
	err = f.do(func() error { l, err = f.LeaseStore.Take(ctx, seen, owner, expires); return err })
	return l, err
}

func (f *flakyLeases) Renew(ctx context.Context, held streams.Lease, expires time.Time) (l streams.Lease, err error) {
	err = f.do(func() error { l, err = f.LeaseStore.Renew(ctx, held, expires); return err })
	return l, err
}

func (f *flakyLeases) Checkpoint(ctx context.Context, held streams.Lease, seq string, expires time.Time) (l streams.Lease, err error) {
	err = f.do(func() error { l, err = f.LeaseStore.Checkpoint(ctx, held, seq, expires); return err })
	return l, err
}

func (f *flakyLeases) Release(ctx context.Context, held streams.Lease) error {
	return f.do(func() error { return f.LeaseStore.Release(ctx, held) })
}

func (f *flakyLeases) Heartbeat(ctx context.Context, group, arn, owner string, expires time.Time) error {
	return f.do(func() error { return f.LeaseStore.Heartbeat(ctx, group, arn, owner, expires) })
}

// tablesClient serves several fake streams, one per table, to one
// subscriber.
type tablesClient map[string]*fakeClient

func (c tablesClient) byARN(arn *string) *fakeClient {
	for _, fc := range c {
		if fc.f.arn == aws.ToString(arn) {
			return fc
		}
	}
	panic("fake: no stream " + aws.ToString(arn))
}

func (c tablesClient) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	fc, ok := c[aws.ToString(in.TableName)]
	if !ok {
		return nil, &ddbtypes.ResourceNotFoundException{Message: aws.String("no table")}
	}
	return fc.DescribeTable(ctx, in)
}

func (c tablesClient) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	return c.byARN(in.StreamArn).DescribeStream(ctx, in)
}

func (c tablesClient) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return c.byARN(in.StreamArn).GetShardIterator(ctx, in)
}

func (c tablesClient) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	table, _, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	return c[table].GetRecords(ctx, in)
}
