package ownset

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
)

// OwnLocalSet is the LocalSet backed by the LocalIndex and filled from the
// own relay: before a filter is reconciled, the own relay's events for the
// repositories and root events it names are read into the index once
// (the local set's fill), so a reconciliation does not
// re-download what the own relay holds. A root the own relay accepted from
// us as new (its OK, or its live echo: ingest.Handler.OnOwnRelayLive) is
// not read (its entry carries the filled mark: localindex.Index.AddNew):
// what it could hold naming it came before the root or since, and is at
// worst fetched again and answered as a duplicate.
type OwnLocalSet struct {
	idx   *localindex.Index
	extra []localindex.Source
	dial  func(ctx context.Context) (*relay.Conn, error)
	// Pager reads the fills; with Resume set, a fill cut short resumes
	// (EnsureFilled).
	Pager *historic.Pager
	mark  func(ev *nostr.Event)
	// Forget, when set, is told of ids CatchUp found the own relay lacks.
	Forget func(id string)
	// Fetched, when set, is told of every event CatchUp fetched.
	Fetched func(ev *nostr.Event)
	// Note, when set, is told of every event read from the own relay
	// before the index has it (discovery notes roots: discovery.Discovery.NoteRoot).
	Note func(ev *nostr.Event)
	// forgetCursors: Reset was called; the next fill forgets where the
	// fills got to (Pager.Resume) before it reads (under mu).
	forgetCursors bool
	log           *zap.Logger
	// perFilter is the tag values per fill filter (sync.values_per_filter).
	perFilter int

	mu     sync.Mutex // serialises fills
	conn   *relay.Conn
	filled filledSet // "L1", repo refs, root ids, or a filter's JSON
	// recent are value lists found filled lately: nip34's filters of one
	// chunk share its value slice (#e, #E and #q of the same roots), so
	// the second and third are not looked up value by value again. Held
	// here, a slice's memory cannot be reused for another list.
	recent [4][]string
	next   int
}

// filledSet remembers the fill keys by a seeded 64-bit hash: 8 bytes a
// key instead of a string header, for every repository and root. A
// collision (not aimable: the seed is secret) only skips a fill, so a
// reconciliation downloads again what the own relay holds. With idx set,
// a root the LocalIndex holds is marked in its entry instead, at no
// cost (localindex MarkFilled): only roots not indexed yet, repositories
// and whole filters take a hash here.
type filledSet struct {
	seed maphash.Seed
	m    map[uint64]struct{}
	idx  *localindex.Index
}

func newFilledSet() filledSet { return filledSet{seed: maphash.MakeSeed(), m: map[uint64]struct{}{}} }

func (f filledSet) has(k string) bool {
	if f.idx != nil && len(k) == 64 && f.idx.Filled(k) {
		return true
	}
	h := maphash.String(f.seed, k)
	_, ok := f.m[h]
	if ok && f.idx != nil && len(k) == 64 && f.idx.MarkFilled(k) {
		delete(f.m, h) // indexed since it was filled: the mark moves to its entry
	}
	return ok
}

func (f filledSet) add(k string) {
	if f.idx != nil && len(k) == 64 && f.idx.MarkFilled(k) {
		return
	}
	f.m[maphash.String(f.seed, k)] = struct{}{}
}

// newFilled is an empty filledSet marking roots in o's index, whose
// marks it clears.
func (o *OwnLocalSet) newFilled() filledSet {
	f := newFilledSet()
	if o.idx != nil {
		o.idx.ClearFilled()
		f.idx = o.idx
	}
	return f
}

// NewOwnLocalSet builds the local set. Fill filters carry valuesPerFilter
// tag values each and are paged by pageSize. mark is told of every event
// read from the own relay (the dedupe set learns them).
func NewOwnLocalSet(idx *localindex.Index, dial func(ctx context.Context) (*relay.Conn, error), valuesPerFilter, pageSize int, eoseTimeout time.Duration, mark func(*nostr.Event), log *zap.Logger, extra ...localindex.Source) *OwnLocalSet {
	o := &OwnLocalSet{
		idx: idx, extra: extra, dial: dial, mark: mark, log: log, perFilter: valuesPerFilter,
		Pager: &historic.Pager{PageSize: pageSize, EOSETimeout: eoseTimeout},
	}
	o.filled = o.newFilled()
	return o
}

// Index is the LocalIndex behind the set.
func (o *OwnLocalSet) Index() *localindex.Index { return o.idx }

// Reset forgets what was filled, and where fills cut short got to (the
// own relay reconnected after a long outage: it may have received events
// meanwhile that the index does not know; or the index was cleared).
func (o *OwnLocalSet) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.filled = o.newFilled()
	o.recent = [4][]string{}
	o.forgetCursors = true
}

// Storage implements LocalSet.
func (o *OwnLocalSet) Storage(f nostr.Filter) (*neg.Storage, error) {
	return o.idx.Storage(f, o.extra...)
}

// FillItems reads the own relay's events for Layer 1 (when l1) and for the
// given repositories and root events into the index.
func (o *OwnLocalSet) FillItems(ctx context.Context, l1 bool, repos, roots []string) error {
	for _, f := range o.FillFilters(l1, repos, roots) {
		if err := o.EnsureFilled(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// FillFilters are the own-relay filters FillItems reads.
func (o *OwnLocalSet) FillFilters(l1 bool, repos, roots []string) []nostr.Filter {
	var fs []nostr.Filter
	if l1 {
		fs = append(fs, nip34.Layer1(nil))
	}
	return append(fs, nip34.Layers23(repos, roots, o.perFilter, nil)...)
}

// EnsureFilled implements LocalSet.
func (o *OwnLocalSet) EnsureFilled(ctx context.Context, f nostr.Filter) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys, fill := o.missingLocked(f)
	if fill == nil {
		return nil
	}
	conn, err := o.ownConn(ctx)
	if err != nil {
		return err
	}
	emit := func(_ context.Context, in ingest.Incoming) error { return o.record(in.Event) }
	if o.Pager.Resume != nil {
		// A fill cut short (the own relay dropped the connection)
		// continues where it got to when the same filter is filled again,
		// after reading what was created since it began (less the
		// cursors' slack), instead of from the top: what the sidecar
		// publishes meanwhile, of any created_at, the index learns from
		// the OKs; what others do is at worst downloaded again.
		if o.forgetCursors {
			o.Pager.Resume.Forget(conn.URL())
			o.forgetCursors = false
		}
		ctx = sweepcursor.With(ctx)
	}
	if err := o.Pager.Sync(ctx, conn, fill, 1, emit); err != nil && !historic.OnlyCutTies(err) {
		return err
	}
	// Seconds that stay cut (more events at one created_at than the own
	// relay returns, not read whole) are recorded by the pager's
	// Truncation, which keeps "caught up" from being said; reading again
	// would ask the same, so the fill counts as done.
	for _, k := range keys {
		o.filled.add(k)
	}
	if values, ok := fillTagValues(f); ok {
		o.remember(values)
	}
	return nil
}

// record puts an event read from the own relay (a fill, the catch-up)
// into the index: noted first (note), then marked present (mark). A full
// index is not an error: the event is marked all the same.
func (o *OwnLocalSet) record(ev *nostr.Event) error {
	if o.Note != nil {
		o.Note(ev)
	}
	if err := o.idx.Add(ev); err != nil && !errors.Is(err, localindex.ErrFull) {
		return err
	}
	if o.mark != nil {
		o.mark(ev)
	}
	return nil
}

// MissingFilters are the own-relay filters EnsureFilled would read for f
// now (nil when nothing is missing).
func (o *OwnLocalSet) MissingFilters(f nostr.Filter) []nostr.Filter {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, fs := o.missingLocked(f)
	return fs
}

// missingLocked returns the keys not yet filled for f and the own-relay
// filters that fill them (nil when nothing is missing).
func (o *OwnLocalSet) missingLocked(f nostr.Filter) ([]string, []nostr.Filter) {
	f.Since, f.Until, f.Limit, f.LimitZero = nil, nil, 0, false
	if len(f.Tags) == 0 && slices.Equal(f.Kinds, []int{nip34.KindRepoAnnouncement, nip34.KindRepoState}) && len(f.Authors) == 0 && len(f.IDs) == 0 {
		if o.filled.has("L1") {
			return nil, nil
		}
		return []string{"L1"}, []nostr.Filter{f}
	}
	if values, ok := fillTagValues(f); ok {
		if o.recentlyFilled(values) {
			return nil, nil
		}
		var repos, roots, keys []string
		for _, v := range values {
			if o.filled.has(v) {
				continue
			}
			keys = append(keys, v)
			if strings.Contains(v, ":") {
				repos = append(repos, v)
			} else {
				roots = append(roots, v)
			}
		}
		if len(keys) == 0 {
			o.remember(values)
			return nil, nil
		}
		return keys, nip34.Layers23(repos, roots, o.perFilter, nil)
	}
	key := filterKey(f)
	if o.filled.has(key) {
		return nil, nil
	}
	return []string{key}, []nostr.Filter{f}
}

// fillTagValues returns the values of a filter filled by value (one tag
// of Layers 2 and 3, nothing else).
func fillTagValues(f nostr.Filter) ([]string, bool) {
	if len(f.Tags) == 1 && len(f.Kinds) == 0 && len(f.Authors) == 0 && len(f.IDs) == 0 {
		for tag, values := range f.Tags {
			if strings.ContainsAny(tag, "aAqeE") && len(tag) == 1 {
				return values, true
			}
		}
	}
	return nil, false
}

// recentlyFilled tells whether values is one of the lists found filled
// lately (the same slice: same first element and length).
func (o *OwnLocalSet) recentlyFilled(values []string) bool {
	if len(values) == 0 {
		return false
	}
	for _, r := range o.recent {
		if len(r) == len(values) && &r[0] == &values[0] {
			return true
		}
	}
	return false
}

// remember keeps values as found filled.
func (o *OwnLocalSet) remember(values []string) {
	if len(values) == 0 {
		return
	}
	o.recent[o.next] = values
	o.next = (o.next + 1) % len(o.recent)
}

func filterKey(f nostr.Filter) string {
	b, _ := f.MarshalJSON()
	return string(b)
}

func (o *OwnLocalSet) ownConn(ctx context.Context) (*relay.Conn, error) {
	if o.conn != nil && o.conn.Err() == nil {
		return o.conn, nil
	}
	c, err := o.dial(ctx)
	if err != nil {
		return nil, err
	}
	o.conn = c
	return c, nil
}

// Close closes the own-relay connection used for fills.
func (o *OwnLocalSet) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		o.conn.Close()
		o.conn = nil
	}
}
