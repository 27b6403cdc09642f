package historic

import (
	"context"
	"errors"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// reconcileNewest reconciles f and fetches at most max of the missing
// events, the newest ones: NIP-77 names missing events by id only, so when
// more than max are missing the time range is halved and the newer half
// taken first (recursively, down to one second), the older half with what
// budget is left. It reports how many ids were missing in f's range, plus
// the events paged below a truncated set (see fetchConfirmed).
func (s *NegSyncer) reconcileNewest(ctx context.Context, c *relay.Conn, f nostr.Filter, slots, max int, emit Emit) (int, error) {
	res, windows, err := s.reconcileNeed(ctx, c, f)
	need := res.Need
	if err != nil && len(need) == 0 {
		return 0, err
	}
	missing := len(need)
	if len(need) <= max {
		paged, err := s.fetchConfirmed(ctx, c, f, res, windows, err, slots, max, emit)
		return missing + paged, err
	}
	var since, until nostr.Timestamp
	if f.Since != nil {
		since = *f.Since
	}
	if f.Until != nil {
		until = *f.Until
	} else {
		until = nostr.Timestamp(s.Clock.Now().Unix()) + 1
	}
	if until-since <= 1 {
		// One second cannot be split: its events are equally new.
		if ferr := s.fetch(ctx, c, need[:max], slots, emit, nil); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return missing, err
	}
	mid := since + (until-since)/2
	newer, older := f, f
	newer.Since = &mid
	olderUntil := mid - 1
	older.Until = &olderUntil
	got, nerr := s.reconcileNewest(ctx, c, newer, slots, max, emit)
	if errors.Is(nerr, neg.ErrUnsupported) || ctx.Err() != nil {
		return missing, nerr
	}
	if left := max - min(got, max); left > 0 {
		_, oerr := s.reconcileNewest(ctx, c, older, slots, left, emit)
		nerr = errors.Join(nerr, oerr)
	}
	return missing, nerr
}

// errBudgetSpent stops paging a truncated set's rest once the budget of
// reconcileNewest is spent.
var errBudgetSpent = errors.New("per-cycle event budget spent")

// fetchConfirmed fetches need (at most max ids) and then, as a historic
// sync does (confirmSet), checks the reconciled set when it looks cut:
// a relay that answers NIP-77 with only its newest events is caught and
// the rest of f is paged, newest first, with the budget left (max minus
// the ids fetched); what is not paged waits for the next cycle. err is the
// reconciliation's error: a failed reconciliation is not confirmed. It
// reports how many events the check and the paging emitted.
func (s *NegSyncer) fetchConfirmed(ctx context.Context, c *relay.Conn, f nostr.Filter, res neg.Result, windows map[string]*neg.Storage, err error, slots, max int, emit Emit) (int, error) {
	var rec fetchRecorder
	if ferr := s.fetch(ctx, c, res.Need, slots, rec.wrap(emit), &rec); ferr != nil {
		err = errors.Join(err, ferr)
	}
	if err != nil {
		return 0, err
	}
	left := max - len(res.Need)
	if left <= 0 {
		return 0, nil
	}
	local := make([]*neg.Storage, 0, len(windows))
	for _, st := range windows {
		local = append(local, st)
	}
	paged := 0
	bounded := func(ctx context.Context, in ingest.Incoming) error {
		if paged >= left {
			return errBudgetSpent
		}
		paged++
		return emit(ctx, in)
	}
	if cerr := s.confirmSet(ctx, c, f, buildRemoteSet(local, res.Have, rec.items, rec.otherOf(res.Need)), bounded); cerr != nil && !errors.Is(cerr, errBudgetSpent) {
		return paged, cerr
	}
	return paged, nil
}
