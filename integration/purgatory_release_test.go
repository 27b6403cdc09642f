package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

// The seed's scenario: three state events for one repository from three
// maintainers whose commits live on a fast, a slow and a dead server. The
// first is released right after its own fetch (before the next server is
// even asked), the second after its own, the third stays, is retried on the
// backoff schedule, and expires.
func TestPurgatoryThreeMaintainersFastSlowDead(t *testing.T) {
	backoff := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.SyncedDelay = 100 * time.Millisecond
		c.Loop = 50 * time.Millisecond
		c.Backoff = backoff
		c.Expiry = 6 * time.Second
	})
	const d = "tool"
	owner, m1, m2, m3 := newPgKey(t), newPgKey(t), newPgKey(t), newPgKey(t)
	fast := pgGitServer(t, 0)
	slow := pgGitServer(t, 150*time.Millisecond)
	dead := startDeadServer(t)

	fastRepo, err := fast.CreateRepo(m1.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	slowRepo, err := slow.CreateRepo(m2.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	cA := mustCommit(t, fastRepo, "main", "A")
	cB := mustCommit(t, slowRepo, "main", "B")
	cC := strings.Repeat("c", 40) // only on the dead server

	env.localRepo(t, owner, d)
	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{"https://own.example:443/" + owner.rel(t, d)}, m1.pk, m2.pk, m3.pk))
	env.P.AddAnnouncement(pgAnnouncement(t, m1, d, []string{fast.CloneURL(m1.rel(t, d))}))
	env.P.AddAnnouncement(pgAnnouncement(t, m2, d, []string{slow.CloneURL(m2.rel(t, d))}))
	env.P.AddAnnouncement(pgAnnouncement(t, m3, d, []string{dead.URL + "/" + m3.rel(t, d)}))

	now := nostr.Now()
	stA := pgState(t, m1, d, now-30, map[string]string{"refs/heads/main": cA}, "main")
	stB := pgState(t, m2, d, now-20, map[string]string{"refs/heads/main": cB}, "main")
	stC := pgState(t, m3, d, now-10, map[string]string{"refs/heads/main": cC}, "main")
	added := time.Now()
	for _, ev := range []*nostr.Event{stA, stB, stC} {
		if err := env.P.Add(ev, false); err != nil {
			t.Fatal(err)
		}
	}

	pgWait(t, "A and B released", func() bool { return !env.P.Has(stA.ID) && !env.P.Has(stB.ID) })
	relA, okA := env.Own.has(stA.ID)
	relB, okB := env.Own.has(stB.ID)
	if !okA || !okB {
		t.Fatalf("released but not on the own relay: A=%v B=%v", okA, okB)
	}
	// Partial release: whichever server was asked first, its event was on
	// the own relay before the other server saw its first request.
	fastFirst, slowFirst := fast.FetchTimes()[0], slow.FetchTimes()[0]
	if fastFirst.Before(slowFirst) {
		if !relA.Before(slowFirst) {
			t.Errorf("A released at %v, after the slow server was asked at %v", relA, slowFirst)
		}
	} else if !relB.Before(fastFirst) {
		t.Errorf("B released at %v, after the fast server was asked at %v", relB, fastFirst)
	}
	if !env.P.Has(stC.ID) {
		t.Fatal("C released without its data")
	}

	// C is retried on the backoff schedule, then expires unpublished.
	pgWait(t, "C expired", func() bool { return !env.P.Has(stC.ID) })
	if _, ok := env.Own.has(stC.ID); ok {
		t.Error("C published without its data")
	}
	if time.Since(added) < env.Cfg.Expiry {
		t.Errorf("C dropped after %v, before the %v expiry", time.Since(added), env.Cfg.Expiry)
	}
	conns := dead.connections()
	if len(conns) < 3 {
		t.Fatalf("dead server saw %d attempts, want at least 3 (first try and backoff retries)", len(conns))
	}
	for i := 1; i < len(conns); i++ {
		want := backoff[min(i-1, len(backoff)-1)]
		if gap := conns[i].Sub(conns[i-1]); gap < want {
			t.Errorf("retry %d came %v after the previous attempt, want >= %v", i, gap, want)
		}
	}

	// The owner's repository follows the newest released state: B (A is older).
	refs := mustRefs(t, gitserver.OpenRepo(env.repoPath(t, owner, d)))
	if refs["refs/heads/main"] != cB || len(refs) != 1 {
		t.Errorf("owner refs = %v, want main=%s only", refs, cB)
	}
}

// Every authorised owner's repository ends up exactly at the released state
// (branches and tags created, moved and deleted; HEAD set), and a state from
// an author no owner authorises is never applied nor published.
func TestPurgatoryRefsMatchStateAndUnauthorised(t *testing.T) {
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.SyncedDelay = 50 * time.Millisecond
		c.Loop = 50 * time.Millisecond
		c.CreateMissingRepos = true
		c.Backoff = []time.Duration{50 * time.Millisecond}
	})
	const d = "lib"
	owner, maint, stranger := newPgKey(t), newPgKey(t), newPgKey(t)
	srv := pgGitServer(t, 0)
	remote, err := srv.CreateRepo(maint.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, remote, "main", "one")
	c2 := mustCommit(t, remote, "main", "two")
	c3 := mustCommit(t, remote, "dev", "three")
	tagObj, err := remote.AnnotatedTag("v1", c1, "release 1")
	if err != nil {
		t.Fatal(err)
	}
	evil := mustCommit(t, remote, "evil", "stranger's")

	// The owner's repository already has refs the state does not list.
	ownerRepo := env.localRepo(t, owner, d)
	old := mustCommit(t, ownerRepo, "stale", "old work")
	if err := ownerRepo.SetRef("refs/tags/old", old); err != nil {
		t.Fatal(err)
	}
	if err := ownerRepo.SetRef("refs/heads/main", old); err != nil {
		t.Fatal(err)
	}

	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{srv.CloneURL(maint.rel(t, d))}, maint.pk))
	env.P.AddAnnouncement(pgAnnouncement(t, maint, d, []string{srv.CloneURL(maint.rel(t, d))}))

	want := map[string]string{
		"refs/heads/main": c2,
		"refs/heads/dev":  c3,
		"refs/tags/v1":    tagObj,
		"refs/tags/v2":    c2,
	}
	state := pgState(t, maint, d, nostr.Now()-5, want, "dev")
	state.Tags = append(state.Tags, nostr.Tag{"refs/tags/v1^{}", c1}) // peeled entry: ignored
	if err := state.Sign(maint.sk); err != nil {
		t.Fatal(err)
	}
	bad := pgState(t, stranger, d, nostr.Now(), map[string]string{"refs/heads/main": evil}, "main")
	if err := env.P.Add(state, false); err != nil {
		t.Fatal(err)
	}
	// No hosted announcement lets the stranger push: not held at all.
	if err := env.P.Add(bad, false); !errors.Is(err, purgatory.ErrNotHosted) {
		t.Fatalf("stranger's state: %v, want ErrNotHosted", err)
	}
	pgWait(t, "state released", func() bool { return !env.P.Has(state.ID) })
	if _, ok := env.Own.has(state.ID); !ok {
		t.Fatal("released state not on the own relay")
	}
	for _, k := range []pgKey{owner, maint} {
		r := gitserver.OpenRepo(env.repoPath(t, k, d))
		refs := mustRefs(t, r)
		if len(refs) != len(want) {
			t.Errorf("%s refs = %v, want %v", k.npub(t)[:12], refs, want)
		}
		for ref, oid := range want {
			if refs[ref] != oid {
				t.Errorf("%s %s = %q, want %q", k.npub(t)[:12], ref, refs[ref], oid)
			}
		}
		if head, err := r.HEAD(); err != nil || head != "refs/heads/dev" {
			t.Errorf("%s HEAD = %q, %v", k.npub(t)[:12], head, err)
		}
	}
	// The stranger's state is neither held, published nor applied.
	if env.P.Has(bad.ID) {
		t.Error("unauthorised state held")
	}
	if _, ok := env.Own.has(bad.ID); ok {
		t.Error("unauthorised state published")
	}
	for _, k := range []pgKey{owner, maint} {
		for ref, oid := range mustRefs(t, gitserver.OpenRepo(env.repoPath(t, k, d))) {
			if oid == evil {
				t.Errorf("unauthorised commit applied at %s", ref)
			}
		}
	}
}

// A PR is released once its tip (found through the PR's own clone URL) is in
// the repository, with refs/nostr/<event id> pointing at it; a PR update
// gets its own ref.
func TestPurgatoryPRRelease(t *testing.T) {
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.SyncedDelay = 50 * time.Millisecond
		c.Loop = 50 * time.Millisecond
	})
	const d = "app"
	owner, contributor := newPgKey(t), newPgKey(t)
	fork := pgGitServer(t, 0)
	forkRepo, err := fork.CreateRepo(contributor.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	tip := mustCommit(t, forkRepo, "feature", "feature work")
	tip2 := mustCommit(t, forkRepo, "feature", "review fixes")
	local := env.localRepo(t, owner, d)
	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{"https://own.example:443/" + owner.rel(t, d)}))

	pr := pgPR(t, contributor, purgatory.KindPR, owner, d, tip, fork.CloneURL(contributor.rel(t, d)))
	if err := env.P.Add(pr, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "PR released", func() bool { return !env.P.Has(pr.ID) })
	if got := mustRefs(t, local)["refs/nostr/"+pr.ID]; got != tip {
		t.Fatalf("refs/nostr/%s = %q, want %s", pr.ID, got, tip)
	}
	if _, ok := env.Own.has(pr.ID); !ok {
		t.Fatal("PR not published")
	}

	upd := pgPR(t, contributor, purgatory.KindPRUpdate, owner, d, tip2, fork.CloneURL(contributor.rel(t, d)),
		nostr.Tag{"E", pr.ID}, nostr.Tag{"P", contributor.pk})
	if err := env.P.Add(upd, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "PR update released", func() bool { return !env.P.Has(upd.ID) })
	refs := mustRefs(t, local)
	if refs["refs/nostr/"+upd.ID] != tip2 || refs["refs/nostr/"+pr.ID] != tip {
		t.Fatalf("refs = %v", refs)
	}
	if _, ok := env.Own.has(upd.ID); !ok {
		t.Fatal("PR update not published")
	}
}

// Clone URLs from announcements must not reach loopback or private
// addresses unless the operator allows it: nothing is fetched from them.
func TestPurgatoryRefusesPrivateCloneURLs(t *testing.T) {
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.AllowPrivateAddresses = false
		c.SyncedDelay = 20 * time.Millisecond
		c.Loop = 20 * time.Millisecond
		c.Backoff = []time.Duration{20 * time.Millisecond}
	})
	const d = "private"
	owner := newPgKey(t)
	srv := pgGitServer(t, 0)
	remote, err := srv.CreateRepo(owner.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, remote, "main", "x")
	env.localRepo(t, owner, d)
	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{srv.CloneURL(owner.rel(t, d)), "file:///etc/passwd", "ext::sh -c id"}))
	ev := pgState(t, owner, d, nostr.Now(), map[string]string{"refs/heads/main": c}, "main")
	if err := env.P.Add(ev, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "three sync attempts", func() bool { return env.metric(t, "ngit_sync_purgatory_sync_attempts_total", nil) >= 3 })
	if f := srv.Stats().Requests; f != 0 {
		t.Errorf("loopback clone URL was contacted %d times", f)
	}
	if !env.P.Has(ev.ID) {
		t.Error("released without data")
	}
	if got := env.metric(t, "ngit_sync_purgatory_domain_requests_total", map[string]string{"result": "error"}); got < 3 {
		t.Errorf("domain_requests_total{error} = %v", got)
	}
}

// An older state from a maintainer never overwrites the refs of a newer one
// already applied, even when its data arrives later; it is still published
// (the relay keeps one state per author). An older state from the same
// author as a known newer one is refused (ErrStale).
func TestPurgatoryOlderStateNeverOverwrites(t *testing.T) {
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.SyncedDelay = 20 * time.Millisecond
		c.Loop = 20 * time.Millisecond
	})
	const d = "order"
	owner, m1, m2 := newPgKey(t), newPgKey(t), newPgKey(t)
	srv := pgGitServer(t, 0)
	remote, err := srv.CreateRepo(owner.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	cOld := mustCommit(t, remote, "old", "old")
	cNew := mustCommit(t, remote, "new", "new")
	local := env.localRepo(t, owner, d)
	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{srv.CloneURL(owner.rel(t, d))}, m1.pk, m2.pk))

	now := nostr.Now()
	newer := pgState(t, m2, d, now, map[string]string{"refs/heads/main": cNew, "refs/tags/n": cNew}, "main")
	if err := env.P.Add(newer, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "newer state released", func() bool { return !env.P.Has(newer.ID) })

	older := pgState(t, m1, d, now-100, map[string]string{"refs/heads/main": cOld}, "main")
	if err := env.P.Add(older, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "older state released", func() bool { return !env.P.Has(older.ID) })
	if _, ok := env.Own.has(older.ID); !ok {
		t.Error("older state not published")
	}
	refs := mustRefs(t, local)
	if refs["refs/heads/main"] != cNew || refs["refs/tags/n"] != cNew || len(refs) != 2 {
		t.Errorf("refs = %v, want the newer state's (main=%s, tag n)", refs, cNew)
	}

	stale := pgState(t, m2, d, now-50, map[string]string{"refs/heads/main": cOld}, "main")
	if err := env.P.Add(stale, false); !errors.Is(err, purgatory.ErrStale) {
		t.Errorf("older state of the same author: %v, want ErrStale", err)
	}
}
