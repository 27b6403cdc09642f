package discovery

import (
	"maps"
	"slices"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
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
// root the orphans' bound refused whose announcement came later, or one of
// a hosted repository that the own relay stored and never serves to the
// self-subscription, stays until the bound.
const maxUnappliedRoots = 200_000

// UnappliedRoots are roots on the own relay the repository index may not
// have yet, by id, with their repository references. The wiring builds
// it before the ingest handler, which tells it of every event the own
// relay stored (ingest.Deps.Stored: Note), and hands it to discovery
// (Deps.Unapplied), which prunes it once its index holds them and saves
// it with the repository index. Its methods are safe from any goroutine.
type UnappliedRoots struct {
	selfKinds []int
	log       *zap.Logger
	mu        sync.Mutex
	roots     map[string][]string
	gen       uint64 // counts changes
	warned    bool   // the bound was logged
}

// NewUnappliedRoots returns an empty set noting roots of selfKinds (the
// self-subscription's kinds).
func NewUnappliedRoots(selfKinds []int, log *zap.Logger) *UnappliedRoots {
	if log == nil {
		log = zap.NewNop()
	}
	return &UnappliedRoots{selfKinds: slices.Clone(selfKinds), log: log}
}

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
		u.roots = map[string][]string{}
	}
	u.roots[ev.ID] = refs
	u.gen++
}

// pruneUnapplied forgets the roots the repository index has now, as a
// root or as an orphan under any of their references. Run
// goroutine, after the snapshot that holds them is published.
func (d *Discovery) pruneUnapplied() {
	u := d.unapplied
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, refs := range u.roots {
		for _, ref := range refs {
			if n := d.Repos[ref]; (n != nil && n.Roots.Has(id)) || d.orphans[ref].Has(id) {
				delete(u.roots, id)
				u.gen++
				break
			}
		}
	}
}

// dropUnhostedUnapplied forgets the roots of which no repository is
// hosted: the orphans were dropped (dropOrphans), they would wait
// forever. Run goroutine.
func (d *Discovery) dropUnhostedUnapplied() {
	u := d.unapplied
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, refs := range u.roots {
		if !slices.ContainsFunc(refs, func(ref string) bool { return d.Repos[ref] != nil }) {
			delete(u.roots, id)
			u.gen++
		}
	}
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
	for id, refs := range u.roots {
		for _, ref := range refs {
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
