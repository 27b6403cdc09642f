package reposync

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Fetching each missing id from one relay at a time.
//
// A repository lists several relays, and each relay's reconciliation finds
// the same ids missing. Before a job asks a relay for ids (fetch), it
// leaves out the ids the ingest handler already has (Settled) and the ids
// another job's fetching REQ has claimed; it claims the rest, one claim
// per REQ. When a REQ ends its claims resolve: the ids it delivered are
// done, the others (the REQ failed, the connection dropped, or the relay
// returned less than it reconciled) are fetched by the jobs that deferred
// to it. A job waits for the claims it deferred to (at most
// NegConfig.ClaimWait, on the engine's clock) after its own REQs, then
// fetches what is still missing itself, no longer deferring: its fetch is
// not done while any of its ids is unresolved.
//
// A claimant's delivery counts once its events went to the ingest
// handler, and an id the handler has seen is not fetched again even while
// its copy is on its way to the own relay. So a copy the handler drops (an
// id that does not match its content) or the own relay refuses
// (`invalid:`, a forged signature) is not replaced by another relay's copy
// in the same sync: its seen mark is cleared and the next reconciliation
// with any relay that holds it finds it missing again. (Fetching every id
// from every relay, the price of replacing it at once, is what this
// avoids.)

// fetch asks for ids in batches, up to slots REQs at once (more when ctx
// carries a borrower with slots to lend), and retries ids the relay did
// not return once before giving up on them. Ids the handler already has,
// and ids another fetch has claimed, are not asked for (fetchclaims.go):
// the first round defers to the claimant and waits for it; what it did not
// deliver is fetched in the rounds after, which defer to no one. rec, when
// set, learns of the ids another fetch delivered.
func (s *NegSyncer) fetch(ctx context.Context, c *relay.Conn, ids []string, slots int, emit Emit, rec *fetchRecorder) error {
	if len(ids) == 0 {
		return nil
	}
	slots = max(slots, 1)
	got := newSyncSet()
	counting := func(ctx context.Context, in ingest.Incoming) error {
		if !got.add(in.Event.ID) {
			return nil
		}
		s.m.fetched.Inc()
		return emit(ctx, in)
	}
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
		plan := s.claims.take(missing, per, s.Settled, round > 0)
		elsewhere(plan.settled)
		s.m.skipped.WithLabelValues("seen").Add(float64(len(plan.settled)))
		if len(plan.deferred) > 0 {
			// The deferred ids get two rounds of their own if their
			// claim fails.
			rounds = 3
			for _, d := range plan.deferred {
				s.m.skipped.WithLabelValues("claimed").Add(float64(len(d)))
			}
		}
		if err := s.fetchBatches(ctx, c, plan.mine, slots, counting, got); err != nil {
			return err
		}
		w := waitClaims(ctx, s.Clock, s.cfg.ClaimWait, plan.deferred)
		if err := ctx.Err(); err != nil {
			return err
		}
		elsewhere(w.delivered)
		s.m.refetched.WithLabelValues("failed").Add(float64(len(w.failed)))
		s.m.refetched.WithLabelValues("timeout").Add(float64(len(w.timedOut)))
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

// fetchBatches sends the REQs of bs, up to slots at once (more with a
// borrower), and resolves each one's claims as it ends: got tells what it
// delivered. Every claim is resolved, also when ctx ends.
func (s *NegSyncer) fetchBatches(ctx context.Context, c *relay.Conn, bs []*claimBatch, slots int, emit Emit, got *syncSet) error {
	sem := make(chan struct{}, slots)
	var wg sync.WaitGroup
	lend := borrowerFrom(ctx)
	for i, b := range bs {
		// A slot of our own, else one the relay lends (fetchslots.go),
		// else wait for one of our own.
		release := func() { <-sem }
		select {
		case sem <- struct{}{}:
		default:
			if lend != nil && lend.borrow() {
				release = lend.giveBack
				break
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, b := range bs[i:] {
					s.claims.resolve(b, got.has)
				}
				wg.Wait()
				return ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			// A failed REQ leaves its ids missing: the next round asks
			// again, and the claim's waiters fetch them.
			_, _ = s.pager.fetch(ctx, c, nostr.Filter{IDs: b.ids, Limit: len(b.ids)}, emit)
			s.claims.resolve(b, got.has)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// fetchClaims is the claim table shared by the fetches of all relays: id →
// the fetching REQ that claimed it. Entries leave as their REQ ends.
type fetchClaims struct {
	mu sync.Mutex
	m  map[[32]byte]*claimBatch
}

func newFetchClaims() *fetchClaims { return &fetchClaims{m: map[[32]byte]*claimBatch{}} }

// claimBatch is one fetching REQ's claim on its ids.
type claimBatch struct {
	ids  []string   // asked for, in order
	keys [][32]byte // the claimed ones' binary ids (ids that decode)
	done chan struct{}
	// missed are the claimed ids the REQ did not deliver; set before done
	// is closed.
	missed map[[32]byte]struct{}
}

// claimPlan is what one fetch round does with its ids.
type claimPlan struct {
	// mine are the REQs to send, their ids claimed.
	mine []*claimBatch
	// deferred are ids another REQ claimed, by claim.
	deferred map[*claimBatch][]string
	// settled are ids the handler already has.
	settled []string
}

// len is the number of claims in the table.
func (t *fetchClaims) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// take plans a round over ids: ids settled (nil: none) are left out, ids
// claimed by another REQ are deferred unless force, the rest are claimed
// in REQs of per ids.
func (t *fetchClaims) take(ids []string, per int, settled func([32]byte) bool, force bool) claimPlan {
	per = max(per, 1)
	var p claimPlan
	var cur *claimBatch
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		var k [32]byte
		ok := len(id) == 64
		if ok {
			_, err := hex.Decode(k[:], []byte(id))
			ok = err == nil
		}
		if ok && settled != nil && settled(k) {
			p.settled = append(p.settled, id)
			continue
		}
		if ok {
			if other := t.m[k]; other != nil && !force {
				if p.deferred == nil {
					p.deferred = map[*claimBatch][]string{}
				}
				p.deferred[other] = append(p.deferred[other], id)
				continue
			}
		}
		if cur == nil || len(cur.ids) >= per {
			cur = &claimBatch{done: make(chan struct{})}
			p.mine = append(p.mine, cur)
		}
		cur.ids = append(cur.ids, id)
		if ok && t.m[k] == nil {
			t.m[k] = cur
			cur.keys = append(cur.keys, k)
		}
	}
	return p
}

// resolve ends b's claims once its REQ ended: delivered tells which ids
// it delivered. Waiters wake.
func (t *fetchClaims) resolve(b *claimBatch, delivered func(id string) bool) {
	t.mu.Lock()
	for _, k := range b.keys {
		if t.m[k] == b {
			delete(t.m, k)
		}
		if !delivered(hex.EncodeToString(k[:])) {
			if b.missed == nil {
				b.missed = map[[32]byte]struct{}{}
			}
			b.missed[k] = struct{}{}
		}
	}
	b.keys = nil
	t.mu.Unlock()
	close(b.done)
}

// claimWait is the outcome of waiting for deferred claims.
type claimWait struct {
	delivered []string // the claimant delivered them
	failed    []string // the claimant did not deliver them
	timedOut  []string // the claim was still open at the deadline
}

// waitClaims waits for the claims of deferred, at most d on clk; ctx ends
// the wait early (the caller checks ctx).
func waitClaims(ctx context.Context, clk clock.Clock, d time.Duration, deferred map[*claimBatch][]string) claimWait {
	var w claimWait
	if len(deferred) == 0 {
		return w
	}
	deadline := clk.After(d)
	expired := false
	for b, ids := range deferred {
		if !expired {
			select {
			case <-b.done:
			case <-deadline:
				expired = true
			case <-ctx.Done():
				expired = true
			}
		}
		select {
		case <-b.done:
		default:
			w.timedOut = append(w.timedOut, ids...)
			continue
		}
		for _, id := range ids {
			var k [32]byte
			_, _ = hex.Decode(k[:], []byte(id)) // deferred ids decode
			if _, miss := b.missed[k]; miss {
				w.failed = append(w.failed, id)
			} else {
				w.delivered = append(w.delivered, id)
			}
		}
	}
	return w
}

// DefaultClaimWait is NegConfig.ClaimWait's default: longer than a
// fetching REQ of a busy relay usually takes, short beside the EOSE
// timeout a stalled one is given.
const DefaultClaimWait = 15 * time.Second
