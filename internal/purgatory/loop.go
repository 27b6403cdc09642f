package purgatory

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// Run drives the sync queue until ctx ends: every Loop (or when the earliest
// identifier becomes due) it expires old entries and starts a sync for every
// ready identifier in parallel. It waits for running syncs before returning
// nil.
func (p *Purgatory) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.runCtx != nil {
		p.mu.Unlock()
		return errors.New("purgatory: Run called twice")
	}
	p.runCtx = ctx
	p.mu.Unlock()

	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		p.th.Stop()
		p.wg.Wait()
		// The counts since the last summary are not lost on shutdown.
		p.mu.Lock()
		held, since := len(p.byID), p.clock.Now().Sub(p.lastSummary)
		p.lastSummary = p.clock.Now()
		p.mu.Unlock()
		p.summarize(held, since)
	}()
	for {
		p.pass(ctx)
		if timer != nil {
			timer.Stop()
		}
		wait := p.cfg.Loop
		p.mu.Lock()
		if t, ok := p.queue.earliest(); ok {
			if d := t.Sub(p.clock.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		p.mu.Unlock()
		timer = p.clock.AfterFunc(wait, p.nudge)
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		}
	}
}

func (p *Purgatory) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Purgatory) ctx() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runCtx == nil {
		return context.Background()
	}
	return p.runCtx
}

// spawn runs fn in a goroutine Run waits for; false once Run is stopping.
func (p *Purgatory) spawn(fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
	return true
}

// pass expires old entries, logs the summary when one is due
// (summaryEvery) and starts every ready identifier.
func (p *Purgatory) pass(ctx context.Context) {
	now := p.clock.Now()
	p.mu.Lock()
	// Expiry is checked at most once per Loop (passes also run on every Add).
	expire := now.Sub(p.lastExpiry) >= p.cfg.Loop
	if expire {
		p.lastExpiry = now
	}
	for _, e := range p.byID {
		if expire && now.Sub(e.added) >= p.cfg.Expiry {
			if p.removeLocked(e) {
				p.m.expired.WithLabelValues(kindLabel(e.ev.Kind)).Inc()
				p.tally.expired.Add(1)
				p.log.Debug("expired without git data", zap.String("event", e.ev.ID),
					zap.Int("kind", e.ev.Kind), zap.String("identifier", e.identifier))
			}
		}
	}
	ready := p.queue.ready(now)
	var start []string
	for _, id := range ready {
		if !p.pendingLocked(id) {
			p.queue.done(id, true, now)
			continue
		}
		start = append(start, id)
	}
	p.m.queueSize.Set(float64(p.queue.len()))
	var summary time.Duration
	if since := now.Sub(p.lastSummary); since >= p.summaryEvery {
		summary, p.lastSummary = since, now
	}
	held := len(p.byID)
	p.mu.Unlock()
	if summary > 0 {
		p.summarize(held, summary)
	}

	for _, id := range start {
		id := id
		ok := p.spawn(func() {
			complete := p.sync.syncIdentifier(ctx, id)
			p.mu.Lock()
			complete = complete || !p.pendingLocked(id)
			ended := p.queue.done(id, complete, p.clock.Now())
			p.mu.Unlock()
			if ended {
				p.attemptEnded(ctx, id, complete)
			}
			p.nudge()
		})
		if !ok {
			p.mu.Lock()
			p.queue.done(id, false, now)
			p.mu.Unlock()
		}
	}
}

// waitFor records that identifier id waits in domain's throttle queue
// (the syncer's wait): its attempt goes on until the queue lets it go.
func (p *Purgatory) waitFor(id, domain string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue.wait(id, domain)
}

// leftDomain is the throttle's left: domain's queue let identifier id go.
// When it waits nowhere else and no sync of it runs, its attempt ends.
func (p *Purgatory) leftDomain(domain, id string) {
	p.mu.Lock()
	complete := !p.pendingLocked(id)
	ended := p.queue.leave(id, domain, complete, p.clock.Now())
	p.mu.Unlock()
	if ended {
		p.attemptEnded(p.ctx(), id, complete)
		p.nudge()
	}
}

// attemptEnded counts an attempt that ended (a sync that only waited for
// a throttled domain has not ended) and logs a failed one at DEBUG, at
// 1, 2, 4, 8… attempts in a row; the summary line counts them.
func (p *Purgatory) attemptEnded(ctx context.Context, id string, complete bool) {
	p.mu.Lock()
	attempts := 0
	if e := p.queue.entries[id]; e != nil {
		attempts = e.attempts
	}
	p.m.queueSize.Set(float64(p.queue.len()))
	p.mu.Unlock()
	if complete {
		p.m.attempts.WithLabelValues(resultComplete).Inc()
		return
	}
	p.m.attempts.WithLabelValues(resultRetry).Inc()
	if ctx.Err() != nil {
		return
	}
	p.tally.attemptsFailed.Add(1)
	if attempts > 0 && attempts&(attempts-1) == 0 {
		p.log.Debug("git data still missing; will retry", zap.String("identifier", id), zap.Int("attempts", attempts))
	}
}
