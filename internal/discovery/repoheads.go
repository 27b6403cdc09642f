package discovery

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Heads are the own relay's current announcements and repository states
// (replaceable: one per kind, pubkey and d tag), kept with their bodies
// when a state store is used (Deps.KeepHeads). A restart applies the
// persisted heads the NIP-77 catch-up found still on the own relay instead
// of paging every announcement and state again, and pages them only since
// the persisted read point, as root events. What another writer put on
// the own relay meanwhile, whatever its created_at, the catch-up fetches
// by id and hands to the self-subscription's handling (caughtUpSelf).

// isHeadKind tells the replaceable kinds a restart takes from the store.
func isHeadKind(k int) bool {
	return k == nip34.KindRepoAnnouncement || k == nip34.KindRepoState
}

func headKey(ev *nostr.Event) string {
	dTag := ""
	if t := ev.Tags.GetFirst([]string{"d", ""}); t != nil && len(*t) > 1 {
		dTag = (*t)[1]
	}
	var b strings.Builder
	b.WriteString(ev.PubKey)
	b.WriteByte(':')
	b.WriteString(dTag)
	if ev.Kind == nip34.KindRepoState {
		return "s:" + b.String()
	}
	return "a:" + b.String()
}

// Head is an announcement or state as it is kept and persisted: its id
// and its JSON (persisted.Head).
type Head = persisted.Head

// head is a kept Head with the created_at its replacement compares.
type head struct {
	Head
	at nostr.Timestamp
}

// noteHead records an announcement or state the self-subscription applied
// when it replaces what is kept for its address (newer, or as old with a
// lower id, as NIP-01 orders replaceable events). Run goroutine.
func (d *Discovery) noteHead(ev *nostr.Event) {
	if !d.deps.KeepHeads || !isHeadKind(ev.Kind) {
		return
	}
	if d.heads == nil {
		d.heads = map[string]head{}
	}
	k := headKey(ev)
	old, had := d.heads[k]
	if had && (old.at > ev.CreatedAt || (old.at == ev.CreatedAt && old.ID <= ev.ID)) {
		return
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return // not persisted: a restart fetches it by id (indexedUnknown)
	}
	d.heads[k] = head{Head: Head{ID: ev.ID, JSON: raw}, at: ev.CreatedAt}
	d.headsGen++
}

// dropHeads forgets kept heads the own relay no longer holds. Run goroutine.
func (d *Discovery) dropHeads(gone []string) {
	ids := make(map[string]bool, len(gone))
	for _, id := range gone {
		ids[id] = true
	}
	for k, h := range d.heads {
		if ids[h.ID] {
			delete(d.heads, k)
			d.headsGen++
		}
	}
}

// headList is the kept heads, sorted by id (a stable store value); it
// shares their ids and JSON with the engine.
func (d *Discovery) headList() []Head {
	out := make([]Head, 0, len(d.heads))
	for _, h := range d.heads {
		out = append(out, h.Head)
	}
	slices.SortFunc(out, func(a, b Head) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// restoreHeads keeps the previous run's heads (before Run): they are
// persisted as they are until one changes. Each is decoded once here for
// its address, then kept as its JSON. Their ids are kept until the
// restart's paging compared them with the restored local index
// (indexedUnknown).
func (d *Discovery) restoreHeads(hs []Head) {
	if !d.deps.KeepHeads {
		return
	}
	d.restoredKnown = map[event.ID]struct{}{}
	for _, h := range hs {
		var ev nostr.Event
		if err := json.Unmarshal(h.JSON, &ev); err != nil || ev.ID != h.ID {
			continue // unknown: indexedUnknown fetches it
		}
		if k, ok := event.DecodeID(h.ID); ok {
			d.restoredKnown[k] = struct{}{}
		}
		if !isHeadKind(ev.Kind) || len(ev.ID) != 64 {
			continue
		}
		if d.heads == nil {
			d.heads = map[string]head{}
		}
		d.heads[headKey(&ev)] = head{Head: h, at: ev.CreatedAt}
		d.restoredHeads = append(d.restoredHeads, h)
	}
}

// headsUsable tells whether a restart's paging may leave announcements
// and states before the read point to the persisted heads: they were
// restored and a NIP-77 catch-up of the restored local index runs to tell
// which of them the own relay still holds.
func (d *Discovery) headsUsable() bool {
	return len(d.restoredHeads) > 0 && d.catchUpDone != nil
}

// verifiedHeads waits for the catch-up and returns the restored heads the
// own relay still holds (ok false when the catch-up failed: the caller
// pages announcements and states in full). Heads it lost are forgotten.
func (d *Discovery) verifiedHeads(ctx context.Context) (keep []Head, ok bool) {
	select {
	case <-d.catchUpDone:
	case <-ctx.Done():
		return nil, false
	}
	if !d.catchUpOK.Load() || d.local.Index().Full() {
		return nil, false
	}
	var gone []string
	for _, h := range d.restoredHeads {
		if d.local.Index().Has(h.ID) {
			keep = append(keep, h)
		} else {
			gone = append(gone, h.ID)
		}
	}
	if len(gone) > 0 {
		d.log.Info("announcements or states of the previous run are gone from the own relay", zap.Int("events", len(gone)))
		d.deps.Post(func() { d.dropHeads(gone) })
	}
	return keep, true
}

// caughtUpSelf hands the self-subscription's kinds among the events the
// catch-up fetched (another writer's, whatever their created_at) to the
// self-subscription's handling, as its paging would have.
func (d *Discovery) caughtUpSelf(evs []*nostr.Event) {
	var self []*nostr.Event
	seen := map[string]bool{} // the fetch's pages repeat their edge second
	for _, ev := range evs {
		if slices.Contains(d.cfg.SelfKinds, ev.Kind) && !seen[ev.ID] {
			seen[ev.ID] = true
			if k, ok := event.DecodeID(ev.ID); ok {
				if d.caughtIDs == nil {
					d.caughtIDs = map[event.ID]struct{}{}
				}
				d.caughtIDs[k] = struct{}{}
			}
			d.h.OnOwnRelay(ev) // the catch-up noted its roots (unappliedroots.go)
			self = append(self, ev)
		}
	}
	if len(self) > 0 {
		d.log.Info("the catch-up found announcements, states or roots added to the own relay meanwhile", zap.Int("events", len(self)))
		d.deps.Post(func() { d.ApplyBatch(self) })
	}
}

// selfHeads completes a restart's paging since the read point: the
// persisted heads the own relay still holds are emitted as paged events;
// when the catch-up could not tell which those are, announcements and
// states are paged in full instead.
func (d *Discovery) selfHeads(ctx context.Context, conn *relay.Conn, since *nostr.Timestamp, emit func(context.Context, ingest.Incoming) error) error {
	keep, ok := d.verifiedHeads(ctx)
	if !ok {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.log.Info("the persisted announcements and states cannot be checked against the own relay; paging them in full")
		var kinds []int
		for _, k := range d.cfg.SelfKinds {
			if isHeadKind(k) {
				kinds = append(kinds, k)
			}
		}
		return d.pager.Sync(ctx, conn, []nostr.Filter{{Kinds: kinds}}, 1, emit)
	}
	for _, h := range keep {
		ev := &nostr.Event{} // decoded for this paging only
		if err := json.Unmarshal(h.JSON, ev); err != nil {
			continue // restoreHeads decoded it
		}
		if err := emit(ctx, ingest.Incoming{Event: ev}); err != nil {
			return err
		}
	}
	d.log.Info("applied the persisted announcements and states", zap.Int("events", len(keep)))
	// The local index and the heads are saved by separate snapshots: an
	// announcement or state the index holds (the previous run's catch-up
	// fetched it, say) but the saved heads lack, dated before the read
	// point, is fetched by id. (Every one the own relay holds is a head:
	// they are replaceable. Root kinds cannot be told apart so: the index
	// also holds their non-root events.)
	missing, err := d.indexedUnknown(*since)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		d.log.Info("fetching announcements, states or roots the local index holds and the saved repository index lacks", zap.Int("events", len(missing)))
	}
	batch := max(d.cfg.Negentropy.FetchBatch, 1)
	for s := 0; s < len(missing); s += batch {
		if err := d.pager.Sync(ctx, conn, []nostr.Filter{{IDs: missing[s:min(s+batch, len(missing))]}}, 1, emit); err != nil {
			return err
		}
	}
	d.restoredKnown = nil
	return nil
}

// indexedUnknown are the ids of announcements and states created until
// since that the local index holds and neither the restored heads name nor
// the catch-up fetched (it runs after the catch-up: verifiedHeads).
func (d *Discovery) indexedUnknown(since nostr.Timestamp) ([]string, error) {
	var kinds []int
	for _, k := range d.cfg.SelfKinds {
		if isHeadKind(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	items, err := d.local.Index().AppendMatching(nil, nostr.Filter{Kinds: kinds, Until: &since})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		_, known := d.restoredKnown[it.ID]
		_, caught := d.caughtIDs[it.ID]
		if !known && !caught {
			out = append(out, hex.EncodeToString(it.ID[:]))
		}
	}
	return out, nil
}
