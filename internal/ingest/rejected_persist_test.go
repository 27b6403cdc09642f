package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// A restored RejectedIndex remembers what was rejected (cold and hot), and
// a dependency accepted after the restart still brings its events back.
func TestRejectedExportRestore(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg := RejectedConfig{HotTTL: time.Minute, HotMax: 10, ColdTTL: time.Hour, ColdMax: 100}
	r := NewRejectedIndex(cfg, func() time.Time { return now })
	var evs []*nostr.Event
	for i := 0; i < 5; i++ {
		ev := &nostr.Event{ID: fmt.Sprintf("%064x", i+1), Kind: 1111, CreatedAt: nostr.Timestamp(100 + i), Tags: nostr.Tags{{"E", fmt.Sprintf("root-%d", i%2)}}}
		r.Add(ev)
		evs = append(evs, ev)
	}
	gen := r.Generation()
	st := r.ExportState()

	now = now.Add(30 * time.Second) // the hot entries are still hot
	r2 := NewRejectedIndex(cfg, func() time.Time { return now })
	if err := r2.RestoreState(st); err != nil {
		t.Fatal(err)
	}
	if gen == 0 || r2.Generation() == 0 {
		t.Fatal("generation did not move")
	}
	for _, ev := range evs {
		if !r2.Has(ev.ID) {
			t.Fatalf("%s not remembered after the restore", ev.ID)
		}
	}
	if hot, cold := r2.Len(); hot != 5 || cold != 5 {
		t.Fatalf("restored %d hot, %d cold", hot, cold)
	}
	retry, _ := r2.DependencyAccepted("root-0")
	if len(retry) != 3 {
		t.Fatalf("dependency accepted after the restore retried %d events, want 3", len(retry))
	}
	if r2.Has(evs[0].ID) || !r2.Has(evs[1].ID) {
		t.Fatal("the retried events were not forgotten, or others were")
	}
	// Past the cold TTL nothing is restored.
	now = now.Add(2 * time.Hour)
	r3 := NewRejectedIndex(cfg, func() time.Time { return now })
	if err := r3.RestoreState(st); err != nil {
		t.Fatal(err)
	}
	if _, cold := r3.Len(); cold != 0 {
		t.Fatalf("%d entries past the cold TTL restored", cold)
	}
	if err := NewRejectedIndex(cfg, nil).RestoreState(RejectedState{Cold: st.Cold[:40]}); err == nil {
		t.Fatal("a truncated state was accepted")
	}
}
