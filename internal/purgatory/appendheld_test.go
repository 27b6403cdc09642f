package purgatory

import (
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
)

// AppendHeld yields every held event with the id decoded when it was
// taken in, and its created_at.
func TestAppendHeldUsesDecodedIDs(t *testing.T) {
	env := newTestEnv(t, nil)
	a := stateEv(t, newKey(t), "repo-a", 1000, oid(1))
	b := stateEv(t, newKey(t), "repo-b", 2000, oid(2))
	for _, ev := range []*nostr.Event{a, b} {
		if err := env.add(t, ev, false); err != nil {
			t.Fatal(err)
		}
	}
	got := env.p.AppendHeld(nil, nostr.Filter{})
	slices.SortFunc(got, neg.Item.Compare)
	var want []neg.Item
	for _, ev := range []*nostr.Event{a, b} {
		id, _ := event.DecodeID(ev.ID)
		want = append(want, neg.Item{CreatedAt: ev.CreatedAt, ID: id})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppendHeld = %v, want %v", got, want)
	}
}
