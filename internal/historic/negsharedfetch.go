package historic

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Fewer round trips per historic job: the filters a job reconciles share
// their fetches by id (fetchReconciled).

// MergesJobs: the filters of one job share their fetches (JobMerger).
func (s *NegSyncer) MergesJobs() bool { return s.cfg.Enabled }

// reconciled is one filter's finished reconciliation.
type reconciled struct {
	f       nostr.Filter
	res     neg.Result
	windows map[string]*neg.Storage
}

// fetchReconciled fetches what the reconciled filters lack, together, then
// confirms each filter's set (confirmSet).
func (s *NegSyncer) fetchReconciled(ctx context.Context, c *relay.Conn, done []reconciled, slots int, emit Emit) error {
	if len(done) == 0 {
		return nil
	}
	var need []string
	fs := make([]nostr.Filter, len(done))
	for i, d := range done {
		need = append(need, d.res.Need...)
		fs[i] = d.f
	}
	if len(done) > 1 {
		slices.Sort(need)
		need = slices.Compact(need)
	}
	rec := fetchRecorder{filters: fs}
	if err := s.fetch(ctx, c, need, slots, rec.wrap(emit), &rec); err != nil {
		s.m.errors.WithLabelValues(c.URL(), errorKind(err)).Inc()
		return err
	}
	var errs []error
	for i, d := range done {
		local := make([]*neg.Storage, 0, len(d.windows))
		for _, st := range d.windows {
			local = append(local, st)
		}
		if err := s.confirmSet(ctx, c, d.f, buildRemoteSet(local, d.res.Have, rec.itemsOf(i), rec.otherOf(d.res.Need)), emit); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileOutcome is one filter's reconciliation run ahead.
type reconcileOutcome struct {
	res     neg.Result
	windows map[string]*neg.Storage
	err     error
}

// reconcileAhead reconciles the filters of a merged job at once, each in a
// subscription slot its relay lends (slotlender.go) beside the job's own,
// and returns their outcomes in order; nil when the job has one filter or
// no slot to borrow (the filters are then reconciled one after another).
// A merged job's Layer 3 filters otherwise cost one round trip each in a
// row: with the relay's live filters deferred its budget has room, and
// Config.HistoricMaxJobs, not the budget, bounds its jobs.
func (s *NegSyncer) reconcileAhead(ctx context.Context, c *relay.Conn, fs []nostr.Filter) []reconcileOutcome {
	lend := borrowerFrom(ctx)
	if len(fs) < 2 || lend == nil {
		return nil
	}
	out := make([]reconcileOutcome, len(fs))
	own := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i, f := range fs {
		release := func() { <-own }
		select {
		case own <- struct{}{}:
		default:
			if lend.BorrowReconcile() {
				release = lend.GiveBack
				break
			}
			select {
			case own <- struct{}{}:
			case <-ctx.Done():
				for k := i; k < len(fs); k++ {
					out[k].err = ctx.Err()
				}
				wg.Wait()
				return out
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			out[i].res, out[i].windows, out[i].err = s.reconcileNeed(ctx, c, f)
		}()
	}
	wg.Wait()
	return out
}
