package historic

import (
	"context"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/filtermatch"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
)

// fetchRecorder remembers the (created_at, id) of every fetched event an
// emit passes on: the set a reconciliation is confirmed against. With
// filters, it keeps the items of each filter apart (fetched together).
type fetchRecorder struct {
	filters []nostr.Filter

	mu    sync.Mutex
	items []neg.Item            // without filters
	per   [][]neg.Item          // by filter
	match []filtermatch.Matcher // the filters compiled, at the first event
	// other are ids the relay holds that another fetch delivered or the
	// handler already had: their created_at is not known here.
	other map[string]bool
}

// elsewhere records ids the relay holds that were not fetched from it. A
// nil recorder records nothing.
func (r *fetchRecorder) elsewhere(ids []string) {
	if r == nil || len(ids) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.other == nil {
		r.other = map[string]bool{}
	}
	for _, id := range ids {
		r.other[id] = true
	}
}

// otherOf returns which of need were recorded by elsewhere.
func (r *fetchRecorder) otherOf(need []string) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var m map[string]bool
	for _, id := range need {
		if r.other[id] {
			if m == nil {
				m = map[string]bool{}
			}
			m[id] = true
		}
	}
	return m
}

// wrap returns emit recording each event's item first.
func (r *fetchRecorder) wrap(emit Emit) Emit {
	return func(ctx context.Context, in ingest.Incoming) error {
		if it, err := neg.ItemFromHex(in.Event.CreatedAt, in.Event.ID); err == nil {
			r.mu.Lock()
			if len(r.filters) == 0 {
				r.items = append(r.items, it)
			} else {
				if r.per == nil {
					r.per = make([][]neg.Item, len(r.filters))
					r.match = make([]filtermatch.Matcher, len(r.filters))
					for i, f := range r.filters {
						r.match[i] = filtermatch.New([]nostr.Filter{f}, nil)
					}
				}
				for i, m := range r.match {
					if m.Match(in.Event) {
						r.per[i] = append(r.per[i], it)
					}
				}
			}
			r.mu.Unlock()
		}
		return emit(ctx, in)
	}
}

// itemsOf returns the items recorded for filter i.
func (r *fetchRecorder) itemsOf(i int) []neg.Item {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < len(r.per) {
		return r.per[i]
	}
	return nil
}
