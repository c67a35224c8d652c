package streams

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"transit/internal/balance"
)

// stream coordinates one subscribed table's stream: it discovers shards,
// announces this instance, takes the leases of shards that are ready
// (parent finished) and hands shards back towards an even share between
// live instances (balance.Round), and runs one worker per held shard.
type stream struct {
	sub    *Subscriber
	cfg    *SubscriberConfig
	logger watermill.LoggerAdapter
	table  string
	arn    string
	out    chan *message.Message
	// msgCtx is the Subscribe context: every message's context is made
	// from it, so it carries its values and ends with it.
	msgCtx context.Context
	// ctx is the subscription's lifetime: the Subscribe context, also
	// cancelled by Close. Its end stops every worker from handing out
	// records.
	ctx    context.Context
	cancel context.CancelFunc

	// Only the run goroutine touches these.
	shards       map[string]string // shard ID → parent shard ID ("" for none)
	lastDescribe time.Time

	mu      sync.Mutex
	workers map[string]*worker
	wg      sync.WaitGroup
	// kick wakes the coordinator when a worker ends, so a finished
	// parent's children are taken without waiting for the next tick.
	kick chan struct{}
	// drained is closed once the shards are handed back (a drain or the
	// end of the subscription).
	drained chan struct{}
}

func newStream(s *Subscriber, table, arn string, subscribeCtx context.Context) *stream {
	ctx, cancel := context.WithCancel(subscribeCtx)
	return &stream{
		sub:     s,
		cfg:     &s.config,
		logger:  s.logger.With(watermill.LogFields{"table": table, "stream_arn": arn}),
		table:   table,
		arn:     arn,
		out:     make(chan *message.Message),
		msgCtx:  subscribeCtx,
		ctx:     ctx,
		cancel:  cancel,
		workers: map[string]*worker{},
		kick:    make(chan struct{}, 1),
		drained: make(chan struct{}),
	}
}

// start checks, before Subscribe returns, that the stream and the lease
// store answer, so a wrong name or a missing lease table fails there.
func (st *stream) start(ctx context.Context) error {
	if err := st.describe(ctx); err != nil {
		return err
	}
	if _, err := st.cfg.Leases.List(ctx, st.cfg.ConsumerGroup, st.arn); err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	return nil
}

// run coordinates until the subscription ends (its context is cancelled
// or the subscriber closed) or the subscriber drains, then shuts down; a
// drained stream returns, closing its channel, when the subscription ends.
func (st *stream) run() {
	defer st.cancel()
	ticker := time.NewTicker(st.cfg.RenewInterval)
	defer ticker.Stop()
	for {
		if !st.draining() {
			st.balance(st.ctx)
		}
		select {
		case <-ticker.C:
		case <-st.kick:
			// A shard ended: its children may be new to us.
			st.lastDescribe = time.Time{}
		case <-st.sub.draining:
			st.shutdown()
			<-st.ctx.Done()
			return
		case <-st.ctx.Done():
			st.shutdown()
			return
		}
	}
}

// shutdown stops every worker (each already stopped handing out records
// with the subscription's context; each drains and releases its lease) and
// withdraws this instance's heartbeat so the others re-balance at once.
func (st *stream) shutdown() {
	st.stopWorkers()
	st.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), st.writeTimeout())
	defer cancel()
	if err := st.cfg.Leases.Heartbeat(ctx, st.cfg.ConsumerGroup, st.arn, st.cfg.OwnerID, time.Now()); err != nil {
		st.logger.Info("Cannot withdraw heartbeat; the others re-balance once it lapses", watermill.LogFields{"err": err.Error()})
	}
	close(st.drained)
}

// stopWorkers asks every worker to end gracefully.
func (st *stream) stopWorkers() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, w := range st.workers {
		w.requestStop()
	}
}

// draining reports whether the subscriber drains: no shard is taken and
// no worker started from then on.
func (st *stream) draining() bool {
	select {
	case <-st.sub.draining:
		return true
	default:
		return false
	}
}

// writeTimeout bounds one lease store call: well within a lease.
func (st *stream) writeTimeout() time.Duration { return min(10*time.Second, st.cfg.LeaseDuration/2) }

// describe lists the stream's shards, following pagination. The shard map
// is replaced only by a complete listing: a partial one would make a
// parent look trimmed and release its children early.
func (st *stream) describe(ctx context.Context) error {
	shards := map[string]string{}
	var start *string
	for {
		out, err := st.cfg.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn:             aws.String(st.arn),
			ExclusiveStartShardId: start,
		})
		if err != nil {
			return fmt.Errorf("describe stream: %w", err)
		}
		if out.StreamDescription == nil {
			return fmt.Errorf("describe stream: no description")
		}
		for _, sh := range out.StreamDescription.Shards {
			shards[aws.ToString(sh.ShardId)] = aws.ToString(sh.ParentShardId)
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	st.shards = shards
	st.lastDescribe = time.Now()
	return nil
}

// balance is one coordination round.
func (st *stream) balance(ctx context.Context) {
	if time.Since(st.lastDescribe) >= st.cfg.DiscoveryInterval {
		if err := st.describe(ctx); err != nil && ctx.Err() == nil {
			st.logger.Error("Cannot discover shards; using the last known ones", err, nil)
		}
	}
	cfg := st.cfg
	now := time.Now()
	wctx, cancel := context.WithTimeout(ctx, st.writeTimeout())
	defer cancel()
	if err := cfg.Leases.Heartbeat(wctx, cfg.ConsumerGroup, st.arn, cfg.OwnerID, now.Add(cfg.LeaseDuration)); err != nil {
		if ctx.Err() == nil {
			st.logger.Error("Cannot send heartbeat", err, nil)
		}
		return
	}
	snap, err := cfg.Leases.List(wctx, cfg.ConsumerGroup, st.arn)
	if err != nil {
		if ctx.Err() == nil {
			st.logger.Error("Cannot read leases", err, nil)
		}
		return
	}

	ready := st.ready(snap)
	st.mu.Lock()
	var held []string
	for id, w := range st.workers {
		if !w.stopping() {
			held = append(held, id)
		}
	}
	st.mu.Unlock()
	// The live instances (heartbeat not lapsed) and the ready shards each
	// holds; this instance counts whether or not its heartbeat is read
	// back yet.
	counts := map[string]int{cfg.OwnerID: len(held)}
	for id, until := range snap.Owners {
		if id != cfg.OwnerID && until.After(now) {
			counts[id] = 0
		}
	}
	for _, id := range ready {
		l := snap.Leases[id]
		if _, live := counts[l.Owner]; live && l.Owner != cfg.OwnerID && l.ExpiresAt.After(now) {
			counts[l.Owner]++
		}
	}
	plan := balance.Round(cfg.OwnerID, counts, len(ready))

	if plan.Shed > 0 {
		// Hand back the youngest shards; they drain and release, and an
		// instance below its share takes them.
		sort.Sort(sort.Reverse(sort.StringSlice(held)))
		st.mu.Lock()
		for _, id := range held[:plan.Shed] {
			if w := st.workers[id]; w != nil {
				st.logger.Debug("Handing shard back to balance instances", watermill.LogFields{"shard_id": id})
				w.requestStop()
			}
		}
		st.mu.Unlock()
		return
	}
	limit := len(held) + plan.Take
	for _, id := range ready {
		if len(held) >= limit || ctx.Err() != nil || st.draining() {
			return
		}
		st.mu.Lock()
		_, mine := st.workers[id]
		st.mu.Unlock()
		if mine {
			continue
		}
		l, ok := snap.Leases[id]
		if !ok {
			l = Lease{Group: cfg.ConsumerGroup, StreamARN: st.arn, ShardID: id}
		}
		if l.Version != 0 && l.Owner != "" && l.ExpiresAt.After(now) {
			continue // another instance holds it
		}
		expires := time.Now().Add(cfg.LeaseDuration)
		// Not cut short by the subscription's end: a take the store did
		// but we never heard of would keep the shard from the others
		// until it lapsed; one we heard of is released by the worker.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.writeTimeout())
		taken, err := cfg.Leases.Take(tctx, l, cfg.OwnerID, expires)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				st.logger.Debug("Cannot take shard", watermill.LogFields{"shard_id": id, "err": err.Error()})
			}
			continue
		}
		st.logger.Info("Took shard", watermill.LogFields{"shard_id": id, "checkpoint": taken.Checkpoint})
		st.startWorker(taken, expires)
		held = append(held, id)
	}
}

// ready lists, sorted, the shards that may be read now: not finished, and
// whose parent is finished or gone from the stream.
func (st *stream) ready(snap Snapshot) []string {
	finished := func(id string) bool {
		if _, inStream := st.shards[id]; !inStream {
			return true
		}
		return snap.Leases[id].Checkpoint == ShardEnd
	}
	var ready []string
	for id, parent := range st.shards {
		if !finished(id) && (parent == "" || finished(parent)) {
			ready = append(ready, id)
		}
	}
	// Shard IDs embed their creation time: older shards first.
	sort.Strings(ready)
	return ready
}

func (st *stream) startWorker(l Lease, expires time.Time) {
	w := newWorker(st, l, expires)
	st.mu.Lock()
	st.workers[l.ShardID] = w
	// A take that raced a drain: the worker only hands the lease back.
	if st.draining() {
		w.requestStop()
	}
	st.mu.Unlock()
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		w.run()
		st.mu.Lock()
		delete(st.workers, l.ShardID)
		st.mu.Unlock()
		select {
		case st.kick <- struct{}{}:
		default:
		}
	}()
}
