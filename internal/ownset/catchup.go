package ownset

import (
	"context"
	"fmt"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
)

// catchUpStats is what a catch-up with the own relay found (its log line).
type catchUpStats struct {
	Added, Removed        int
	BytesSent, BytesRecvd int
	Filters               int
}

// CatchUp brings a LocalIndex restored from the state store up to date
// with the own relay: each fill filter is reconciled with NIP-77 against
// the index alone (no purgatory or rejected ids: the question is what the
// own relay holds), ids the relay has and the index lacks (other writers'
// events) are fetched and indexed, ids the index has and the relay lacks
// (deleted meanwhile) are removed. On success the filters count as filled,
// so reconciliations with remote relays do not read the own relay again.
// It returns how many indexed events the own relay lacked (removed), or
// neg.ErrUnsupported when the own relay does not speak NIP-77; the caller
// then fills the index by reading back. opts.Clock is the clock of its log
// line.
func (o *OwnLocalSet) CatchUp(ctx context.Context, opts neg.Options, fetchBatch int, l1 bool, repos, roots []string) (removed int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	start := clk.Now()
	var res catchUpStats
	conn, err := o.ownConn(ctx)
	if err != nil {
		return 0, err
	}
	local := func(f nostr.Filter) (*neg.Storage, error) { return o.idx.Storage(f) }
	emit := func(_ context.Context, in ingest.Incoming) error {
		if err := o.record(in.Event); err != nil {
			return err
		}
		res.Added++
		if o.Fetched != nil {
			o.Fetched(in.Event)
		}
		return nil
	}
	fetchBatch = max(fetchBatch, 1)
	// First the whole own relay in one reconciliation: a GRASP relay holds
	// little beyond what the index covers, and one empty filter costs a
	// few hundred bytes where filters naming every root cost megabytes.
	// When the relay holds much more (a general-purpose relay), the
	// per-filter reconciliation below asks only for what sync covers.
	whole, err := neg.ReconcileSplit(ctx, conn, "cuw-", nostr.Filter{}, local, opts)
	res.BytesSent += whole.BytesSent
	res.BytesRecvd += whole.BytesReceived
	res.Filters++
	if err != nil {
		return res.Removed, err
	}
	if len(whole.Need) <= max(wholeNeedMin, o.idx.Len()/10) {
		for _, id := range whole.Have {
			if o.idx.Remove(id) {
				res.Removed++
			}
			if o.Forget != nil {
				o.Forget(id)
			}
		}
		for s := 0; s < len(whole.Need); s += fetchBatch {
			ids := whole.Need[s:min(s+fetchBatch, len(whole.Need))]
			if err := o.Pager.Sync(ctx, conn, []nostr.Filter{{IDs: ids}}, 1, emit); err != nil {
				return res.Removed, fmt.Errorf("fetching what others added to the own relay: %w", err)
			}
		}
		o.markFilled(l1, repos, roots)
		o.logCatchUp(res, clk.Now().Sub(start), true)
		return res.Removed, nil
	}
	for i, f := range o.FillFilters(l1, repos, roots) {
		r, err := neg.ReconcileSplit(ctx, conn, fmt.Sprintf("cu%d-", i), f, local, opts)
		res.BytesSent += r.BytesSent
		res.BytesRecvd += r.BytesReceived
		res.Filters++
		if err != nil {
			return res.Removed, err
		}
		for _, id := range r.Have {
			if o.idx.Remove(id) {
				res.Removed++
			}
			if o.Forget != nil {
				o.Forget(id)
			}
		}
		for s := 0; s < len(r.Need); s += fetchBatch {
			ids := r.Need[s:min(s+fetchBatch, len(r.Need))]
			if err := o.Pager.Sync(ctx, conn, []nostr.Filter{{IDs: ids}}, 1, emit); err != nil {
				return res.Removed, fmt.Errorf("fetching what others added to the own relay: %w", err)
			}
		}
	}
	o.markFilled(l1, repos, roots)
	o.logCatchUp(res, clk.Now().Sub(start), false)
	return res.Removed, nil
}

// wholeNeedMin: a whole-relay reconciliation finding at most this many
// events (or a tenth of the index) the index lacks fetches them; more
// means the relay holds much that sync does not cover.
const wholeNeedMin = 1000

func (o *OwnLocalSet) markFilled(l1 bool, repos, roots []string) {
	if l1 {
		o.filled.add("L1")
	}
	for _, v := range repos {
		o.filled.add(v)
	}
	for _, v := range roots {
		o.filled.add(v)
	}
}

func (o *OwnLocalSet) logCatchUp(res catchUpStats, took time.Duration, whole bool) {
	o.log.Info("local index caught up with the own relay by NIP-77", zap.Bool("whole_relay", whole),
		zap.Int("filters", res.Filters), zap.Int("added", res.Added), zap.Int("removed", res.Removed),
		zap.Int("bytes_sent", res.BytesSent), zap.Int("bytes_received", res.BytesRecvd), zap.Duration("took", took))
}
