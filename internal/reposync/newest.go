package reposync

import (
	"context"
	"errors"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// reconcileNewest reconciles f and fetches at most max of the missing
// events, the newest ones: NIP-77 names missing events by id only, so when
// more than max are missing the time range is halved and the newer half
// taken first (recursively, down to one second), the older half with what
// budget is left. It reports how many ids were missing in f's range.
func (s *NegSyncer) reconcileNewest(ctx context.Context, c *relay.Conn, f nostr.Filter, slots, max int, emit Emit) (int, error) {
	res, _, err := s.reconcileNeed(ctx, c, f)
	need := res.Need
	if err != nil && len(need) == 0 {
		return 0, err
	}
	missing := len(need)
	if len(need) <= max {
		if ferr := s.fetch(ctx, c, need, slots, emit); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return missing, err
	}
	var since, until nostr.Timestamp
	if f.Since != nil {
		since = *f.Since
	}
	if f.Until != nil {
		until = *f.Until
	} else {
		until = nostr.Timestamp(s.now().Unix()) + 1
	}
	if until-since <= 1 {
		// One second cannot be split: its events are equally new.
		if ferr := s.fetch(ctx, c, need[:max], slots, emit); ferr != nil {
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
