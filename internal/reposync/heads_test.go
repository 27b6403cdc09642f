package reposync

import (
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
	e := &Engine{d: Deps{KeepHeads: true}}
	ann := headEvent(nip34.KindRepoAnnouncement, "p", "r", 10, "bb")
	e.noteHead(ann)
	e.noteHead(headEvent(nip34.KindRepoState, "p", "r", 5, "cc"))
	e.noteHead(headEvent(nip34.KindRepoAnnouncement, "p", "r", 9, "00")) // older
	e.noteHead(headEvent(1621, "p", "r", 20, "dd"))                      // not a head
	if len(e.heads) != 2 || e.heads[headKey(ann)] != ann || e.headsGen != 2 {
		t.Fatalf("heads %v gen %d", e.heads, e.headsGen)
	}
	e.noteHead(ann) // again: no change
	tie := headEvent(nip34.KindRepoAnnouncement, "p", "r", 10, "aa")
	e.noteHead(tie)
	if e.heads[headKey(ann)] != tie || e.headsGen != 3 {
		t.Fatalf("equal created_at, lower id not kept: %v gen %d", e.heads[headKey(ann)], e.headsGen)
	}
	e.dropHeads([]*nostr.Event{ann}) // not the kept one
	if len(e.heads) != 2 {
		t.Fatal("dropHeads removed a head that is not the one dropped")
	}
	e.dropHeads([]*nostr.Event{tie})
	if len(e.heads) != 1 || e.headsGen != 4 || len(e.headList()) != 1 {
		t.Fatalf("after drop: %v gen %d", e.heads, e.headsGen)
	}
	off := &Engine{}
	off.noteHead(ann)
	if off.heads != nil {
		t.Fatal("heads kept without KeepHeads")
	}
}
