package neg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// LocalFunc returns our side of the set for a filter: everything we hold or
// do not want that matches it. An error (for example "cannot answer this
// filter") ends the reconciliation so the caller can fall back to REQ paging.
type LocalFunc func(nostr.Filter) (*Storage, error)

// ReconcileSplit reconciles filter like Reconcile, and when the relay
// answers "blocked:" (too many results) it splits the filter's time range
// [since, until] in halves and reconciles each half, recursively, down to
// Options.MinWindow. A window whose session was lost (ErrSessionClosed) is
// retried up to Options.SessionRetries times. A missing since counts as 0; a missing until as
// Options.Clock's time, while the newest window keeps until unset so events from
// the future stay covered. Need and Have are sorted. Sessions use the ids subIDPrefix+"0",
// subIDPrefix+"1", … one at a time. On error the Result holds everything
// learned from the windows that completed, so the caller can still fetch
// those ids.
func ReconcileSplit(ctx context.Context, c Conn, subIDPrefix string, filter nostr.Filter, localFor LocalFunc, opt Options) (res Result, err error) {
	clk := opt.clock()
	start := clk.Now()
	defer func() {
		res.Duration = clk.Now().Sub(start)
		slices.Sort(res.Need)
		res.Need = slices.Compact(res.Need)
		slices.Sort(res.Have)
		res.Have = slices.Compact(res.Have)
	}()
	if err := opt.Validate(); err != nil {
		return res, err
	}
	if len(subIDPrefix) > 54 {
		return res, fmt.Errorf("%w: subscription id prefix %q longer than 54 characters", ErrInvalidOptions, subIDPrefix)
	}
	minWidth := int64(opt.MinWindow / time.Second)

	type window struct {
		f     nostr.Filter
		tries int
	}
	stack := []window{{f: filter}}
	for n := 0; len(stack) > 0; n++ {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		w := top.f

		local, err := localFor(w)
		if err != nil {
			return res, fmt.Errorf("neg: local set for window %s: %w", windowString(w), err)
		}
		r, err := Reconcile(ctx, c, subIDPrefix+strconv.Itoa(n), w, local, opt)
		res.Need = append(res.Need, r.Need...)
		res.Have = append(res.Have, r.Have...)
		res.Stats.add(r.Stats)
		if err == nil {
			continue
		}
		if errors.Is(err, ErrSessionClosed) && top.tries < opt.SessionRetries && ctx.Err() == nil {
			stack = append(stack, window{f: w, tries: top.tries + 1})
			continue
		}
		if !errors.Is(err, ErrBlocked) {
			return res, fmt.Errorf("window %s: %w", windowString(w), err)
		}
		lo, hi := int64(0), clk.Now().Unix()
		if w.Since != nil {
			lo = int64(*w.Since)
		}
		if w.Until != nil {
			hi = int64(*w.Until)
		}
		if hi-lo < minWidth {
			return res, fmt.Errorf("window %s is at the minimum size %s: %w", windowString(w), opt.MinWindow, err)
		}
		mid := lo + (hi-lo)/2
		lower, upper := w, w
		lower.Since, lower.Until = tsPtr(lo), tsPtr(mid)
		upper.Since = tsPtr(mid + 1) // upper keeps w.Until (possibly unset)
		stack = append(stack, window{f: upper}, window{f: lower})
	}
	return res, nil
}

func tsPtr(v int64) *nostr.Timestamp {
	t := nostr.Timestamp(v)
	return &t
}

func windowString(f nostr.Filter) string {
	s, u := "0", "now"
	if f.Since != nil {
		s = strconv.FormatInt(int64(*f.Since), 10)
	}
	if f.Until != nil {
		u = strconv.FormatInt(int64(*f.Until), 10)
	}
	return "[" + s + "," + u + "]"
}
