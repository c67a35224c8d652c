package streams

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// maxErrorBackoff caps the wait between attempts after a failed read.
const maxErrorBackoff = 10 * time.Second

// worker reads one shard while this instance holds its lease: records in
// order, each delivered until acked. Acks are checkpointed in batches
// (SubscriberConfig.CheckpointEvery, CheckpointInterval), at the shard's
// end and before the lease is handed back.
type worker struct {
	st      *stream
	cfg     *SubscriberConfig
	shardID string
	logger  watermill.LoggerAdapter

	// mu serialises lease writes (renewals and checkpoints), each
	// conditioned on the version the previous one returned.
	mu        sync.Mutex
	lease     Lease
	lastWrite time.Time
	// pendingMu guards the acks not yet checkpointed, apart from mu, so
	// an ack never waits for a lease write under way. pendingSeq is the
	// last of them, pending counts them, pendingSince is when the first
	// came.
	pendingMu    sync.Mutex
	pendingSeq   string
	pending      int
	pendingSince time.Time
	// pendingStarted wakes the renewal loop when a batch starts, so it
	// writes the checkpoint when CheckpointInterval has passed.
	pendingStarted chan struct{}
	// validUntil (Unix nanoseconds) is when this instance stops trusting
	// the lease: a tenth of a lease before the expiry it wrote, so it has
	// stopped reading before any other instance may take the shard.
	validUntil atomic.Int64

	// stop asks for a graceful end (the shard handed back to balance
	// instances): no new reads, the delivered record may still be acked
	// (up to CloseTimeout), then the lease is released.
	stop     chan struct{}
	stopOnce sync.Once
	// lost is closed when the lease is no longer ours: stop at once.
	lost     chan struct{}
	lostOnce sync.Once
	// ctx ends on either, and with the subscription (its context or
	// Close, a graceful end too), cutting short reads and waits. Once it
	// has ended, no record is handed out.
	ctx    context.Context
	cancel context.CancelFunc
	// drainBy is when a graceful end stops waiting for the delivered
	// record's verdict: CloseTimeout after the end was first seen, once
	// for the worker, so nothing restarts the wait.
	drainOnce sync.Once
	drainBy   time.Time

	// lastSeq is the last record acked, checkpointed or not (or the
	// lease's checkpoint at start): where an expired iterator resumes.
	// Only the reading goroutine uses it.
	lastSeq string
	// behindSince is the creation time (Unix nanoseconds) of the record
	// being delivered, 0 once a read found no record: the shard's lag is
	// measured from it (Subscriber.Lags).
	behindSince atomic.Int64
}

func newWorker(st *stream, l Lease, expires time.Time) *worker {
	ctx, cancel := context.WithCancel(st.ctx)
	w := &worker{
		st:             st,
		cfg:            st.cfg,
		shardID:        l.ShardID,
		logger:         st.logger.With(watermill.LogFields{"shard_id": l.ShardID}),
		lease:          l,
		lastWrite:      time.Now(),
		pendingStarted: make(chan struct{}, 1),
		stop:           make(chan struct{}),
		lost:           make(chan struct{}),
		ctx:            ctx,
		cancel:         cancel,
		lastSeq:        l.Checkpoint,
	}
	w.validUntil.Store(w.trustUntil(expires).UnixNano())
	return w
}

func (w *worker) trustUntil(expires time.Time) time.Time {
	return expires.Add(-w.cfg.LeaseDuration / 10)
}

func (w *worker) requestStop() {
	w.stopOnce.Do(func() { close(w.stop); w.cancel() })
}

func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *worker) markLost() {
	w.lostOnce.Do(func() { close(w.lost); w.cancel() })
}

func (w *worker) isLost() bool {
	select {
	case <-w.lost:
		return true
	default:
		return false
	}
}

func (w *worker) valid() bool {
	return !w.isLost() && time.Now().UnixNano() < w.validUntil.Load()
}

func (w *worker) run() {
	exitRenew, renewDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renew(exitRenew)
	}()
	w.read()
	close(exitRenew)
	<-renewDone
	w.cancel()
	// A graceful end puts every ack on record before the hand-over, so
	// the next holder re-reads nothing.
	if !w.isLost() {
		w.flush()
	}
	if w.isLost() {
		w.logger.Info("Stopped reading shard: its lease is no longer ours", nil)
		return
	}
	w.release()
}

// renew extends the lease every RenewInterval (unless a write just did),
// writes a batch of acks once it is CheckpointInterval old, and declares
// the lease lost the moment it can no longer be trusted. A renewal
// carries the acks pending at the time: one write instead of two.
func (w *worker) renew(exit <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	// failed holds off the batch's deadline after a failed write: the
	// next attempt comes a RenewInterval later, not at once.
	failed := false
	for {
		wait := w.cfg.RenewInterval
		if d := time.Until(time.Unix(0, w.validUntil.Load())); d < wait {
			wait = max(d, 0)
		}
		w.pendingMu.Lock()
		if w.pending > 0 && !failed {
			wait = max(min(wait, time.Until(w.pendingSince.Add(w.cfg.CheckpointInterval))), 0)
		}
		w.pendingMu.Unlock()
		timer.Reset(wait)
		select {
		case <-exit:
			return
		case <-w.lost:
			return
		case <-w.pendingStarted:
			timer.Stop()
			continue
		case <-timer.C:
		}
		if !w.valid() {
			w.logger.Error("Shard lease lapsed without renewal; stopped reading the shard", nil, nil)
			w.markLost()
			return
		}
		w.mu.Lock()
		recent := time.Since(w.lastWrite) < w.cfg.RenewInterval/2
		w.mu.Unlock()
		w.pendingMu.Lock()
		due := w.pending > 0 && time.Since(w.pendingSince) >= w.cfg.CheckpointInterval
		w.pendingMu.Unlock()
		if recent && !due {
			continue
		}
		err := w.write(false)
		failed = err != nil
		if errors.Is(err, ErrLeaseLost) {
			w.logger.Info("Shard lease taken over by another instance; stopped reading the shard", nil)
			return
		}
		if err != nil {
			w.logger.Error("Cannot renew shard lease (or write its checkpoint); retrying until it lapses", err, nil)
		}
	}
}

// acked notes the ack of seq, and reports whether a batch is full:
// CheckpointEvery acks since the last checkpoint.
func (w *worker) acked(seq string) (full bool) {
	w.lastSeq = seq
	w.pendingMu.Lock()
	defer w.pendingMu.Unlock()
	if w.pending == 0 {
		w.pendingSince = time.Now()
		select {
		case w.pendingStarted <- struct{}{}:
		default:
		}
	}
	w.pendingSeq = seq
	w.pending++
	return w.pending >= w.cfg.CheckpointEvery
}

// flush checkpoints the pending acks, if any.
func (w *worker) flush() {
	w.pendingMu.Lock()
	pending := w.pending > 0
	w.pendingMu.Unlock()
	if pending {
		w.checkpoint(false)
	}
}

// write runs one conditional lease write with the lease as last written,
// and keeps what it returns: the ShardEnd checkpoint if end, else the
// checkpoint of the pending acks if any, else a renewal. Every write
// extends the lease. Acks that come while it is under way stay pending.
// ErrLeaseLost marks the lease lost.
func (w *worker) write(end bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.isLost() {
		return ErrLeaseLost
	}
	start := time.Now()
	w.pendingMu.Lock()
	seq, written := w.pendingSeq, w.pending
	w.pendingMu.Unlock()
	expires := start.Add(w.cfg.LeaseDuration)
	// Not w.ctx: a checkpoint must not be cut short by a stop request.
	ctx, cancel := context.WithTimeout(context.Background(), w.st.writeTimeout())
	defer cancel()
	var (
		l   Lease
		err error
	)
	switch {
	case end:
		l, err = w.cfg.Leases.Checkpoint(ctx, w.lease, ShardEnd, expires)
	case written > 0:
		l, err = w.cfg.Leases.Checkpoint(ctx, w.lease, seq, expires)
	default:
		l, err = w.cfg.Leases.Renew(ctx, w.lease, expires)
	}
	if errors.Is(err, ErrLeaseLost) {
		w.markLost()
		return err
	}
	if err != nil {
		return err
	}
	w.lease = l
	w.lastWrite = start
	w.validUntil.Store(w.trustUntil(expires).UnixNano())
	w.pendingMu.Lock()
	defer w.pendingMu.Unlock()
	switch {
	case end || w.pending == written:
		w.pendingSeq, w.pending = "", 0
	default:
		// The acks that came during the write: the first of them came
		// after it started.
		w.pending -= written
		w.pendingSince = start
	}
	return nil
}

func (w *worker) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.st.writeTimeout())
	defer cancel()
	if err := w.cfg.Leases.Release(ctx, w.lease); err != nil {
		w.logger.Info("Cannot release shard lease; another instance takes the shard when it lapses", watermill.LogFields{"err": err.Error()})
	}
	w.markLost()
}

// read delivers the shard's records from the checkpoint on, until the
// shard ends, the worker is stopped, or the lease is lost.
func (w *worker) read() {
	iter, ok := w.reposition()
	backoff := w.cfg.PollInterval
	for ok {
		if iter == nil {
			w.finish()
			return
		}
		if w.ctx.Err() != nil {
			return
		}
		if !w.valid() {
			w.markLost()
			return
		}
		out, err := w.cfg.Streams.GetRecords(w.ctx, &dynamodbstreams.GetRecordsInput{
			ShardIterator: iter,
			Limit:         aws.Int32(w.cfg.BatchSize),
		})
		var (
			expired  *types.ExpiredIteratorException
			trimmed  *types.TrimmedDataAccessException
			notFound *types.ResourceNotFoundException
		)
		switch {
		case err == nil:
		case w.ctx.Err() != nil:
			return
		case errors.As(err, &expired):
			// Iterators last 15 minutes; a slow handler outlives one.
			// The new one starts after the last acked record.
			w.logger.Debug("Shard iterator expired; renewing it", watermill.LogFields{"after_sequence_number": w.lastSeq})
			iter, ok = w.reposition()
			continue
		case errors.As(err, &trimmed):
			w.trimmed(err)
			iter, ok = w.reposition()
			continue
		case errors.As(err, &notFound):
			w.gone(err)
			w.finish()
			return
		default:
			w.logger.Error("Cannot read shard; retrying", err, watermill.LogFields{"retry_in": backoff.String()})
			ok = w.sleep(backoff)
			backoff = min(2*backoff, maxErrorBackoff)
			continue
		}
		backoff = w.cfg.PollInterval
		if len(out.Records) == 0 {
			w.behindSince.Store(0) // caught up
		}
		for _, raw := range out.Records {
			if !w.deliver(raw) {
				return
			}
			if w.acked(sequenceNumber(raw)) && !w.checkpoint(false) {
				return
			}
		}
		iter = out.NextShardIterator
		if iter != nil && len(out.Records) == 0 {
			ok = w.sleep(w.cfg.PollInterval)
		}
	}
}

// reposition gets a new iterator (see iterator). ok is false when reading
// must end: the worker is stopping, or the shard is gone (then finished).
func (w *worker) reposition() (iter *string, ok bool) {
	iter, err := w.iterator()
	if errors.Is(err, errShardGone) {
		w.finish()
	}
	return iter, err == nil
}

var errShardGone = errors.New("shard no longer in the stream")

// iterator positions a new iterator after w.lastSeq, or at the shard's
// oldest record if nothing was read yet or what follows lastSeq was
// trimmed (reported).
func (w *worker) iterator() (*string, error) {
	backoff := w.cfg.PollInterval
	for {
		in := &dynamodbstreams.GetShardIteratorInput{
			StreamArn:         aws.String(w.st.arn),
			ShardId:           aws.String(w.shardID),
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		}
		if w.lastSeq != "" {
			in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
			in.SequenceNumber = aws.String(w.lastSeq)
		}
		out, err := w.cfg.Streams.GetShardIterator(w.ctx, in)
		var (
			trimmed  *types.TrimmedDataAccessException
			notFound *types.ResourceNotFoundException
		)
		switch {
		case err == nil:
			return out.ShardIterator, nil
		case w.ctx.Err() != nil:
			return nil, w.ctx.Err()
		case errors.As(err, &trimmed):
			w.trimmed(err)
		case errors.As(err, &notFound):
			w.gone(err)
			return nil, errShardGone
		default:
			w.logger.Error("Cannot get shard iterator; retrying", err, watermill.LogFields{"retry_in": backoff.String()})
			if !w.sleep(backoff) {
				return nil, w.ctx.Err()
			}
			backoff = min(2*backoff, maxErrorBackoff)
		}
	}
}

// trimmed reports that the records after lastSeq are gone, and moves
// lastSeq to the oldest record left: nothing after it was read.
func (w *worker) trimmed(err error) {
	w.st.sub.reportTrimmed(Trimmed{Table: w.st.table, StreamARN: w.st.arn, ShardID: w.shardID, After: w.lastSeq, Err: err})
	w.lastSeq = ""
}

// gone reports a shard the stream dropped while it still had unread
// records for us (or whose stream was deleted).
func (w *worker) gone(err error) {
	w.st.sub.reportTrimmed(Trimmed{Table: w.st.table, StreamARN: w.st.arn, ShardID: w.shardID, After: w.lastSeq, Err: err})
}

// finish marks the shard finished, so its children may be read. ShardEnd
// covers every ack still pending.
func (w *worker) finish() {
	if w.checkpoint(true) {
		w.logger.Info("Shard finished", nil)
	}
}

// deliver hands one record to the subscriber's channel until it is acked,
// delivering it again after a growing backoff when it is nacked. It
// reports false when the worker stopped or lost its lease first.
func (w *worker) deliver(raw types.Record) bool {
	if raw.Dynamodb != nil && raw.Dynamodb.ApproximateCreationDateTime != nil {
		w.behindSince.Store(raw.Dynamodb.ApproximateCreationDateTime.UnixNano())
	}
	rec, payload, err := encode(w.st.table, w.shardID, raw)
	for err != nil {
		// Never skipped: the shard waits, loudly, for a fix.
		w.logger.Error("Cannot convert stream record; the shard waits", err, watermill.LogFields{"event_id": aws.ToString(raw.EventID)})
		if !w.sleep(w.cfg.MaxNackBackoff) {
			return false
		}
		rec, payload, err = encode(w.st.table, w.shardID, raw)
	}
	backoff := w.cfg.NackBackoff
	for {
		if !w.valid() {
			w.markLost()
			return false
		}
		v, handedOut := w.handOut(rec.message(payload))
		if !handedOut {
			return false
		}
		switch v {
		case acked:
			return true
		case abandoned:
			return false
		}
		if !w.sleep(backoff) {
			return false
		}
		backoff = min(2*backoff, w.cfg.MaxNackBackoff)
	}
}

// handOut sends msg on the subscription's channel, unless the worker has
// ended (stopped, lease lost, subscription over), and waits for its
// verdict. The message's context carries the Subscribe context's values
// and is cancelled once the verdict is in or the wait is given up.
//
// An ended worker hands out nothing: the check before the send sees an
// end that came before it, and a select blocked on the send takes
// whichever comes first, the consumer or the end. (A select that finds
// both ready picks at random, which is why the check comes first.)
func (w *worker) handOut(msg *message.Message) (v outcome, handedOut bool) {
	if w.ctx.Err() != nil {
		return abandoned, false
	}
	ctx, cancel := context.WithCancel(w.st.msgCtx)
	defer cancel()
	msg.SetContext(ctx)
	select {
	case w.st.out <- msg:
	case <-w.ctx.Done():
		return abandoned, false
	}
	return w.verdict(msg), true
}

type outcome int

const (
	acked outcome = iota
	nacked
	abandoned
)

// verdict waits for msg to be acked or nacked. Once the worker ends
// gracefully (handed back, subscription over) it still waits, until the
// worker's drain deadline, for the verdict; with the lease lost it gives
// up at once (the record's checkpoint could not be written anyway).
func (w *worker) verdict(msg *message.Message) outcome {
	ended := w.ctx.Done()
	var drain <-chan time.Time
	for {
		select {
		case <-msg.Acked():
			return acked
		case <-msg.Nacked():
			return nacked
		case <-w.lost:
			return abandoned
		case <-ended:
			if w.isLost() {
				return abandoned
			}
			ended = nil
			t := time.NewTimer(time.Until(w.drainDeadline()))
			defer t.Stop()
			drain = t.C
		case <-drain:
			w.logger.Info("Delivered record not acked within CloseTimeout; it will be delivered again", watermill.LogFields{"message_uuid": msg.UUID})
			return abandoned
		}
	}
}

// drainDeadline is CloseTimeout after the first time it is asked for:
// when the worker's end was first seen.
func (w *worker) drainDeadline() time.Time {
	w.drainOnce.Do(func() { w.drainBy = time.Now().Add(w.cfg.CloseTimeout) })
	return w.drainBy
}

func (w *worker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// checkpoint records the pending acks (or ShardEnd if end) for the
// shard, retrying a failing store as long as the lease can be trusted: no
// further record is read before a full batch is on record.
func (w *worker) checkpoint(end bool) bool {
	backoff := 50 * time.Millisecond
	for {
		err := w.write(end)
		if err == nil {
			return true
		}
		if errors.Is(err, ErrLeaseLost) {
			w.logger.Info("Shard lease lost before checkpoint; the records acked since the last one will be delivered again by the new owner", nil)
			return false
		}
		w.logger.Error("Cannot checkpoint; retrying", err, nil)
		if !w.valid() {
			w.markLost()
			return false
		}
		select {
		case <-time.After(backoff):
		case <-w.lost:
			return false
		}
		backoff = min(2*backoff, w.cfg.RenewInterval)
	}
}
