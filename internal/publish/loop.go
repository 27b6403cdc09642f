package publish

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// maxAuthRetries bounds how often one event is sent again because of
// auth-required answers (across connections).
const maxAuthRetries = 3

// paceDecay: each accepted EVENT shortens the pace by 1/paceDecay (it
// halves in about 140 accepted events); below minPace pacing stops.
const (
	paceDecay = 200
	minPace   = 50 * time.Microsecond
)

// authState is how far NIP-42 got on a connection.
type authState uint8

const (
	authNone authState = iota
	authPending
	authDone
	authFailed
)

// session is one connection to the own relay.
type session struct {
	conn     *relay.Conn
	auth     authState
	timeouts int // consecutive OK timeouts
}

// item is one distinct event the publisher holds.
type item struct {
	ev      *nostr.Event
	raw     []byte // ev as it arrived (nil: encode ev)
	seq     uint64 // submission order
	waiters []func(Result)
	size    int64 // the waiters' bytes of Publisher.bytes

	sends       int
	sendID      uint64 // identifies the latest send
	sentAt      time.Time
	sentAuth    authState // the session's auth state when last sent
	sess        *session  // where it is in flight (nil when queued)
	flying      bool      // in r.inflight
	authRetries int
}

type dialMsg struct {
	conn *relay.Conn
	err  error
}

type authMsg struct {
	sess *session
	err  error
}

// runner is the state owned by Run's goroutine.
type runner struct {
	p   *Publisher
	cfg Config
	log *zap.Logger
	ctx context.Context
	wg  sync.WaitGroup

	items    map[string]*item // every unanswered event
	queue    []*item          // never sent, in submission order
	retry    []*item          // to send again, by submission order
	inflight map[string]*item
	seq      uint64
	sendSeq  uint64
	inBuf    []submission

	sess         *session
	dialFailures int
	lastFailLog  time.Time
	failsNotLog  int
	reconnect    clock.Alarm

	// Congestion control after rate limiting, as in TCP: window is the
	// effective window; below ssthresh it grows by one per answer (doubling
	// per round trip), above it by one per window of answers (caAnswers
	// counts them).
	window    int
	ssthresh  int
	caAnswers int
	rlStreak  int
	holdStart time.Time
	// Pacing: a rate limit is a rate, and a window cannot keep a fast
	// local connection under it, so after a rate-limit episode the
	// publisher spaces its EVENTs by pace: the interval between answered
	// events it measured since the previous episode, or since it last had
	// nothing waiting (paceFrom, paceCount: only saturated stretches say
	// how fast the relay takes events). Each answer shortens pace by
	// 1/paceDecay, so the publisher speeds up again when the relay stops
	// limiting.
	pace       time.Duration
	paceFrom   time.Time
	paceCount  int
	notBefore  time.Time // no EVENT before this: a hold or the pace
	hold       clock.Alarm
	lastRLWarn time.Time

	// okCh receives the answer to every send (relay.Conn.Send); sent
	// holds the sends by age, and okTimer fires for the oldest unanswered
	// one: no goroutine or timer per EVENT.
	okCh    chan relay.OKReply
	sent    []sentRef
	okTimer clock.Alarm
	okArmed bool

	dialCh chan dialMsg
	authCh chan authMsg
}

func newRunner(ctx context.Context, p *Publisher) *runner {
	r := &runner{
		p:         p,
		cfg:       p.cfg,
		log:       p.log,
		ctx:       ctx,
		items:     make(map[string]*item),
		inflight:  make(map[string]*item),
		window:    p.cfg.Window,
		ssthresh:  p.cfg.Window,
		reconnect: p.clock.NewTimer(time.Hour),
		hold:      p.clock.NewTimer(time.Hour),
		okCh:      make(chan relay.OKReply, 2*p.cfg.Window),
		okTimer:   p.clock.NewTimer(time.Hour),
		dialCh:    make(chan dialMsg),
		authCh:    make(chan authMsg),
	}
	r.reconnect.Stop()
	r.hold.Stop()
	r.okTimer.Stop()
	return r
}

func (r *runner) loop() {
	r.connect()
	for {
		r.send()
		r.gauges()
		var connDone <-chan struct{}
		if r.sess != nil {
			connDone = r.sess.conn.Done()
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.p.wake:
			r.takeIncoming()
		case rep := <-r.okCh:
			r.onReply(rep)
		case <-r.okTimer.C():
			r.expire()
		case d := <-r.dialCh:
			r.handleDial(d)
		case a := <-r.authCh:
			r.handleAuth(a)
		case <-connDone:
			r.lost(r.sess.conn.Err())
		case <-r.reconnect.C():
			r.connect()
		case <-r.hold.C():
			// the hold is over; send resumes at the top of the loop
		}
	}
}

// shutdown closes the connection, waits for the helper goroutines and
// reports everything left as Dropped.
func (r *runner) shutdown() {
	r.reconnect.Stop()
	r.hold.Stop()
	r.okTimer.Stop()
	if r.sess != nil {
		r.sess.conn.Close()
		r.sess = nil
	}
	r.wg.Wait()
	r.p.setConnected(false)

	r.p.mu.Lock()
	r.p.state = stateStopped
	r.p.dropped = r.p.outstanding > 0
	close(r.p.stopped)
	r.p.mu.Unlock()
	r.takeIncoming()
	left := make([]*item, 0, len(r.items))
	for _, it := range r.items {
		left = append(left, it)
	}
	slices.SortFunc(left, func(a, b *item) int { return compareSeq(a.seq, b.seq) })
	if len(left) > 0 {
		r.log.Warn("publisher stopped with unacknowledged events", zap.Int("events", len(left)))
	}
	r.queue, r.retry = nil, nil
	clear(r.inflight)
	for _, it := range left {
		r.resolve(it, Result{Outcome: Dropped, Err: ErrStopped})
	}
	r.gauges()
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (r *runner) gauges() {
	q, f := len(r.queue)+len(r.retry), len(r.inflight)
	r.p.queued.Store(int64(q))
	r.p.inFlight.Store(int64(f))
	r.p.m.queue.Set(float64(q))
	r.p.m.inFlight.Set(float64(f))
	r.p.m.window.Set(float64(r.window))
}

func (r *runner) takeIncoming() {
	in := r.p.takeIncoming(r.inBuf)
	for _, s := range in {
		if it := r.items[s.ev.ID]; it != nil {
			it.waiters = append(it.waiters, s.done)
			it.size += s.size
			continue
		}
		r.seq++
		it := &item{ev: s.ev, raw: s.raw, seq: r.seq, waiters: []func(Result){s.done}, size: s.size}
		r.items[s.ev.ID] = it
		r.queue = append(r.queue, it)
	}
	clear(in)
	r.inBuf = in
}

// next pops the next event to send: resends first, in submission order.
func (r *runner) next() *item {
	if len(r.retry) > 0 {
		it := r.retry[0]
		r.retry[0] = nil
		r.retry = r.retry[1:]
		return it
	}
	if len(r.queue) > 0 {
		it := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		return it
	}
	return nil
}

// requeue puts an event back to be sent again, ahead of never-sent events.
func (r *runner) requeue(it *item, reason string) {
	it.sess = nil
	i, _ := slices.BinarySearchFunc(r.retry, it.seq, func(x *item, seq uint64) int { return compareSeq(x.seq, seq) })
	r.retry = slices.Insert(r.retry, i, it)
	r.p.countRetry(reason)
}

// send fills the window.
func (r *runner) send() {
	s := r.sess
	if s == nil || s.auth == authPending || len(r.inflight) >= r.window {
		return
	}
	now := r.p.clock.Now()
	if now.Before(r.notBefore) {
		return // the hold timer is armed
	}
	// One write to the socket for the whole burst. A failed write ends
	// the connection: what it held comes back as unanswered.
	s.conn.Cork()
	defer func() { _ = s.conn.Uncork() }()
	for len(r.inflight) < r.window && s.conn.Err() == nil {
		it := r.next()
		if it == nil {
			// Not saturated: the answers so far say how fast we had
			// events, not how fast the relay takes them.
			r.paceFrom, r.paceCount = time.Time{}, 0
			return
		}
		if !r.transmit(s, it) {
			return
		}
		if r.pace > 0 {
			r.notBefore = now.Add(r.pace)
			r.hold.Reset(r.pace)
			return
		}
	}
}

// authRequired answers the relay's auth-required OK: AUTH (once per
// connection) and send again. Without a signer, or when the EVENT was sent
// after AUTH was already tried on that connection, the event is Rejected.
func (r *runner) authRequired(it *item, reason string) {
	s := it.sess
	if r.p.sign == nil || it.sentAuth == authDone || it.sentAuth == authFailed || it.authRetries >= maxAuthRetries {
		r.answered(it)
		r.resolve(it, Result{Outcome: Rejected, Reason: reason})
		return
	}
	it.authRetries++
	r.requeue(it, reasonAuth)
	if s == r.sess && s.auth == authNone {
		r.startAuth(s)
	}
}

func (r *runner) startAuth(s *session) {
	s.auth = authPending
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.AuthTimeout)
		defer cancel()
		err := authenticate(ctx, s.conn, r.p.sign, r.cfg.AuthTimeout)
		select {
		case r.authCh <- authMsg{sess: s, err: err}:
		case <-r.ctx.Done():
		}
	}()
}

// authenticate waits for the relay's challenge (relays send it before or
// with the auth-required OK, so this is short) and answers it.
func authenticate(ctx context.Context, conn *relay.Conn, sign Signer, timeout time.Duration) error {
	if conn.Challenge() == "" {
		poll := min(max(timeout/50, 5*time.Millisecond), 100*time.Millisecond)
		t := time.NewTicker(poll)
		defer t.Stop()
		for conn.Challenge() == "" {
			select {
			case <-ctx.Done():
				return relay.ErrNoChallenge
			case <-conn.Done():
				return relay.ErrClosed
			case <-t.C:
			}
		}
	}
	return conn.Authenticate(ctx, func(ev *nostr.Event) error { return sign(ev) })
}

func (r *runner) handleAuth(m authMsg) {
	if m.sess != r.sess {
		return
	}
	if m.err != nil {
		m.sess.auth = authFailed
		if !errors.Is(m.err, relay.ErrClosed) {
			r.log.Warn("NIP-42 authentication to the own relay failed", zap.Error(m.err))
		}
		return
	}
	m.sess.auth = authDone
	r.log.Info("authenticated to the own relay (NIP-42)")
}

// resolve reports its outcome to every waiter and forgets it.
func (r *runner) resolve(it *item, res Result) {
	delete(r.items, it.ev.ID)
	res.ID = it.ev.ID
	res.Attempts = it.sends
	r.p.count(res.Outcome)
	// Stats read after Flush returns must already show this item gone.
	r.p.queued.Store(int64(len(r.queue) + len(r.retry)))
	r.p.inFlight.Store(int64(len(r.inflight)))
	for _, done := range it.waiters {
		if done != nil {
			done(res)
		}
	}
	r.p.finish(len(it.waiters), it.size)
	it.waiters, it.size = nil, 0
	// r.sent may point at it until the sends before it are answered (up
	// to OKTimeout): it keeps no bytes meanwhile.
	it.raw = nil
}

// connect starts one dial attempt in the background.
func (r *runner) connect() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialTimeout)
		defer cancel()
		conn, err := r.p.dial(ctx)
		select {
		case r.dialCh <- dialMsg{conn: conn, err: err}:
		case <-r.ctx.Done():
			if conn != nil {
				conn.Close()
			}
		}
	}()
}

func (r *runner) handleDial(d dialMsg) {
	if d.err != nil {
		r.dialFailures++
		r.logFailure("cannot connect to the own relay", d.err)
		r.scheduleReconnect()
		return
	}
	r.sess = &session{conn: d.conn}
	r.p.setConnected(true)
	if r.failsNotLog > 0 || r.dialFailures > 0 {
		r.log.Info("connected to the own relay", zap.Int("failures", r.dialFailures))
	} else {
		r.log.Debug("connected to the own relay")
	}
	r.failsNotLog = 0
}

// lost handles the end of the current connection. The EVENTs in flight on
// it stay counted until their awaiters report: an OK that arrived before the
// end still counts, the others come back as errors (or time out) and are
// sent again after reconnecting.
func (r *runner) lost(err error) {
	s := r.sess
	r.sess = nil
	r.p.setConnected(false)
	r.closeConn(s.conn)
	// A connection that never got an answer counts as a failed attempt, so
	// a relay that accepts and drops at once is not redialled in a loop.
	r.dialFailures++
	r.logFailure("lost the connection to the own relay", err)
	r.scheduleReconnect()
}

// closeConn closes conn without blocking the loop (a websocket close
// handshake with a stalled relay takes seconds).
func (r *runner) closeConn(conn *relay.Conn) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		conn.Close()
	}()
}

func (r *runner) scheduleReconnect() {
	r.reconnect.Reset(r.p.retry.Delay(r.dialFailures, backoff.Rand()))
}

// logFailure logs the first failure of a streak, then at most once per
// Config.FailureLogInterval with the number of failures since.
func (r *runner) logFailure(msg string, err error) {
	now := r.p.clock.Now()
	if r.dialFailures > 1 && now.Sub(r.lastFailLog) < r.cfg.FailureLogInterval {
		r.failsNotLog++
		return
	}
	r.log.Warn(msg, zap.Error(err), zap.Int("failures", r.dialFailures), zap.Int("unlogged", r.failsNotLog))
	r.lastFailLog = now
	r.failsNotLog = 0
}
