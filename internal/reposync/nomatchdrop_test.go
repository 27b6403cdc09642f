package reposync

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// droppingHistoric is a HistoricSyncer whose relay answers each job with
// an event outside the job's filter (as a fetch by id would hand it on)
// and records what the job's emit told the fetch's tally.
type droppingHistoric struct {
	mu        sync.Mutex
	delivered map[string]bool
}

func (d *droppingHistoric) Sync(ctx context.Context, _ *relay.Conn, fs []nostr.Filter, _ int, emit historic.Emit) error {
	tally := historic.NewFetchTally()
	ctx = historic.WithDropNote(ctx, tally.Drop)
	ev := &nostr.Event{ID: claimID(7), Kind: 1, CreatedAt: 1000} // refers to no root of fs
	if err := tally.Wrap(emit, func() {})(ctx, ingest.Incoming{Event: ev}); err != nil {
		return err
	}
	d.mu.Lock()
	d.delivered[ev.ID] = tally.Delivered(ev.ID)
	d.mu.Unlock()
	return nil
}

// TestHistoricJobNotesNoMatchDrops: a historic job's emit that drops an
// event outside the job's filter (no_match) tells the fetch running it,
// so a claim on the id does not count it as delivered.
func TestHistoricJobNotesNoMatchDrops(t *testing.T) {
	h := newHistoricEnv(t)
	d := &droppingHistoric{delivered: map[string]bool{}}
	h.e.d.Historic = d
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{{Kinds: []int{1}, Tags: nostr.TagMap{"e": {claimID(1)}}}}, false)
	h.drain(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	if got, ok := d.delivered[claimID(7)]; !ok || got {
		t.Fatalf("the dropped event counts as delivered (%v, ran %v)", got, ok)
	}
}

func claimID(i int) string { return fmt.Sprintf("%064x", i+1) }
