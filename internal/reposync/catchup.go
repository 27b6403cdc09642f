package reposync

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
func (e *Engine) startEarlyCatchUp(ctx context.Context) {
	if e.local == nil || !e.d.LocalRestored || e.catchUpTried {
		return
	}
	e.catchUpTried = true
	repos, roots := e.reposAndRoots()
	done := make(chan bool, 1)
	e.earlyCatchUp = done
	e.catchUpDone = make(chan struct{})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ok := e.catchUp(ctx, repos, roots.Sorted())
		e.catchUpOK.Store(ok)
		close(e.catchUpDone)
		done <- ok
	}()
}

// reposAndRoots are every repository of the index and their roots, and
// the orphan roots' repositories with them: before the self-subscription
// read the announcements, the restored roots wait there (RestoreRepos).
func (e *Engine) reposAndRoots() ([]string, repoindex.Set) {
	repos := make([]string, 0, len(e.repos)+len(e.orphans))
	roots := repoindex.NewSet()
	for ref, n := range e.repos {
		repos = append(repos, ref)
		roots.AddAll(n.Roots)
	}
	for ref, o := range e.orphans {
		if _, ok := e.repos[ref]; !ok {
			repos = append(repos, ref)
		}
		roots.AddAll(o)
	}
	return repos, roots
}
