package discovery

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// The persisted repository index waits as orphans for its announcements;
// a restart pages announcements and states in full and roots since then.
func TestRestoredReposAndSelfHistoryFilters(t *testing.T) {
	e := newTestDiscovery(t, nil)
	ref := "30617:" + strings.Repeat("a", 64) + ":proj"
	seen := e.clock.Now().Add(-time.Hour)
	e.RestoreRepos(PersistedRepos{Roots: map[string][]string{ref: {strings.Repeat("1", 64), strings.Repeat("2", 64)}}, SelfSeen: seen})
	if e.orphanCount != 2 || e.orphans[ref].Len() != 2 {
		t.Fatalf("restored roots: %d orphans", e.orphanCount)
	}
	if !e.restoredSelfSeen.Equal(seen) {
		t.Fatal("self-subscription position not restored")
	}
	snap, changed := e.snapshotRepos()
	if !changed || len(snap.Roots[ref]) != 2 {
		t.Fatalf("snapshot after restore: %v %v", changed, snap.Roots)
	}
	since := nostrTS(seen.Add(-e.cfg.SinceBuffer))
	fs := e.selfHistoryFilters(&since, true)
	if len(fs) != 2 || fs[0].Since != nil || fs[1].Since == nil {
		t.Fatalf("filters after a restore: %v", fs)
	}
	for _, k := range fs[0].Kinds {
		if k != 30617 && k != 30618 {
			t.Fatalf("full paging of kind %d, want announcements and states only", k)
		}
	}
	if fs := e.selfHistoryFilters(&since, false); len(fs) != 1 {
		t.Fatalf("filters on a reconnect: %v", fs)
	}
}

func nostrTS(t time.Time) nostr.Timestamp { return nostr.Timestamp(t.Unix()) }

// The status refresh copies the repository index only once a state store
// asked for it (RepoState): without one, no copy of every root is kept.
func TestRepoIndexCopiedOnlyWhenAskedFor(t *testing.T) {
	e := newTestDiscovery(t, nil)
	ref := "30617:" + strings.Repeat("a", 64) + ":proj"
	e.Repos[ref] = &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.SetOf(strings.Repeat("1", 64))}
	e.reposGen++
	e.PublishRepos()
	if e.reposSnap.Roots != nil {
		t.Fatalf("repository index copied with no state store: %v", e.reposSnap.Roots)
	}
	_ = e.RepoState() // not running: nothing refreshed yet
	e.PublishRepos()
	if got := e.RepoState(); len(got.Roots[ref]) != 1 || got.Gen != e.reposGen {
		t.Fatalf("RepoState after a refresh = %+v", got)
	}
}
