package historic

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Fetching each missing id from one relay at a time.
//
// A repository lists several relays, and each relay's reconciliation finds
// the same ids missing. Before a job asks a relay for ids (fetch), it
// leaves out the ids the ingest handler already has (Settled) and the ids
// another job's fetching REQ has claimed; each of its REQs claims the rest
// of its ids as it is sent (a REQ waiting for a subscription slot holds no
// claim, so no other relay waits for ids nobody is asking for). When a REQ
// ends its claims resolve: the ids it delivered (handed to the handler)
// are done, the others (the REQ failed, the connection dropped, the relay
// returned less than it reconciled, or the job's emit dropped an event
// before the handler: outside the job's filter, a failed emit) are fetched
// at once by the jobs that deferred to it. A job waits for the claims it
// deferred to after its own REQs, each at most NegConfig.ClaimWait (on
// the engine's clock) after the claiming REQ was last heard of (sent,
// receiving or handing on an event; not while it waits for the sidecar's
// own pipeline), then fetches what is still missing itself, no
// longer deferring: its fetch is not done while any of its ids is
// unresolved.
//
// What another fetch delivered, and an id the handler had already sent on
// unchecked, counts once the handler settled it (waitFlights, at most
// NegConfig.ClaimWait): a copy the own relay refuses as invalid (a forged
// signature) clears the id's seen mark, and the waiting fetch asks its own
// relay, as it does for what was not settled in time. So skipping a copy
// never lets a forged one keep the real event out.

// fetch asks for ids in batches, up to slots REQs at once (more when ctx
// carries a borrower with slots to lend), and retries ids the relay did
// not return once before giving up on them. Ids the handler settled are
// not asked for; in the first round neither are ids another fetch claimed
// or the handler sent on unchecked: it waits for them, and what was not
// delivered and settled is fetched in the rounds after, which defer to no
// one. rec, when set, learns of the ids had from elsewhere.
func (s *NegSyncer) fetch(ctx context.Context, c *relay.Conn, ids []string, slots int, emit Emit, rec *fetchRecorder) error {
	if len(ids) == 0 {
		return nil
	}
	slots = max(slots, 1)
	tally := NewFetchTally()
	got := tally.got
	ctx = WithDropNote(ctx, tally.Drop)
	counting := tally.Wrap(emit, s.m.fetched.Inc)
	elsewhere := func(ids []string) {
		for _, id := range ids {
			got.add(id)
		}
		rec.elsewhere(ids)
	}
	missing := ids
	per := idsPerReq(s.cfg.FetchBatch, s.limits(c.URL()))
	rounds := 2
	for round := 0; round < rounds && len(missing) > 0; round++ {
		force := round > 0
		plan := s.claims.plan(missing, per, s.IDState, force)
		ferr := s.fetchBatches(ctx, c, &plan, force, slots, counting, tally.Delivered)
		// What the round left out, also when it was cut short.
		s.m.skipped.WithLabelValues("seen").Add(float64(len(plan.settled) + len(plan.inflight)))
		for _, d := range plan.deferred {
			s.m.skipped.WithLabelValues("claimed").Add(float64(len(d)))
		}
		if ferr != nil {
			return ferr
		}
		elsewhere(plan.settled)
		if len(plan.deferred) > 0 || len(plan.inflight) > 0 {
			// The ids left to others get two rounds of their own if
			// they are not delivered.
			rounds = 3
		}
		w := waitClaims(ctx, s.Clock, s.cfg.ClaimWait, plan.deferred)
		if err := ctx.Err(); err != nil {
			return err
		}
		// What others delivered, and what was on its way already, counts
		// once the handler settled it: a copy refused as invalid (forged)
		// is fetched from this relay.
		var refused, late []string
		if s.IDState == nil {
			elsewhere(w.delivered)
		} else {
			var settled []string
			settled, refused, late = waitFlights(ctx, s.Clock, s.cfg.ClaimWait, s.IDState, plan.inflight, w.delivered)
			if err := ctx.Err(); err != nil {
				return err
			}
			elsewhere(settled)
		}
		s.m.refetched.WithLabelValues("failed").Add(float64(len(w.failed) + len(refused)))
		s.m.refetched.WithLabelValues("timeout").Add(float64(len(w.timedOut)))
		s.m.refetched.WithLabelValues("unsettled").Add(float64(len(late)))
		var still []string
		for _, id := range missing {
			if !got.has(id) {
				still = append(still, id)
			}
		}
		missing = still
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %d of %d", errMissingIDs, len(missing), len(ids))
	}
	return nil
}

// fetchBatches sends the REQs of p.mine, up to slots at once (more with a
// borrower), and resolves each one's claims as it ends: got tells what it
// delivered. A REQ claims its ids when it is sent (fetchClaims.claim), not
// while it waits for a slot: ids another REQ claimed meanwhile, or the
// handler took up, are left out of it and added to p. Every claim is
// resolved, also when ctx ends.
func (s *NegSyncer) fetchBatches(ctx context.Context, c *relay.Conn, p *claimPlan, force bool, slots int, emit Emit, delivered func(id string) bool) error {
	sem := make(chan struct{}, slots)
	var wg sync.WaitGroup
	lend := borrowerFrom(ctx)
	bs := p.mine
	for i, b := range bs {
		// A slot of our own, else one the relay lends (slotlender.go),
		// else wait for one of our own.
		release := func() { <-sem }
		select {
		case sem <- struct{}{}:
		default:
			if lend != nil && lend.Borrow() {
				release = lend.GiveBack
				break
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, b := range bs[i:] {
					s.claims.resolve(b, delivered, s.IDState)
				}
				wg.Wait()
				return ctx.Err()
			}
		}
		if !s.claims.claim(b, s.IDState, force, p) {
			release()
			s.claims.resolve(b, delivered, s.IDState)
			continue
		}
		b.note(s.Clock.Now(), false)
		rctx := withReqProgress(ctx, func(held bool) { b.note(s.Clock.Now(), held) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			// A failed REQ leaves its ids missing: the next round asks
			// again, and the claim's waiters fetch them.
			_, _ = s.pager.fetch(rctx, c, nostr.Filter{IDs: b.ids, Limit: len(b.ids)}, emit)
			s.claims.resolve(b, delivered, s.IDState)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// FetchTally is what one fetch had: got, the ids its REQs returned (each
// emitted once), and dropped, those of them its emit dropped before the
// handler (an event outside the job's filter, a failed emit).
type FetchTally struct {
	got, dropped *syncSet
}

func NewFetchTally() *FetchTally { return &FetchTally{got: newSyncSet(), dropped: newSyncSet()} }

// wrap returns emit emitting each id once, counted by count; an id whose
// emit failed counts as dropped.
func (t *FetchTally) Wrap(emit Emit, count func()) Emit {
	return func(ctx context.Context, in ingest.Incoming) error {
		if !t.got.add(in.Event.ID) {
			return nil
		}
		count()
		err := emit(ctx, in)
		if err != nil {
			t.dropped.add(in.Event.ID)
		}
		return err
	}
}

// drop records that id was dropped before the handler.
func (t *FetchTally) Drop(id string) { t.dropped.add(id) }

// delivered tells whether id reached the handler: what a claim on it
// resolves as.
func (t *FetchTally) Delivered(id string) bool { return t.got.has(id) && !t.dropped.has(id) }

// dropNoteKey carries, in a fetch's context, whom an emit tells of an
// event it drops before the handler.
type dropNoteKey struct{}

// WithDropNote returns ctx telling NoteDropped's calls to note.
func WithDropNote(ctx context.Context, note func(id string)) context.Context {
	return context.WithValue(ctx, dropNoteKey{}, note)
}

// NoteDropped tells the fetch running in ctx, if any, that its emit
// dropped id before the handler: a claim on id does not count it as
// delivered, and the fetches waiting for the claim fetch it at once.
func NoteDropped(ctx context.Context, id string) {
	if note, ok := ctx.Value(dropNoteKey{}).(func(string)); ok {
		note(id)
	}
}

// fetchClaims is the claim table shared by the fetches of all relays: id →
// the fetching REQ that claimed it. Entries leave m as their REQ ends; an
// id the REQ delivered that the handler has not taken up yet (still
// queued: unseen) stays in delivered until it is in flight or settled, so
// another fetch does not ask for it again meanwhile (it waits for the
// handler, at most claim_wait, and asks itself if the copy is refused).
type fetchClaims struct {
	mu sync.Mutex
	m  map[event.ID]*claimBatch
	// delivered: id → the ended REQ that delivered it, in two
	// generations of lingerGen ids so memory is bounded.
	delivered, deliveredOld map[event.ID]*claimBatch
}

// lingerGen is how many delivered ids one generation of
// fetchClaims.delivered holds.
const lingerGen = 1 << 15

func newFetchClaims() *fetchClaims { return &fetchClaims{m: map[event.ID]*claimBatch{}} }

// deliveredBy returns the ended REQ that delivered k, if it is still
// remembered. t.mu is held.
func (t *fetchClaims) deliveredBy(k event.ID) *claimBatch {
	if b := t.delivered[k]; b != nil {
		return b
	}
	return t.deliveredOld[k]
}

// forget drops what was remembered of k being delivered. t.mu is held.
func (t *fetchClaims) forget(k event.ID) {
	delete(t.delivered, k)
	delete(t.deliveredOld, k)
}

// linger remembers that b delivered k. t.mu is held.
func (t *fetchClaims) linger(k event.ID, b *claimBatch) {
	if t.delivered == nil || len(t.delivered) >= lingerGen {
		t.deliveredOld, t.delivered = t.delivered, map[event.ID]*claimBatch{}
	}
	t.delivered[k] = b
}

// claimBatch is one fetching REQ's claim on its ids.
type claimBatch struct {
	ids  []string   // asked for, in order
	keys []event.ID // the claimed ones' binary ids (ids that decode)
	done chan struct{}
	// progress is how the REQ is getting on, for its waiters
	// (waitClaims): when it was last heard of (sent, receiving or handing
	// on an event) on the engine's clock, and whether it waits for the
	// sidecar's own pipeline now (held).
	progressMu sync.Mutex
	heard      time.Time
	held       bool
	// missed are the claimed ids the REQ did not deliver; set before done
	// is closed.
	missed map[event.ID]struct{}
}

// note records how b's REQ is getting on at now (reqProgressKey).
func (b *claimBatch) note(now time.Time, held bool) {
	b.progressMu.Lock()
	b.heard, b.held = now, held
	b.progressMu.Unlock()
}

// progress returns when b's REQ was last heard of, and whether it waits
// for the sidecar's own pipeline.
func (b *claimBatch) progress() (time.Time, bool) {
	b.progressMu.Lock()
	defer b.progressMu.Unlock()
	return b.heard, b.held
}

// claimPlan is what one fetch round does with its ids.
type claimPlan struct {
	// mine are the REQs to send; each claims its ids when it is sent
	// (claim).
	mine []*claimBatch
	// deferred are ids another REQ claimed, by claim.
	deferred map[*claimBatch][]string
	// settled are ids the handler already has; inflight are ids it has
	// sent on unchecked, waiting for the own relay's answer.
	settled  []string
	inflight []string
}

// len is the number of claims in the table.
func (t *fetchClaims) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// plan plans a round over ids: ids the handler settled (state, an
// ingest.ID* value; nil: none) are left out, ids in flight and ids claimed
// by another REQ are left to them unless force, the rest are grouped in
// REQs of per ids, which claim them when they are sent (claim).
func (t *fetchClaims) plan(ids []string, per int, state func(event.ID) int, force bool) claimPlan {
	per = max(per, 1)
	var p claimPlan
	var cur *claimBatch
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if !t.classify(id, nil, state, force, &p) {
			continue
		}
		if cur == nil || len(cur.ids) >= per {
			cur = &claimBatch{done: make(chan struct{})}
			p.mine = append(p.mine, cur)
		}
		cur.ids = append(cur.ids, id)
	}
	return p
}

// claim claims b's ids as its REQ is about to be sent: those the handler
// settled or has in flight, or another REQ claimed since the plan, are
// taken out of b and added to p as plan does. A claim is held only while
// its REQ runs, so a fetch waiting for a slot does not make another
// relay's fetch wait for it. It reports whether b has ids left to ask for.
func (t *fetchClaims) claim(b *claimBatch, state func(event.ID) int, force bool, p *claimPlan) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := b.ids[:0]
	for _, id := range b.ids {
		if !t.classify(id, b, state, force, p) {
			continue
		}
		kept = append(kept, id)
		if k, ok := event.DecodeID(id); ok && t.m[k] == nil {
			t.m[k] = b
			b.keys = append(b.keys, k)
		}
	}
	b.ids = kept
	return len(kept) > 0
}

// classify adds id to p if the handler settled it, has it in flight (not
// force) or a REQ other than own claimed it (not force), and reports
// whether it is left to ask for. t.mu is held.
func (t *fetchClaims) classify(id string, own *claimBatch, state func(event.ID) int, force bool, p *claimPlan) bool {
	k, ok := event.DecodeID(id)
	if !ok {
		return true // asked for as it is; the relay answers what it can
	}
	queued := state != nil // unseen by the handler: perhaps still queued
	if state != nil {
		st := state(k)
		if queued = st == ingest.IDUnseen; !queued {
			// Taken up (or dropped as invalid): what an ended REQ
			// delivered is the handler's to tell now.
			t.forget(k)
		}
		switch {
		case st == ingest.IDSettled:
			p.settled = append(p.settled, id)
			return false
		case st == ingest.IDInFlight && !force:
			p.inflight = append(p.inflight, id)
			return false
		}
	}
	if force {
		return true
	}
	other := t.m[k]
	if other == nil && queued {
		// Delivered by an ended REQ, still queued in the handler: its
		// claim resolves as delivered at once.
		other = t.deliveredBy(k)
	}
	if other == nil || other == own {
		return true
	}
	if p.deferred == nil {
		p.deferred = map[*claimBatch][]string{}
	}
	p.deferred[other] = append(p.deferred[other], id)
	return false
}

// resolve ends b's claims once its REQ ended: delivered tells which ids
// it delivered; those the handler has not taken up yet (state, nil: no
// handler) are remembered as delivered (fetchClaims). Waiters wake.
func (t *fetchClaims) resolve(b *claimBatch, delivered func(id string) bool, state func(event.ID) int) {
	t.mu.Lock()
	for _, k := range b.keys {
		if t.m[k] == b {
			delete(t.m, k)
		}
		if !delivered(hex.EncodeToString(k[:])) {
			if b.missed == nil {
				b.missed = map[event.ID]struct{}{}
			}
			b.missed[k] = struct{}{}
		} else if state != nil && state(k) == ingest.IDUnseen {
			t.linger(k, b)
		}
	}
	// An ended REQ that delivered ids the handler has not taken up yet
	// lingers in delivered: it keeps only its done and missed, not the
	// ids it asked for (at scale, megabytes of strings).
	b.keys, b.ids = nil, nil
	t.mu.Unlock()
	close(b.done)
}

// claimWait is the outcome of waiting for deferred claims.
type claimWait struct {
	delivered []string // the claimant delivered them
	failed    []string // the claimant did not deliver them
	timedOut  []string // the claim was still open at the deadline
}

// waitClaims waits for the claims of deferred, each at most d on clk after
// the wait began or after its REQ was last heard of (sent, receiving or
// handing on an event), whichever is later, and for as long as the REQ
// waits for the sidecar's own pipeline (the event budget, the handler's
// queue: a fetch of its own would wait there too). A REQ slowed by
// backpressure is waited for, a stalled relay is not. ctx ends the wait
// early (the caller checks ctx).
func waitClaims(ctx context.Context, clk clock.Clock, d time.Duration, deferred map[*claimBatch][]string) claimWait {
	var w claimWait
	if len(deferred) == 0 {
		return w
	}
	start := clk.Now()
	for b, ids := range deferred {
		if !waitClaim(ctx, clk, d, start, b) {
			w.timedOut = append(w.timedOut, ids...)
			continue
		}
		for _, id := range ids {
			if _, miss := b.missed[hexKey(id)]; miss { // deferred ids decode
				w.failed = append(w.failed, id)
			} else {
				w.delivered = append(w.delivered, id)
			}
		}
	}
	return w
}

// waitClaim waits until b's REQ ended (true), as waitClaims tells.
func waitClaim(ctx context.Context, clk clock.Clock, d time.Duration, start time.Time, b *claimBatch) bool {
	for {
		select {
		case <-b.done:
			return true
		default:
		}
		if ctx.Err() != nil {
			return false
		}
		until := start.Add(d)
		heard, held := b.progress()
		if heard.After(start) {
			until = heard.Add(d)
		}
		wait := until.Sub(clk.Now())
		if held {
			wait = d // looked at again then
		} else if wait <= 0 {
			return false
		}
		select {
		case <-b.done:
			return true
		case <-clk.After(wait):
		case <-ctx.Done():
			return false
		}
	}
}

// waitFlights waits, at most d on clk, until the ingest handler settled
// inflight (ids it had sent on unchecked) and delivered (ids another fetch
// handed to it, perhaps still queued). It returns the ids settled, the ids
// refused (unseen again after they were seen: a copy the own relay refused
// as invalid), and the ids not settled by the deadline.
func waitFlights(ctx context.Context, clk clock.Clock, d time.Duration, state func(event.ID) int, inflight, delivered []string) (settled, refused, late []string) {
	type waiting struct {
		id   string
		key  event.ID
		seen bool
	}
	pending := make([]waiting, 0, len(inflight)+len(delivered))
	for _, id := range inflight {
		pending = append(pending, waiting{id: id, key: hexKey(id), seen: true})
	}
	for _, id := range delivered {
		pending = append(pending, waiting{id: id, key: hexKey(id)})
	}
	if len(pending) == 0 {
		return nil, nil, nil
	}
	deadline := clk.After(d)
	every := min(max(d/300, 5*time.Millisecond), 50*time.Millisecond)
	for {
		keep := pending[:0]
		for _, w := range pending {
			switch state(w.key) {
			case ingest.IDSettled:
				settled = append(settled, w.id)
			case ingest.IDInFlight:
				w.seen = true
				keep = append(keep, w)
			case ingest.IDInvalid:
				// The copy handed on was dropped as invalid (too large,
				// too many tags, a wrong id): fetch it from this relay.
				refused = append(refused, w.id)
			default:
				if w.seen {
					refused = append(refused, w.id)
				} else {
					keep = append(keep, w) // still queued in the handler
				}
			}
		}
		pending = keep
		if len(pending) == 0 {
			return settled, refused, nil
		}
		select {
		case <-clk.After(every):
			continue
		case <-deadline:
		case <-ctx.Done():
		}
		for _, w := range pending {
			late = append(late, w.id)
		}
		return settled, refused, late
	}
}

// hexKey decodes a 64-hex-digit id (zero when it does not decode).
func hexKey(id string) event.ID {
	k, _ := event.DecodeID(id)
	return k
}

// DefaultClaimWait is NegSettings.ClaimWait's default: longer than a
// fetching REQ of a busy relay usually takes, short beside the EOSE
// timeout a stalled one is given.
const DefaultClaimWait = 15 * time.Second
