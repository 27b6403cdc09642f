package discovery

import (
	"context"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// startEarlyCatchUp starts the NIP-77 catch-up of a restored local index
// with the own relay as the engine starts, beside the self-subscription's
// paging of announcements and roots instead of after it (the restart's
// time to ready is the longer of the two, not their sum): it reconciles
// the whole own relay, and the restored repository index names what its
// per-filter fallback asks. startInitialFill waits for its outcome.
func (d *Discovery) startEarlyCatchUp(ctx context.Context) {
	if d.local == nil || !d.deps.LocalRestored || d.catchUpTried {
		return
	}
	d.catchUpTried = true
	repos, roots := d.reposAndRoots()
	done := make(chan bool, 1)
	d.earlyCatchUp = done
	d.catchUpDone = make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ok := d.catchUp(ctx, repos, roots.Sorted())
		d.catchUpOK.Store(ok)
		close(d.catchUpDone)
		done <- ok
	}()
}

// reposAndRoots are every repository of the index and their roots, and
// the orphan roots' repositories with them: before the self-subscription
// read the announcements, the restored roots wait there (RestoreRepos).
func (d *Discovery) reposAndRoots() ([]string, repoindex.Set) {
	repos := make([]string, 0, len(d.Repos)+len(d.orphans))
	roots := repoindex.NewSet()
	for ref, n := range d.Repos {
		repos = append(repos, ref)
		roots.AddAll(n.Roots)
	}
	for ref, o := range d.orphans {
		if _, ok := d.Repos[ref]; !ok {
			repos = append(repos, ref)
		}
		roots.AddAll(o)
	}
	return repos, roots
}
