package timers

import (
	"context"
	"time"

	"transit/messages"
	"transit/store"
)

// resendAfter is how long a firing sent as timer.due may stay unfinished
// before it is sent again (its first message went to the DLQ, say). The
// firing's ID is the same, so a firing that did finish is not repeated.
const resendAfter = 5 * time.Minute

// forgetAfter is how long a sent firing is remembered once its timer no
// longer shows as due.
const forgetAfter = time.Minute

// poller serves one owned shard: it reads the timers coming due every
// poll interval and sends timer.due for each at its execute time.
type poller struct {
	s      *Scheduler
	shard  store.Shard // guarded by s.mu after start
	id     int
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	// firings holds what this poller has scheduled or sent, by firing;
	// only run and the timers it starts touch it, under mu.
	firings map[firingKey]*firing
}

// firingKey is one firing of one timer: a retry or a rescheduling is due
// at another time, a re-created timer has another uuid.
type firingKey struct {
	uuid string
	at   int64
}

type firing struct {
	due    Due
	timer  *time.Timer
	sentAt time.Time // zero until sent
	// outstanding is true from the send until the timer no longer shows
	// as due: the firing counts against Config.MaxOutstanding.
	outstanding bool
	// held is true when it came due while MaxOutstanding firings were
	// outstanding; the next poll sends it.
	held bool
}

func newPoller(s *Scheduler, sh store.Shard) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	return &poller{s: s, shard: sh, id: sh.ShardID, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}), firings: map[firingKey]*firing{}}
}

// stop ends the poller at once: no timer.due is sent for the shard after
// it returns, except one already being sent.
func (p *poller) stop() {
	p.cancel()
	<-p.done
}

func (p *poller) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *poller) run() {
	defer close(p.done)
	defer func() {
		p.s.mu.Lock()
		for _, f := range p.firings {
			f.timer.Stop()
			p.settled(f)
		}
		p.s.mu.Unlock()
	}()
	tick := time.NewTicker(p.s.cfg.PollInterval)
	defer tick.Stop()
	for {
		if err := p.poll(); err != nil && p.ctx.Err() == nil {
			p.s.logger.Warn("Reading due timers failed; retrying next poll", "shard", p.id, "error", err)
		}
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		case <-p.wake:
		}
	}
}

// poll schedules every timer due within the lookahead that is not yet
// scheduled, and forgets firings whose timer has moved on or gone.
func (p *poller) poll() error {
	now := time.Now()
	due, err := p.s.store.DueTimers(p.ctx, p.id, now.Add(p.s.lookahead()))
	if err != nil {
		return err
	}
	seen := make(map[firingKey]bool, len(due))
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.ctx.Err() != nil {
		return nil
	}
	for _, t := range due {
		k := firingKey{t.UUID, t.ExecuteAt.UnixMilli()}
		seen[k] = true
		f := p.firings[k]
		switch {
		case f == nil:
			f = &firing{due: Due{
				Payload: messages.TimerDuePayload{Shard: p.id, TimerID: t.ID, TimerUUID: t.UUID, ExecuteAt: t.ExecuteAt.Time},
				Cause:   messages.Cause{CorrelationID: t.CorrelationID, CausationID: t.CreatedBy},
			}}
			p.firings[k] = f
			f.timer = time.AfterFunc(time.Until(t.ExecuteAt.Time), func() { p.send(k) })
		case f.held:
			f.held = false
			f.timer.Reset(0)
		case !f.sentAt.IsZero() && now.Sub(f.sentAt) > resendAfter:
			p.settled(f)
			f.sentAt = time.Time{}
			f.timer.Reset(0)
		}
	}
	for k, f := range p.firings {
		switch {
		case seen[k]:
		case f.sentAt.IsZero():
			f.timer.Stop() // deleted or moved before it was due
			delete(p.firings, k)
		default:
			p.settled(f)
			if now.Sub(f.sentAt) > forgetAfter {
				// Kept a while after it was sent, so that an index read
				// that still shows the timer does not send it again.
				delete(p.firings, k)
			}
		}
	}
	return nil
}

// settled stops counting f as outstanding; p.s.mu is held.
func (p *poller) settled(f *firing) {
	if f.outstanding {
		f.outstanding = false
		p.s.outstanding--
	}
}

// send queues the firing for sending; if the send fails, the firing is
// forgotten and the next poll schedules it again.
func (p *poller) send(k firingKey) {
	p.s.mu.Lock()
	f := p.firings[k]
	if f != nil && p.s.outstanding >= p.s.cfg.MaxOutstanding {
		f.held = true
		f = nil
	}
	if f != nil {
		f.sentAt, f.outstanding = time.Now(), true
		p.s.outstanding++
	}
	p.s.mu.Unlock()
	if f == nil || p.ctx.Err() != nil {
		return
	}
	p.s.enqueue(p.ctx, dueRequest{due: f.due, done: func(err error) {
		if err == nil || p.ctx.Err() != nil {
			return
		}
		p.s.logger.Warn("Sending timer.due failed; the next poll sends it again", "shard", p.id, "timer_id", f.due.Payload.TimerID, "error", err)
		p.s.mu.Lock()
		if p.firings[k] == f {
			p.settled(f)
			delete(p.firings, k)
		}
		p.s.mu.Unlock()
	}})
}
