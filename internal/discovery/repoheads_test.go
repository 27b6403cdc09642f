package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

func headEvent(kind int, pub, d string, at nostr.Timestamp, id string) *nostr.Event {
	return &nostr.Event{Kind: kind, PubKey: pub, CreatedAt: at, ID: id, Tags: nostr.Tags{{"d", d}}}
}

// noteHead keeps one announcement and one state per pubkey and d, the
// newest (at equal created_at the lower id, as NIP-01), and counts a
// change only when what is kept changes; without KeepHeads it keeps none.
func TestNoteHead(t *testing.T) {
	e := &Discovery{deps: Deps{KeepHeads: true}}
	ann := headEvent(nip34.KindRepoAnnouncement, "p", "r", 10, "bb")
	e.noteHead(ann)
	e.noteHead(headEvent(nip34.KindRepoState, "p", "r", 5, "cc"))
	e.noteHead(headEvent(nip34.KindRepoAnnouncement, "p", "r", 9, "00")) // older
	e.noteHead(headEvent(1621, "p", "r", 20, "dd"))                      // not a head
	if len(e.heads) != 2 || e.heads[headKey(ann)].ID != ann.ID || e.headsGen != 2 {
		t.Fatalf("heads %v gen %d", e.heads, e.headsGen)
	}
	e.noteHead(ann) // again: no change
	tie := headEvent(nip34.KindRepoAnnouncement, "p", "r", 10, "aa")
	e.noteHead(tie)
	if e.heads[headKey(ann)].ID != tie.ID || e.headsGen != 3 {
		t.Fatalf("equal created_at, lower id not kept: %v gen %d", e.heads[headKey(ann)], e.headsGen)
	}
	e.dropHeads([]string{ann.ID}) // not the kept one
	if len(e.heads) != 2 {
		t.Fatal("dropHeads removed a head that is not the one dropped")
	}
	e.dropHeads([]string{tie.ID})
	if len(e.heads) != 1 || e.headsGen != 4 || len(e.headList()) != 1 {
		t.Fatalf("after drop: %v gen %d", e.heads, e.headsGen)
	}
	var back nostr.Event
	if err := json.Unmarshal(e.headList()[0].JSON, &back); err != nil || back.ID != "cc" || back.Kind != nip34.KindRepoState || back.CreatedAt != 5 || back.Tags.GetD() != "r" {
		t.Fatalf("kept JSON: %+v %v", back, err)
	}
	off := &Discovery{}
	off.noteHead(ann)
	if off.heads != nil {
		t.Fatal("heads kept without KeepHeads")
	}
}

// restoreHeads keeps the persisted heads by address as they are (their
// JSON shared, not copied) and skips what does not decode to its id.
func TestRestoreHeads(t *testing.T) {
	e := &Discovery{deps: Deps{KeepHeads: true}}
	ann := headEvent(nip34.KindRepoAnnouncement, "p", "r", 10, strings.Repeat("b", 64))
	st := headEvent(nip34.KindRepoState, "p", "r", 5, strings.Repeat("c", 64))
	e.noteHead(ann)
	e.noteHead(st)
	hs := append(e.headList(), Head{ID: strings.Repeat("d", 64), JSON: []byte("{bad")})
	r := &Discovery{deps: Deps{KeepHeads: true}}
	r.restoreHeads(hs)
	if len(r.heads) != 2 || len(r.restoredHeads) != 2 || len(r.restoredKnown) != 2 {
		t.Fatalf("restored %v %v %v", r.heads, r.restoredHeads, r.restoredKnown)
	}
	if h := r.heads[headKey(ann)]; h.ID != ann.ID || h.at != 10 || &h.JSON[0] != &hs[0].JSON[0] && &h.JSON[0] != &hs[1].JSON[0] {
		t.Fatalf("restored announcement %+v", h)
	}
	r.noteHead(headEvent(nip34.KindRepoState, "p", "r", 4, "00")) // older than the restored
	if r.headsGen != 0 || r.heads[headKey(st)].ID != st.ID {
		t.Fatal("an older state replaced the restored one")
	}
}
