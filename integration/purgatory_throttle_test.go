package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

// 40 identifiers whose data lives on one domain: the server never sees more
// than 5 concurrent requests nor more than 30 fetches in any window (the
// minute shrunk to 1s), and every identifier completes — the ones that found
// the domain busy are started from its queue as capacity frees, well before
// their 20 s backoff would retry them.
func TestPurgatoryDomainLimits(t *testing.T) {
	const n = 40
	window := time.Second
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.SyncedDelay = 50 * time.Millisecond
		c.Loop = 50 * time.Millisecond
		c.DomainConcurrency = 5
		c.DomainRequestsPerWindow = 30
		c.DomainWindow = window
		c.Expiry = time.Hour
	})
	srv := pgGitServer(t, 40*time.Millisecond)
	owner := newPgKey(t)
	var events []*nostr.Event
	for i := 0; i < n; i++ {
		d := fmt.Sprintf("repo-%02d", i)
		remote, err := srv.CreateRepo(owner.rel(t, d))
		if err != nil {
			t.Fatal(err)
		}
		c := mustCommit(t, remote, "main", d)
		env.localRepo(t, owner, d)
		env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{srv.CloneURL(owner.rel(t, d))}))
		events = append(events, pgState(t, owner, d, nostr.Now(), map[string]string{"refs/heads/main": c}, "main"))
	}
	for _, ev := range events {
		if err := env.P.Add(ev, false); err != nil {
			t.Fatal(err)
		}
	}
	pgWait(t, "all 40 released", func() bool { return env.P.Len() == 0 })
	// One main-loop attempt per identifier: none needed its backoff retry.
	if got := env.metric(t, "ngit_sync_purgatory_sync_attempts_total", nil); got != n {
		t.Errorf("sync attempts = %v, want %d", got, n)
	}
	for _, ev := range events {
		if _, ok := env.Own.has(ev.ID); !ok {
			t.Fatalf("state %s not published", ev.ID)
		}
	}
	st := srv.Stats()
	if st.MaxInFlight > 5 {
		t.Errorf("server saw %d concurrent requests, limit 5", st.MaxInFlight)
	}
	if st.MaxInFlight < 2 {
		t.Errorf("server never saw concurrent requests (max %d): throttle serialises", st.MaxInFlight)
	}
	if m := srv.MaxFetchesInWindow(window); m > 30 {
		t.Errorf("server saw %d fetches within %v, limit 30", m, window)
	}
	if st.Fetches < n {
		t.Errorf("server saw %d fetches for %d identifiers", st.Fetches, n)
	}
	if got := env.metric(t, "ngit_sync_purgatory_events_released_total", map[string]string{"kind": "30618"}); got != n {
		t.Errorf("released_total = %v", got)
	}
	if got := env.metric(t, "ngit_sync_purgatory_domain_requests_total", map[string]string{"domain": srv.Host(), "result": "ok"}); got < n {
		t.Errorf("domain_requests_total{ok} = %v", got)
	}
	// A queued identifier the throttle started as capacity freed may still
	// hold its slot for a moment after every event was released (it finds
	// nothing pending and ends): the gauge must reach 0, not be 0 at once.
	// A slot never given back fails here.
	pgWait(t, "domain_in_flight 0 after completion", func() bool {
		return env.metric(t, "ngit_sync_purgatory_domain_in_flight", nil) == 0
	})
}

// A burst of 10 state events for one identifier within 100 ms causes one
// fetch round (one fetch on the server), and all ten are released.
func TestPurgatoryBurstOneFetchRound(t *testing.T) {
	env := startPurgatory(t, nil) // default delays: 500 ms, loop 1 s
	const d = "burst"
	owner := newPgKey(t)
	srv := pgGitServer(t, 0)
	remote, err := srv.CreateRepo(owner.rel(t, d))
	if err != nil {
		t.Fatal(err)
	}
	var maints []pgKey
	var pks []string
	for i := 0; i < 10; i++ {
		k := newPgKey(t)
		maints = append(maints, k)
		pks = append(pks, k.pk)
	}
	env.localRepo(t, owner, d)
	env.P.AddAnnouncement(pgAnnouncement(t, owner, d, []string{srv.CloneURL(owner.rel(t, d))}, pks...))
	var events []*nostr.Event
	now := nostr.Now()
	var newest string
	for i, k := range maints {
		c := mustCommit(t, remote, fmt.Sprintf("b%d", i), fmt.Sprintf("burst %d", i))
		newest = c
		events = append(events, pgState(t, k, d, now-10+nostr.Timestamp(i), map[string]string{"refs/heads/main": c}, "main"))
	}
	var wg sync.WaitGroup
	for i, ev := range events {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 10 * time.Millisecond) // spread over 100 ms
			if err := env.P.Add(ev, false); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	pgWait(t, "burst released", func() bool { return env.P.Len() == 0 })
	if f := srv.Stats().Fetches; f != 1 {
		t.Errorf("server saw %d fetches for the burst, want 1", f)
	}
	if got := env.metric(t, "ngit_sync_purgatory_sync_attempts_total", nil); got != 1 {
		t.Errorf("sync attempts = %v, want 1", got)
	}
	for _, ev := range events {
		if _, ok := env.Own.has(ev.ID); !ok {
			t.Errorf("state %s not published", ev.ID)
		}
	}
	if got := mustRefs(t, gitserver.OpenRepo(env.repoPath(t, owner, d)))["refs/heads/main"]; got != newest {
		t.Errorf("main = %s, want the newest state's %s", got, newest)
	}
}

// An event first seen on the own relay waits OwnRelayDelay (the author's
// push may be on its way): if the push arrives it is released from local
// data without any fetch; if not, its data is fetched after the delay.
func TestPurgatoryOwnRelayEventDelay(t *testing.T) {
	delay := 400 * time.Millisecond
	env := startPurgatory(t, func(c *purgatory.Config) {
		c.OwnRelayDelay = delay
		c.Loop = 50 * time.Millisecond
	})
	owner := newPgKey(t)
	srv := pgGitServer(t, 0)

	// 1. No push: fetched from the remote after the delay, not re-published.
	remote, err := srv.CreateRepo(owner.rel(t, "late"))
	if err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, remote, "main", "pushed elsewhere")
	local := env.localRepo(t, owner, "late")
	env.P.AddAnnouncement(pgAnnouncement(t, owner, "late", []string{srv.CloneURL(owner.rel(t, "late"))}))
	ev := pgState(t, owner, "late", nostr.Now(), map[string]string{"refs/heads/main": c}, "main")
	added := time.Now()
	if err := env.P.Add(ev, true); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "own-relay state released", func() bool { return !env.P.Has(ev.ID) })
	times := srv.FetchTimes()
	if len(times) == 0 {
		t.Fatal("no fetch")
	}
	if early := times[0].Sub(added); early < delay {
		t.Errorf("fetched %v after arrival, before the %v own-relay delay", early, delay)
	}
	if got := mustRefs(t, local)["refs/heads/main"]; got != c {
		t.Errorf("main = %q, want %s", got, c)
	}
	if env.Own.count() != 0 {
		t.Errorf("an event already on the own relay was published again")
	}

	// 2. The push arrives during the delay: released without fetching.
	pushed := env.localRepo(t, owner, "pushed")
	env.P.AddAnnouncement(pgAnnouncement(t, owner, "pushed", []string{srv.CloneURL(owner.rel(t, "pushed"))}))
	fetches := srv.Stats().Fetches
	tip, err := pushed.Commit("", "the push", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev2 := pgState(t, owner, "pushed", nostr.Now(), map[string]string{"refs/heads/main": tip}, "main")
	if err := env.P.Add(ev2, true); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "pushed state released", func() bool { return !env.P.Has(ev2.ID) })
	if f := srv.Stats().Fetches; f != fetches {
		t.Errorf("fetched %d times although the data was local", f-fetches)
	}
	if got := mustRefs(t, pushed)["refs/heads/main"]; got != tip {
		t.Errorf("main = %q, want %s", got, tip)
	}
}
