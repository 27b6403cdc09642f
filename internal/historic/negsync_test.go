package historic

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
)

// TestFetchRecorderKeepsFiltersApart: events fetched together for several
// reconciled filters are recorded for each filter they match.
func TestFetchRecorderKeepsFiltersApart(t *testing.T) {
	a, b := fmt.Sprintf("%064x", 1), fmt.Sprintf("%064x", 2)
	rec := fetchRecorder{filters: []nostr.Filter{{Tags: nostr.TagMap{"e": {a}}}, {Tags: nostr.TagMap{"E": {a, b}}}}}
	emitted := 0
	emit := rec.wrap(func(context.Context, ingest.Incoming) error { emitted++; return nil })
	for i, tags := range []nostr.Tags{{{"e", a}, {"E", a}}, {{"E", b}}, {{"p", a}}} {
		ev := &nostr.Event{ID: fmt.Sprintf("%064x", 100+i), CreatedAt: nostr.Timestamp(1000 + i), Tags: tags}
		if err := emit(context.Background(), ingest.Incoming{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	if emitted != 3 {
		t.Fatalf("emitted %d, want 3", emitted)
	}
	want := [][]nostr.Timestamp{{1000}, {1000, 1001}}
	for i, w := range want {
		got := rec.itemsOf(i)
		if len(got) != len(w) {
			t.Fatalf("filter %d recorded %d items, want %d", i, len(got), len(w))
		}
		for k, it := range got {
			if it.CreatedAt != w[k] {
				t.Errorf("filter %d item %d at %d, want %d", i, k, it.CreatedAt, w[k])
			}
		}
	}
}
