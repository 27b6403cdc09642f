package ingest

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// TestSettleInvalidForgetsWithItsFlight: an invalid copy's flight and its
// seen mark go in one step, so an honest copy is never a duplicate of an
// id that is no longer in flight; a waiting verified copy takes the flight
// over instead, and the id stays seen.
func TestSettleInvalidForgetsWithItsFlight(t *testing.T) {
	seen := newSeenSet(100, time.Hour, time.Now)
	f := newFlights()
	id := [32]byte{1}
	const forged, honest = "forged-sig", "honest-sig"

	if v := f.claim(seen, id, forged); v != claimSend {
		t.Fatalf("first copy: verdict %d, want send", v)
	}
	if !f.duplicate(seen, id, forged) || f.duplicate(seen, id, honest) {
		t.Fatal("in flight: the same copy must be a duplicate, a different one not")
	}
	if alt := f.settle(seen, id, forged, false, true); alt != nil {
		t.Fatalf("settle returned %v with no alternative waiting", alt)
	}
	if seen.Has(id) || f.duplicate(seen, id, honest) {
		t.Fatal("after an invalid copy settled the id is still seen: an honest copy would be dropped")
	}

	// With a verified copy waiting, it takes the flight over.
	if v := f.claim(seen, id, forged); v != claimSend {
		t.Fatalf("again: verdict %d, want send", v)
	}
	real := &nostr.Event{Sig: honest}
	if f.claimVerified(seen, id, real) {
		t.Fatal("the verified copy was sent while the first is in flight")
	}
	if alt := f.settle(seen, id, forged, false, true); alt != real {
		t.Fatalf("settle returned %v, want the waiting copy", alt)
	}
	if !seen.Has(id) || !f.verified(id, honest) {
		t.Fatal("the waiting copy's flight must keep the id seen and verified")
	}
}
