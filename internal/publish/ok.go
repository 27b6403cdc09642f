package publish

import (
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// okMsg is the own relay's answer to one send of an item, or its absence.
type okMsg struct {
	id      string
	sendID  uint64
	res     relay.OKResult
	timeout bool
}

// sentRef is one send, in the order of sending, for the OK timeout.
type sentRef struct {
	it     *item
	sendID uint64
}

// onReply takes one answer (or the connection's end) from the shared
// channel every send's OK arrives on, and the others waiting there, so
// the window refills in one burst (one write, see send).
func (r *runner) onReply(rep relay.OKReply) {
	r.handleOK(okMsg{id: rep.ID, sendID: rep.Tag, res: rep.OKResult})
	for range cap(r.okCh) {
		select {
		case rep = <-r.okCh:
			r.handleOK(okMsg{id: rep.ID, sendID: rep.Tag, res: rep.OKResult})
			continue
		default:
		}
		break
	}
	r.trimSent()
}

// stale tells whether a send is answered or superseded.
func stale(ref sentRef) bool { return !ref.it.flying || ref.it.sendID != ref.sendID }

// trimSent drops the answered sends at the head of r.sent.
func (r *runner) trimSent() {
	for len(r.sent) > 0 && stale(r.sent[0]) {
		r.sent[0] = sentRef{}
		r.sent = r.sent[1:]
	}
	if len(r.sent) == 0 {
		r.sent = r.sent[:0:0]
	}
}

// armOKTimer sets the one OK timer for the oldest unanswered send, unless
// it is set: when it fires early (that send was answered meanwhile), it is
// set again for the next.
func (r *runner) armOKTimer() {
	if r.okArmed || len(r.sent) == 0 {
		return
	}
	r.okArmed = true
	r.okTimer.Reset(r.sent[0].it.sentAt.Add(r.cfg.OKTimeout).Sub(r.p.clock.Now()))
}

// expire times out every send older than OKTimeout without an answer.
func (r *runner) expire() {
	r.okArmed = false
	now := r.p.clock.Now()
	for r.trimSent(); len(r.sent) > 0 && now.Sub(r.sent[0].it.sentAt) >= r.cfg.OKTimeout; r.trimSent() {
		ref := r.sent[0]
		ref.it.sess.conn.CancelOK(ref.it.ev.ID, ref.sendID, r.okCh)
		r.handleOK(okMsg{id: ref.it.ev.ID, sendID: ref.sendID, timeout: true})
	}
	r.armOKTimer()
}

func (r *runner) handleOK(m okMsg) {
	it := r.inflight[m.id]
	if it == nil || it.sendID != m.sendID {
		return // answer to an earlier send, or the connection was lost
	}
	delete(r.inflight, m.id)
	it.flying = false
	s := it.sess
	switch {
	case m.timeout:
		r.requeue(it, reasonTimeout)
		s.timeouts++
		if s == r.sess && s.timeouts == r.cfg.MaxTimeouts {
			r.log.Warn("own relay does not answer EVENTs; reconnecting",
				zap.Int("timeouts", s.timeouts), zap.Duration("ok_timeout", r.cfg.OKTimeout))
			// the loop sees Done and requeues the rest
			r.closeConn(s.conn)
		}
	case m.res.Err != nil:
		r.requeue(it, reasonDisconnect)
	default:
		s.timeouts = 0
		r.handleReply(it, m.res.OK, m.res.Reason)
	}
}

func (r *runner) handleReply(it *item, ok bool, reason string) {
	prefix := relay.ReasonPrefix(reason)
	switch {
	case prefix == relay.ReasonDuplicate:
		r.answered(it)
		r.resolve(it, Result{Outcome: Duplicate, Reason: reason})
	case ok && prefix == relay.ReasonPurgatory:
		r.answered(it)
		r.resolve(it, Result{Outcome: Held, Reason: reason})
	case ok:
		r.answered(it)
		r.resolve(it, Result{Outcome: Accepted, Reason: reason})
	case health.ClassifyMessage(reason) == health.SignalRateLimited:
		// The one classifier: "rate-limited:" and the common wordings
		// without it ("too many events", "slow down"), as for NOTICEs.
		r.rateLimited(it, reason)
	case prefix == relay.ReasonAuthRequired:
		r.authRequired(it, reason)
	default:
		r.answered(it)
		r.resolve(it, Result{Outcome: Rejected, Reason: reason})
	}
}

// answered grows the window back after rate limiting and resets the
// failure streaks. Answers to EVENTs sent before the latest hold do not
// count: they are the tail of the burst that was limited.
func (r *runner) answered(it *item) {
	r.dialFailures = 0
	if it.sentAt.Before(r.holdStart) {
		return
	}
	r.rlStreak = 0
	if r.paceFrom.IsZero() {
		r.paceFrom = it.sentAt
	}
	r.paceCount++
	if r.pace > 0 {
		r.pace -= r.pace / paceDecay
		if r.pace < minPace {
			r.pace = 0
		}
	}
	switch {
	case r.window >= r.cfg.Window:
	case r.window < r.ssthresh:
		r.window++
	default:
		r.caAnswers++
		if r.caAnswers >= r.window {
			r.window++
			r.caAnswers = 0
		}
	}
}

// rateLimited holds all sending for a backoff and restarts from a window
// of one, remembering half the window that was too much. The backoff grows
// with each rate-limited answer to an EVENT sent after the previous hold;
// the rest of a burst neither makes it longer nor shrinks ssthresh again.
func (r *runner) rateLimited(it *item, reason string) {
	r.requeue(it, reasonRateLimited)
	if it.sentAt.Before(r.holdStart) {
		return
	}
	if r.window > 1 {
		r.ssthresh = max(r.window/2, 1)
	}
	r.window, r.caAnswers = 1, 0
	r.rlStreak++
	now := r.p.clock.Now()
	// Measure the rate the relay allowed since the previous episode (holds
	// included, so it errs on the slow side) or since the publisher became
	// busy; failed probes in a row do not restart the measurement.
	if r.paceCount > 0 {
		r.pace = now.Sub(r.paceFrom) / time.Duration(r.paceCount)
		r.paceFrom, r.paceCount = now, 0
	}
	d := r.p.retry.Delay(r.rlStreak, backoff.Rand())
	r.holdStart, r.notBefore = now, now.Add(d)
	r.hold.Reset(d)
	if r.rlStreak == 1 || now.Sub(r.lastRLWarn) >= r.cfg.FailureLogInterval {
		r.lastRLWarn = now
		r.log.Warn("own relay is rate limiting; slowing down",
			zap.String("reason", reason), zap.Int("streak", r.rlStreak),
			zap.Duration("hold", d), zap.Int("next_window_limit", r.ssthresh), zap.Duration("pace", r.pace))
	}
}
