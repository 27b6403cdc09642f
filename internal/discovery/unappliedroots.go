package discovery

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// The engine learns the roots on the own relay from its self-subscription,
// in batches applied on the Run goroutine; the local index records them as
// present at once (at the OK of what the sidecar sent, at the echo or read
// of what others did). A state saved in between — at a stop: the batch
// still collecting, and what the publisher settles while it flushes; at a
// kill: any flush — would hold a root in the local index and not in the
// repository index. The restart pages the own relay only from the save on
// (by created_at, which a synced history predates) and reconciles it
// against that local index, so it would never learn the root, and the
// discussion under it would never be synced. Roots are therefore noted
// here before the local index records them, kept until the repository
// index has them, and the saved repository index (RepoState) includes
// them. (The self-subscription's paging needs none of this: the saved
// cursor does not pass its batches until they are applied, and a restart
// pages them again.)

// maxUnappliedRoots bounds unappliedRoots. With a state store asking for
// the repository index, roots leave it at the first status refresh
// (Config.Tick) after their batch applied them, as roots or as orphans;
// those of repositories without an announcement leave it with the orphans
// (dropOrphans, after each read of the own relay's history). It holds
// about a batch window's worth of OKs and echoes (a fill reading back what
// the local index lacks: a tick's worth of its roots, already known)
// unless the Run goroutine falls far behind. Only well-formed references
// are noted, the ones a batch can keep: a root with none is not noted. A
// root no batch applied within Settings.RootWait (the self-subscription
// was reconnecting when the own relay stored it, and a reconnect asks
// only for what was created since it lost the connection; or the relay
// never serves it to the self-subscription) is applied from the note
// (applyOverdue); only one the orphans' bound refuses stays, reported.
const maxUnappliedRoots = 200_000

// UnappliedRoots are roots on the own relay the repository index may not
// have yet, by id, with their repository references and when they were
// noted. The wiring builds it before the ingest handler, which tells it
// of every event the own relay stored (ingest.Deps.Stored: Note), and
// hands it to discovery (Deps.Unapplied), which applies those no batch
// applied in time, prunes it once its index holds them and, with a state
// store, saves it with the repository index. Its methods are safe from
// any goroutine.
type UnappliedRoots struct {
	selfKinds []int
	log       *zap.Logger
	clock     clock.Clock
	mu        sync.Mutex
	roots     map[string]unappliedRoot
	gen       uint64 // counts changes
	warned    bool   // the bound was logged
	// stuckWarned: a root that cannot be applied was logged (Run
	// goroutine).
	stuckWarned bool
	late        atomic.Uint64
	stuck       atomic.Int64
	// anns are the announcements the own relay stored, by id, until a
	// batch applied them or they are applied from here
	// (takeOverdueAnnouncements).
	anns      map[string]unappliedAnn
	annWarned bool // the bound was logged
	// annLateWarned: announcements applied from here were logged (Run
	// goroutine).
	annLateWarned bool
}

// unappliedAnn is a noted announcement and when it was noted.
type unappliedAnn struct {
	ev *nostr.Event
	at time.Time
}

// maxUnappliedAnnouncements bounds the announcements noted: a batch
// window's worth of them, unless the Run goroutine falls far behind.
const maxUnappliedAnnouncements = 10_000

// unappliedRoot is a noted root's repository references and when it was
// noted.
type unappliedRoot struct {
	refs []string
	at   time.Time
}

// NewUnappliedRoots returns an empty set noting roots of selfKinds (the
// self-subscription's kinds) on clk (nil: the wall clock).
func NewUnappliedRoots(selfKinds []int, clk clock.Clock, log *zap.Logger) *UnappliedRoots {
	if log == nil {
		log = zap.NewNop()
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &UnappliedRoots{selfKinds: slices.Clone(selfKinds), log: log, clock: clk}
}

// AppliedLate counts the roots no self batch applied within
// Settings.RootWait, applied from their note.
func (u *UnappliedRoots) AppliedLate() uint64 { return u.late.Load() }

// Stuck is how many roots waited longer than Settings.RootWait and could
// not be applied at the last check: their repository's announcement is
// not applied and the orphan roots' bound is reached.
func (u *UnappliedRoots) Stuck() int { return int(u.stuck.Load()) }

// NoteRoot records ev, when it is a root, before the local index records
// it as present (UnappliedRoots.Note; nothing without Deps.Unapplied).
// Any goroutine.
func (d *Discovery) NoteRoot(ev *nostr.Event) {
	if d.unapplied != nil {
		d.unapplied.Note(ev)
	}
}

// Note records ev, when it is a root, before the local index records it
// as present. Any goroutine; it does not block for long.
func (u *UnappliedRoots) Note(ev *nostr.Event) {
	if !slices.Contains(u.selfKinds, ev.Kind) {
		return
	}
	if ev.Kind == nip34.KindRepoAnnouncement {
		u.noteAnnouncement(ev)
		return
	}
	refs, ok := nip34.RootRefs(ev)
	if !ok {
		return
	}
	// A batch refuses malformed references; noted, such a root would wait
	// for a snapshot that never holds it, saved with every state.
	refs = slices.DeleteFunc(refs, func(ref string) bool { return !validRepoRef(ref) })
	if len(refs) == 0 {
		return
	}
	now := u.clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.roots[ev.ID]; ok {
		return
	}
	if len(u.roots) >= maxUnappliedRoots {
		if !u.warned {
			u.warned = true
			u.log.Warn("too many roots wait for their self batch; a stop before it is applied leaves the newest unknown to the restart",
				zap.Int("waiting", len(u.roots)))
		}
		return
	}
	if u.roots == nil {
		u.roots = map[string]unappliedRoot{}
	}
	u.roots[ev.ID] = unappliedRoot{refs: refs, at: now}
	u.gen++
}

// noteAnnouncement records an announcement the own relay stored: one the
// self-subscription does not deliver (it was reconnecting, and asks only
// for what was created since; an announcement synced from a remote relay
// is older) is applied from here after Settings.RootWait, as roots are.
func (u *UnappliedRoots) noteAnnouncement(ev *nostr.Event) {
	now := u.clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.anns[ev.ID]; ok {
		return
	}
	if len(u.anns) >= maxUnappliedAnnouncements {
		if !u.annWarned {
			u.annWarned = true
			u.log.Warn("too many announcements wait for their self batch; those beyond are learnt at the next read of the own relay",
				zap.Int("waiting", len(u.anns)))
		}
		return
	}
	if u.anns == nil {
		u.anns = map[string]unappliedAnn{}
	}
	u.anns[ev.ID] = unappliedAnn{ev: ev, at: now}
}

// takeOverdueAnnouncements forgets the noted announcements applied
// reports applied and returns, forgotten too, those noted at or before
// due that it does not: the caller applies them.
func (u *UnappliedRoots) takeOverdueAnnouncements(due time.Time, applied func(*nostr.Event) bool) []*nostr.Event {
	u.mu.Lock()
	defer u.mu.Unlock()
	var late []*nostr.Event
	for id, a := range u.anns {
		switch {
		case applied(a.ev):
			delete(u.anns, id)
		case !a.at.After(due):
			late = append(late, a.ev)
			delete(u.anns, id)
		}
	}
	return late
}

// forget forgets the roots drop returns true for (nothing on a nil set).
// Run goroutine: discovery forgets those its index holds (rootApplied),
// after the snapshot that holds them is published (PublishRepos), and
// those of which no repository is hosted once the orphans were dropped
// (dropOrphans: they would wait forever).
func (u *UnappliedRoots) forget(drop func(id string, refs []string) bool) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, r := range u.roots {
		if drop(id, r.refs) {
			delete(u.roots, id)
			u.gen++
		}
	}
}

// rootApplied tells whether the index has root id, as a root or as an
// orphan under any of refs. Run goroutine.
func (d *Discovery) rootApplied(id string, refs []string) bool {
	for _, ref := range refs {
		if n := d.Repos[ref]; (n != nil && n.Roots.Has(id)) || d.orphans[ref].Has(id) {
			return true
		}
	}
	return false
}

// repoStateWithUnapplied is the last published repository snapshot with
// the unapplied roots added (a copy when there are any), read together.
func (d *Discovery) repoStateWithUnapplied() PersistedRepos {
	u := d.unapplied
	if u == nil {
		return d.reposSnapCopy()
	}
	u.mu.Lock()
	p := d.reposSnapCopy()
	if p.Gen == 0 {
		// No snapshot yet: nothing to save (the roots' batches are
		// waiting too).
		u.mu.Unlock()
		return p
	}
	p.Gen += u.gen // both only grow: any change changes the sum
	byRef := map[string][]string{}
	for id, r := range u.roots {
		for _, ref := range r.refs {
			byRef[ref] = append(byRef[ref], id)
		}
	}
	u.mu.Unlock()
	if len(byRef) == 0 {
		return p
	}
	roots := maps.Clone(p.Roots)
	if roots == nil {
		roots = map[string][]string{}
	}
	for ref, ids := range byRef {
		// A new slice: p.Roots's are shared with the engine's snapshot.
		roots[ref] = slices.Concat(roots[ref], ids)
	}
	p.Roots = roots
	return p
}

// overdueRoot is a noted root to apply (overdue).
type overdueRoot struct {
	id   string
	refs []string
}

// overdue are the roots noted at or before due that applied does not
// report applied.
func (u *UnappliedRoots) overdue(due time.Time, applied func(id string, refs []string) bool) []overdueRoot {
	u.mu.Lock()
	defer u.mu.Unlock()
	var late []overdueRoot
	for id, r := range u.roots {
		if !r.at.After(due) && !applied(id, r.refs) {
			late = append(late, overdueRoot{id, r.refs})
		}
	}
	return late
}

// applyOverdue applies the roots that waited Settings.RootWait without a
// batch applying them, from their note: the own relay said it stores them
// (its OK, or a read of it), and the self-subscription will not deliver
// them — it was reconnecting when the relay stored them, and a reconnect
// asks only for what was created since (a root synced from a remote relay
// is older), or the relay does not serve them to it. Applied like a
// batch's (applyRoot); a root whose announcement is not applied waits as
// an orphan, unless the orphans' bound refuses it: such roots are counted
// (Stuck) and stay noted. One WARN line the first time each happens. Run
// goroutine, before the repository index's snapshot (PublishRepos).
func (d *Discovery) applyOverdue() {
	u := d.unapplied
	if u == nil || d.cfg.RootWait <= 0 {
		return
	}
	due := u.clock.Now().Add(-d.cfg.RootWait)
	// Announcements first, so the roots below find their repositories.
	annApplied := func(ev *nostr.Event) bool {
		n := d.Repos[nip34.RepoRef(ev.PubKey, ev.Tags.GetD())]
		return (n != nil && n.AnnouncedAt >= int64(ev.CreatedAt)) || !d.hosts(ev)
	}
	if anns := u.takeOverdueAnnouncements(due, annApplied); len(anns) > 0 {
		lvl := zap.DebugLevel
		if !u.annLateWarned {
			u.annLateWarned, lvl = true, zap.WarnLevel
		}
		d.log.Log(lvl, "announcements the own relay stored were not applied by the self-subscription within sync.root_wait (its connection dropped meanwhile, or the relay does not serve them to it); applied from the relay's acknowledgements",
			zap.Int("announcements", len(anns)), zap.Duration("root_wait", d.cfg.RootWait))
		d.ApplyBatch(anns)
	}
	late := u.overdue(due, d.rootApplied)
	if len(late) == 0 {
		if u.stuck.Load() != 0 {
			u.stuck.Store(0)
		}
		return
	}
	delta := map[string]repoindex.Items{}
	add := func(url string) repoindex.Items {
		it, ok := delta[url]
		if !ok {
			it = repoindex.NewItems()
			delta[url] = it
		}
		return it
	}
	applied, stuck := 0, 0
	for _, r := range late {
		d.applyRoot(r.id, r.refs, add)
		if d.rootApplied(r.id, r.refs) {
			applied++
		} else {
			stuck++
		}
	}
	u.stuck.Store(int64(stuck))
	if applied > 0 {
		if u.late.Add(uint64(applied)) == uint64(applied) {
			d.log.Warn("roots the own relay stored were not applied by the self-subscription within sync.root_wait (its connection dropped meanwhile, or the relay does not serve them to it); applied from the relay's acknowledgements, later ones counted in ngit_sync_own_roots_applied_late_total",
				zap.Int("roots", applied), zap.Duration("root_wait", d.cfg.RootWait))
		}
		d.reposGen++
		d.deps.Applied(delta)
	}
	if stuck > 0 && !u.stuckWarned {
		u.stuckWarned = true
		d.log.Warn("roots the own relay stored cannot be applied: their repository's announcement is not applied and the orphan roots' bound is reached; counted in ngit_sync_own_roots_unapplied",
			zap.Int("roots", stuck), zap.Int("orphan_bound", maxOrphanRoots))
	}
}
