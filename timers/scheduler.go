// Package timers runs the durable timer service's background side: each
// instance claims a share of the timer shards, and for each shard it owns
// loads the timers coming due and sends timer.due for each on time. The
// callbacks run in the timer.due handler (handlers/timer.go).
package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"transit/internal/balance"
	"transit/messages"
	"transit/store"
)

// Config tunes a Scheduler.
type Config struct {
	// Shards is the number of timer shards; every instance must agree.
	Shards int
	// Lease is how long a shard claim lasts without renewal; a dead
	// instance's shards are taken over after it. Claims are renewed every
	// Lease/3.
	Lease time.Duration
	// PollInterval is how often an owned shard is read for timers coming
	// due; timers due up to two intervals ahead are loaded, so they fire
	// on time rather than up to an interval late.
	PollInterval time.Duration
	// MaxOutstanding bounds the firings this instance has sent and not
	// yet seen finish; later ones wait for the next poll. It keeps the
	// timer queue about as deep as the consumers can take soon, so a
	// burst of due timers waits here, in due order, not in the queue.
	MaxOutstanding int
	// OwnerID names this instance in the shard records; unique per process.
	OwnerID string
	// Metadata describes this instance for operators (JSON).
	Metadata string
}

// shardStore is the part of the store the scheduler uses.
type shardStore interface {
	Shards(ctx context.Context, n int) ([]store.Shard, error)
	ShardVersion(ctx context.Context, shard int) (int64, error)
	ClaimShard(ctx context.Context, seen store.Shard, owner, metadata string, at time.Time) (store.Shard, error)
	RenewShard(ctx context.Context, held store.Shard, at time.Time) (store.Shard, error)
	ReleaseShard(ctx context.Context, held store.Shard) error
	DueTimers(ctx context.Context, shard int, before time.Time) ([]store.Timer, error)
}

// Due is one firing to send as timer.due, in the chain of the
// timer.create that armed the timer (no cause for a timer written before
// chains were recorded).
type Due struct {
	Payload messages.TimerDuePayload
	Cause   messages.Cause
}

// DueFunc sends timer.due for each firing given (at most ten).
type DueFunc func(ctx context.Context, due []Due) error

// defaultMaxOutstanding applies when Config.MaxOutstanding is not set.
const defaultMaxOutstanding = 100

// Firings due at the same moment are sent ten to a request by a few
// senders. A sender gathers for up to dueLinger after its first firing,
// one sender at a time: a poll that frees held firings, or timers due in
// the same millisecond, arrive a few microseconds apart, and taking only
// what was already waiting split them into batches of one or two.
const (
	dueSenders   = 4
	dueBatchSize = 10
	dueLinger    = 5 * time.Millisecond
)

// dueRequest is one firing to send; done learns how the send went.
type dueRequest struct {
	due  Due
	done func(error)
}

// Scheduler owns a share of the timer shards and fires their timers.
type Scheduler struct {
	cfg    Config
	store  shardStore
	due    DueFunc
	logger *slog.Logger

	mu          sync.Mutex
	owned       map[int]*poller
	outstanding int // firings sent and not yet seen finish, across pollers
	pollers     sync.WaitGroup
	queue       chan dueRequest
	// gathering lets one sender at a time gather a batch (gather).
	gathering sync.Mutex
	// balanced is when the last balance round succeeded (Unix nanoseconds).
	balanced atomic.Int64
}

// NewScheduler returns a scheduler; Run starts it.
func NewScheduler(cfg Config, st shardStore, due DueFunc, logger *slog.Logger) *Scheduler {
	if st == nil || due == nil || logger == nil {
		panic("timers: NewScheduler needs a store, a due function and a logger")
	}
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = defaultMaxOutstanding
	}
	return &Scheduler{cfg: cfg, store: st, due: due, logger: logger.With("owner", cfg.OwnerID),
		owned: map[int]*poller{}, queue: make(chan dueRequest, dueBatchSize*dueSenders)}
}

// ShardOf is the shard a timer belongs to.
func (s *Scheduler) ShardOf(timerID string) int { return store.ShardOf(timerID, s.cfg.Shards) }

// Version is the shard version a timer write must be conditioned on: the
// one this instance holds if it owns the shard, else the stored one.
func (s *Scheduler) Version(ctx context.Context, shard int) (int64, error) {
	if v, ok := s.heldVersion(shard); ok {
		return v, nil
	}
	return s.store.ShardVersion(ctx, shard)
}

// Moved tells the scheduler a write at version was refused because the
// shard moved on: if this instance owns it at that version, its claim is
// stale and it stops serving the shard at once.
func (s *Scheduler) Moved(shard int, version int64) {
	if v, ok := s.heldVersion(shard); ok && v == version {
		s.drop(shard, "a write found the shard claimed by another owner")
	}
}

// Scheduled tells the scheduler a timer was written: if this instance
// owns its shard and it is due soon, the shard is read now rather than at
// the next poll.
func (s *Scheduler) Scheduled(shard int, executeAt time.Time) {
	if time.Until(executeAt) > s.lookahead() {
		return
	}
	s.mu.Lock()
	p := s.owned[shard]
	s.mu.Unlock()
	if p != nil {
		p.kick()
	}
}

func (s *Scheduler) heldVersion(shard int) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.owned[shard]; p != nil {
		return p.shard.Version, true
	}
	return 0, false
}

func (s *Scheduler) lookahead() time.Duration { return 2 * s.cfg.PollInterval }

// Balanced reports whether a balance round read every shard record
// within the last lease: the scheduler reaches its table. A renewal or
// claim refused in that round is logged, and does not count against it.
func (s *Scheduler) Balanced() bool {
	return time.Since(time.Unix(0, s.balanced.Load())) < s.cfg.Lease
}

// Owned lists the shards this instance serves, sorted.
func (s *Scheduler) Owned() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int, 0, len(s.owned))
	for id := range s.owned {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// Run claims, renews and balances shards until ctx ends, then stops
// every poller and releases its shards so others take them at once.
func (s *Scheduler) Run(ctx context.Context) {
	var senders sync.WaitGroup
	defer senders.Wait()
	for range dueSenders {
		senders.Go(func() { s.send(ctx) })
	}
	tick := time.NewTicker(s.cfg.Lease / 3)
	defer tick.Stop()
	for {
		if err := s.balance(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("Timer shard balance failed; retrying next tick", "error", err)
		} else if err == nil {
			s.balanced.Store(time.Now().UnixNano())
		}
		select {
		case <-ctx.Done():
			s.releaseAll()
			return
		case <-tick.C:
		}
	}
}

// balance renews held claims, drops lost ones, and claims or hands back
// shards towards an even share between the live owners.
func (s *Scheduler) balance(ctx context.Context) error {
	records, err := s.store.Shards(ctx, s.cfg.Shards)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, id := range s.Owned() {
		s.renew(ctx, records[id], now)
	}
	held := s.Owned()
	live := map[string]int{s.cfg.OwnerID: len(held)}
	var free []store.Shard
	for _, r := range records {
		switch {
		case r.Owner == s.cfg.OwnerID && slices.Contains(held, r.ShardID):
		case r.Owner == "" || r.Owner == s.cfg.OwnerID || r.Lapsed(s.cfg.Lease, now):
			free = append(free, r)
		default:
			live[r.Owner]++
		}
	}
	plan := balance.Round(s.cfg.OwnerID, live, s.cfg.Shards)
	if plan.Shed > 0 {
		for _, id := range held[len(held)-plan.Shed:] {
			s.release(ctx, id, "handing back above an even share")
		}
		return nil
	}
	taken := 0
	for _, r := range free {
		if taken >= plan.Take {
			break
		}
		if s.claim(ctx, r, now) {
			held = append(held, r.ShardID)
			taken++
		}
	}
	if len(held) < plan.Share.Low && plan.Donor != "" && plan.Donor != s.cfg.OwnerID {
		// No free shard: take one from the owner holding most above the
		// share. A newcomer holds nothing, so nobody else knows it exists
		// yet to hand one back.
		if r, ok := lastOf(records, plan.Donor); ok && s.claim(ctx, r, now) {
			s.logger.Info("Took a timer shard from an owner above its share", "shard", r.ShardID, "from", r.Owner)
		}
	}
	return nil
}

// lastOf is owner's highest-numbered shard.
func lastOf(records []store.Shard, owner string) (store.Shard, bool) {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Owner == owner {
			return records[i], true
		}
	}
	return store.Shard{}, false
}

func (s *Scheduler) claim(ctx context.Context, seen store.Shard, now time.Time) bool {
	sh, err := s.store.ClaimShard(ctx, seen, s.cfg.OwnerID, s.cfg.Metadata, now)
	if err != nil {
		if !errors.Is(err, store.ErrShardMoved) && ctx.Err() == nil {
			s.logger.Warn("Cannot claim timer shard", "shard", seen.ShardID, "error", err)
		}
		return false
	}
	s.logger.Info("Claimed timer shard", "shard", sh.ShardID, "version", sh.Version)
	p := newPoller(s, sh)
	s.mu.Lock()
	s.owned[sh.ShardID] = p
	s.mu.Unlock()
	s.pollers.Add(1)
	go func() {
		defer s.pollers.Done()
		p.run()
	}()
	return true
}

// renew extends a held claim, or drops it when the record shows another
// version or owner, or the renewal is refused.
func (s *Scheduler) renew(ctx context.Context, record store.Shard, now time.Time) {
	s.mu.Lock()
	p := s.owned[record.ShardID]
	s.mu.Unlock()
	if p == nil {
		return
	}
	if record.Version != p.shard.Version || record.Owner != s.cfg.OwnerID {
		s.drop(record.ShardID, fmt.Sprintf("claimed by %q at version %d", record.Owner, record.Version))
		return
	}
	sh, err := s.store.RenewShard(ctx, p.shard, now)
	switch {
	case errors.Is(err, store.ErrShardMoved):
		s.drop(record.ShardID, "renewal refused: claimed by another owner")
	case err != nil:
		// Keep serving until the lease lapses: a renewal may fail for
		// a moment (network) and the next tick will try again.
		if p.shard.Lapsed(s.cfg.Lease, now) {
			s.drop(record.ShardID, "lease lapsed without renewal")
		}
	default:
		s.mu.Lock()
		p.shard = sh
		s.mu.Unlock()
	}
}

// drop stops serving a shard at once, without touching its record.
func (s *Scheduler) drop(shard int, why string) {
	s.mu.Lock()
	p := s.owned[shard]
	delete(s.owned, shard)
	s.mu.Unlock()
	if p != nil {
		p.stop()
		s.logger.Warn("Stopped serving timer shard", "shard", shard, "reason", why)
	}
}

// release stops serving a shard and frees its record.
func (s *Scheduler) release(ctx context.Context, shard int, why string) {
	s.mu.Lock()
	p := s.owned[shard]
	delete(s.owned, shard)
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	if err := s.store.ReleaseShard(ctx, p.shard); err != nil && !errors.Is(err, store.ErrShardMoved) {
		s.logger.Warn("Cannot release timer shard; it lapses instead", "shard", shard, "error", err)
		return
	}
	s.logger.Info("Released timer shard", "shard", shard, "reason", why)
}

func (s *Scheduler) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range s.Owned() {
		s.release(ctx, id, "stopping")
	}
	s.pollers.Wait()
}

// enqueue hands a firing to the senders; false if ctx ended first.
func (s *Scheduler) enqueue(ctx context.Context, r dueRequest) bool {
	select {
	case s.queue <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// send sends queued firings, up to ten per request, until ctx ends.
func (s *Scheduler) send(ctx context.Context) {
	for {
		batch, ok := s.gather(ctx)
		if !ok {
			return
		}
		dues := make([]Due, len(batch))
		for i, r := range batch {
			dues[i] = r.due
		}
		err := s.due(ctx, dues)
		if ctx.Err() != nil {
			return // stopping: every poller stops too
		}
		for _, r := range batch {
			r.done(err)
		}
	}
}

// gather takes the next batch of firings: the first to come, and those
// that come within dueLinger of it, up to dueBatchSize. ok is false once
// ctx ends.
func (s *Scheduler) gather(ctx context.Context) (batch []dueRequest, ok bool) {
	s.gathering.Lock()
	defer s.gathering.Unlock()
	select {
	case <-ctx.Done():
		return nil, false
	case r := <-s.queue:
		batch = append(batch, r)
	}
	linger := time.NewTimer(dueLinger)
	defer linger.Stop()
	for len(batch) < dueBatchSize {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		case <-linger.C:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}
