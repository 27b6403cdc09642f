package ingest

import (
	"context"
	"strings"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Each signature is checked once per box (docs/ARCHITECTURE.md, "Each
// signature checked once per box"): the own relay
// verifies every event it stores, so an event on its way there is sent
// unverified. The sidecar verifies only what it keeps or acts on alone:
// events for the purgatory, events entering the RejectedIndex, and a
// second, different copy of an id already in flight — so a forged copy
// that arrived first cannot keep the real event out. An `invalid:` OK
// drops the copy and clears its seen mark, so an honest copy can come.

// flight is an id handed to the publisher whose outcome is not known yet.
type flight struct {
	sig string // signature of the copy sent
	// verified: the sidecar checked the copy sent; other copies of the id
	// are dropped as duplicates.
	verified bool
	// alt is a second, different copy that verified, waiting for the sent
	// copy's outcome: the publisher matches OKs by id, so two copies of an
	// id cannot be in flight at once. It is sent if the first is refused.
	alt *nostr.Event
}

// flights tracks the ids in flight to the own relay. Its size is bounded
// by the publisher's queue and window (every entry is a submission
// without an outcome).
type flights struct {
	mu sync.Mutex
	m  map[event.ID]*flight
}

func newFlights() *flights { return &flights{m: make(map[event.ID]*flight)} }

// claim verdicts.
const (
	claimDrop   = iota // seen before: a duplicate
	claimSend          // first copy: marked seen, send it unverified
	claimVerify        // a different copy of an id in flight: verify it first
)

// duplicate tells, before any check, whether a copy of id with signature
// sig is one to drop: seen, and not a different copy of an id in flight.
func (f *flights) duplicate(seen *seenSet, id event.ID, sig string) bool {
	// Under the lock: settle forgets an id and its flight together, so a
	// copy never finds the id seen with no flight while a refused copy is
	// being forgotten.
	f.mu.Lock()
	defer f.mu.Unlock()
	if !seen.Has(id) {
		return false
	}
	fl := f.m[id]
	return fl == nil || fl.verified || fl.alt != nil || fl.sig == sig
}

// claim decides what becomes of a copy of id with signature sig that is
// about to go to the own relay. Marking seen and registering the flight
// happen under one lock, so a second copy always finds the first's flight.
func (f *flights) claim(seen *seenSet, id event.ID, sig string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[id]; fl != nil {
		if fl.verified || fl.alt != nil || fl.sig == sig {
			return claimDrop
		}
		return claimVerify
	}
	if !seen.Mark(id) {
		return claimDrop
	}
	f.m[id] = &flight{sig: sig}
	return claimSend
}

// claimVerified takes a copy whose signature verified (after claimVerify)
// and tells whether to send it now: it waits as the flight's alternative
// while the first copy is in flight, and is sent at once if the id settled
// meanwhile without being marked again.
func (f *flights) claimVerified(seen *seenSet, id event.ID, ev *nostr.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[id]; fl != nil {
		if !fl.verified && fl.alt == nil {
			fl.alt = ev
		}
		return false
	}
	if !seen.Mark(id) {
		return false
	}
	f.m[id] = &flight{sig: ev.Sig, verified: true}
	return true
}

// verified tells whether the copy of id with signature sig in flight is
// one the sidecar checked.
func (f *flights) verified(id event.ID, sig string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.m[id]
	return fl != nil && fl.sig == sig && fl.verified
}

// settle records the outcome of the copy with signature sig. When it was
// refused (not present) and a verified alternative waited, the alternative
// is returned and registered as the id's flight: the caller sends it, or
// calls abandon. forget (an invalid copy) clears the id's seen mark in the
// same step as its flight, when no alternative waits, so an honest copy
// arriving meanwhile is never taken for a duplicate.
func (f *flights) settle(seen *seenSet, id event.ID, sig string, present, forget bool) (alt *nostr.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.m[id]
	if fl == nil || fl.sig != sig {
		if forget && fl == nil {
			seen.Forget(id)
		}
		return nil
	}
	delete(f.m, id)
	if !present && fl.alt != nil {
		f.m[id] = &flight{sig: fl.alt.Sig, verified: true}
		return fl.alt
	}
	if forget {
		seen.Forget(id)
	}
	return nil
}

// abandon forgets the flight of id (an alternative that could not be
// sent); forget clears its seen mark with it, so the id can come again.
func (f *flights) abandon(seen *seenSet, id event.ID, forget bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
	if forget {
		seen.Forget(id)
	}
}

// len is the number of ids in flight.
func (f *flights) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// refusedInvalid tells whether the own relay refused r's event as invalid
// (a bad signature or id, or malformed: NIP-01's "invalid:" prefix).
func refusedInvalid(r publish.Result) bool {
	return r.Outcome == publish.Rejected && relay.ReasonPrefix(strings.ToLower(r.Reason)) == relay.ReasonInvalid
}

// verifySig checks ev's signature (its id was checked on arrival).
func verifySig(ev *nostr.Event) bool {
	ok, err := ev.CheckSignature()
	return ok && err == nil
}

// invalidLabel is the ngit_sync_events_invalid_total reason of an event
// found invalid after it was sent: bad_signature when its signature does
// not verify, else refused_invalid (the own relay's "invalid:" for another
// reason).
func invalidLabel(ev *nostr.Event, r publish.Result) string {
	if !verifySig(ev) {
		return "bad_signature"
	}
	if refusedInvalid(r) {
		return "refused_invalid"
	}
	return "bad_signature"
}

// checkSig verifies ev's signature, counting and logging a failure.
func (h *Handler) checkSig(ev *nostr.Event, relay string) bool {
	if verifySig(ev) {
		return true
	}
	h.m.eventsInvalid.WithLabelValues("bad_signature").Inc()
	h.log.Debug("dropped invalid event", zap.String("relay", relay), zap.String("id", ev.ID), zap.String("reason", "bad_signature"))
	return false
}

// submit hands a deduplicated event to the publisher, as raw (the bytes it
// arrived in) when set and the publisher takes them.
// id is ev's decoded id, which the outcome settles under.
func (h *Handler) submit(ctx context.Context, id event.ID, ev *nostr.Event, raw []byte) {
	done := func(r publish.Result) { h.settle(id, true, ev, r) }
	var err error
	if rp, ok := h.pub.(RawPublisher); ok && raw != nil {
		err = rp.SubmitRaw(ctx, ev, raw, done)
	} else {
		err = h.pub.Submit(ctx, ev, done)
	}
	if err != nil {
		h.settle(id, true, ev, publish.Result{ID: ev.ID, Outcome: publish.Dropped, Err: err})
	}
}
