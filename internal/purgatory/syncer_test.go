package purgatory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// fakeSC is the git side in memory: a set of local objects, remotes that
// serve some objects, and release = "every object present".
type fakeSC struct {
	p *Purgatory

	mu       sync.Mutex
	local    map[string]bool
	sources  []Source
	serve    map[string][]string // url → objects it has
	fail     map[string]bool
	fetches  []string // urls, in call order
	releases int
	inFetch  map[string]int // domain → concurrent fetches
	maxFetch map[string]int
	block    chan struct{} // if set, Fetch waits on it
}

var _ SyncContext = (*fakeSC)(nil)

func newFakeSC() *fakeSC {
	return &fakeSC{local: map[string]bool{}, serve: map[string][]string{}, fail: map[string]bool{},
		inFetch: map[string]int{}, maxFetch: map[string]int{}}
}

func (f *fakeSC) Pending(id string) bool {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.p.pendingLocked(id)
}

func (f *fakeSC) entries(id string) []*entry {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	var out []*entry
	for _, e := range f.p.states[id] {
		out = append(out, e)
	}
	for _, e := range f.p.prs[id] {
		out = append(out, e)
	}
	return out
}

func (f *fakeSC) NeededOIDs(_ context.Context, id string) ([]string, error) {
	want := map[string]bool{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.entries(id) {
		for _, o := range e.oids {
			if !f.local[o] {
				want[o] = true
			}
		}
	}
	return keys(want), nil
}

func (f *fakeSC) Sources(context.Context, string) []Source {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Source(nil), f.sources...)
}

func (f *fakeSC) Fetch(_ context.Context, _ string, url string, oids []string, _ gitx.Gate) ([]string, error) {
	cu, _ := gitx.ParseCloneURL(url)
	f.mu.Lock()
	f.fetches = append(f.fetches, url)
	f.inFetch[cu.Domain]++
	if f.inFetch[cu.Domain] > f.maxFetch[cu.Domain] {
		f.maxFetch[cu.Domain] = f.inFetch[cu.Domain]
	}
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFetch[cu.Domain]--
	if f.fail[url] {
		return nil, fmt.Errorf("%w: connection refused", gitx.ErrFailed)
	}
	var got []string
	has := map[string]bool{}
	for _, o := range f.serve[url] {
		has[o] = true
	}
	for _, o := range oids {
		if has[o] {
			f.local[o] = true
			got = append(got, o)
		}
	}
	return got, nil
}

func (f *fakeSC) Release(_ context.Context, id string) (ReleaseResult, error) {
	var res ReleaseResult
	f.mu.Lock()
	f.releases++
	var ready []*entry
	for _, e := range f.entries(id) {
		ok := true
		for _, o := range e.oids {
			ok = ok && f.local[o]
		}
		if ok {
			ready = append(ready, e)
		}
	}
	f.mu.Unlock()
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	for _, e := range ready {
		if f.p.removeLocked(e) {
			f.p.m.released.WithLabelValues(kindLabel(e.ev.Kind)).Inc()
			if e.ev.Kind == KindState {
				res.States++
			} else {
				res.PRs++
			}
		}
	}
	return res, nil
}

func (f *fakeSC) fetchLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.fetches...)
}

type testEnv struct {
	p   *Purgatory
	sc  *fakeSC
	clk *clock.Manual
	reg *prometheus.Registry
}

func newTestEnv(t *testing.T, mut func(*Config)) *testEnv {
	t.Helper()
	cfg := DefaultConfig()
	if mut != nil {
		mut(&cfg)
	}
	clk := newManualClock()
	sc := newFakeSC()
	reg := prometheus.NewRegistry()
	p, err := New(cfg, Options{Clock: clk, SyncContext: sc, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	sc.p = p
	p.runCtx = context.Background()
	return &testEnv{p: p, sc: sc, clk: clk, reg: reg}
}

// add makes ev's repository hosted (an announcement by the state's author,
// or by each owner a PR's a tags name) and adds ev.
func (e *testEnv) add(t *testing.T, ev *nostr.Event, onOwnRelay bool) error {
	t.Helper()
	if ev.Kind == KindState {
		e.announce(t, ev.PubKey, ev.Tags.GetD(), nil)
	}
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "a" {
			if parts := strings.Split(tag[1], ":"); len(parts) == 3 {
				e.announce(t, parts[1], parts[2], nil)
			}
		}
	}
	return e.p.Add(ev, onOwnRelay)
}

// announce records an accepted announcement of owner's repository d (with
// extra tags) as the own relay's self-subscription would.
func (e *testEnv) announce(t *testing.T, owner, d string, extra nostr.Tags) {
	t.Helper()
	ann := &nostr.Event{Kind: KindAnnouncement, PubKey: owner, CreatedAt: 1, Tags: append(nostr.Tags{{"d", d}}, extra...)}
	ann.ID = ann.GetID()
	e.p.AddAnnouncement(ann)
}

// pass runs one loop pass and waits for every sync it started.
func (e *testEnv) pass() {
	e.p.pass(context.Background())
	e.p.wg.Wait()
}

func oid(n int) string { return fmt.Sprintf("%040x", n) }

func stateEv(t *testing.T, k keypair, id string, at nostr.Timestamp, commits ...string) *nostr.Event {
	tags := nostr.Tags{{"d", id}}
	for i, c := range commits {
		tags = append(tags, nostr.Tag{fmt.Sprintf("refs/heads/b%d", i), c})
	}
	if len(commits) > 0 {
		tags = append(tags, nostr.Tag{"HEAD", "ref: refs/heads/b0"})
	}
	return signed(t, k, KindState, at, tags)
}

// Three maintainers' states in unit form: their objects live on a fast, a
// slow and a dead server; each releases after its own fetch.
func TestSyncIdentifierPartialRelease(t *testing.T) {
	env := newTestEnv(t, nil)
	sc := env.sc
	sc.sources = []Source{{"http://fast/r.git", "fast"}, {"http://slow/r.git", "slow"}, {"http://dead/r.git", "dead"}}
	sc.serve["http://fast/r.git"] = []string{oid(1)}
	sc.serve["http://slow/r.git"] = []string{oid(2)}
	sc.fail["http://dead/r.git"] = true
	var evs []*nostr.Event
	for i := 1; i <= 3; i++ {
		ev := stateEv(t, newKey(t), "repo", nostr.Timestamp(1000+i), oid(i))
		if err := env.add(t, ev, false); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	complete := env.p.sync.syncIdentifier(context.Background(), "repo")
	if complete {
		t.Fatal("reported complete with the dead server's state held")
	}
	if got := sc.fetchLog(); strings.Join(got, " ") != "http://fast/r.git http://slow/r.git http://dead/r.git" {
		t.Fatalf("fetches = %v", got)
	}
	if env.p.Has(evs[0].ID) || env.p.Has(evs[1].ID) || !env.p.Has(evs[2].ID) {
		t.Fatalf("held after sync: %v %v %v", env.p.Has(evs[0].ID), env.p.Has(evs[1].ID), env.p.Has(evs[2].ID))
	}
	if sc.releases != 2 {
		t.Errorf("releases = %d, want one after each successful fetch", sc.releases)
	}
	if got := testkit.Value(t, env.p.m.domainRequests.WithLabelValues("dead", resultError)); got != 1 {
		t.Errorf("domain_requests{dead,error} = %v", got)
	}
	if got := testkit.Value(t, env.p.m.oidsFetched); got != 2 {
		t.Errorf("oids_fetched = %v", got)
	}
}

// A busy domain is never waited for: the main attempt uses the free domain
// and leaves the identifier in the busy domain's queue, which runs it as
// soon as a slot frees.
func TestSyncSkipsThrottledDomain(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.DomainConcurrency = 2 })
	sc := env.sc
	sc.sources = []Source{{"http://busy/r.git", "busy"}, {"http://free/r.git", "free"}}
	sc.serve["http://busy/r.git"] = []string{oid(7)}
	ev := stateEv(t, newKey(t), "repo", 1000, oid(7))
	if err := env.add(t, ev, false); err != nil {
		t.Fatal(err)
	}
	l1, l2 := env.p.th.TryAcquire("busy"), env.p.th.TryAcquire("busy")
	if complete := env.p.sync.syncIdentifier(context.Background(), "repo"); complete {
		t.Fatal("complete without the data")
	}
	if got := sc.fetchLog(); len(got) != 1 || got[0] != "http://free/r.git" {
		t.Fatalf("fetches = %v, want only the free domain", got)
	}
	if n := env.p.th.QueuedCount("busy"); n != 1 {
		t.Fatalf("busy domain queue = %d, want 1", n)
	}
	l1.Release(true)
	env.p.wg.Wait()
	l2.Release(true)
	env.p.wg.Wait()
	if env.p.Has(ev.ID) {
		t.Fatal("queued identifier not synced once the domain freed")
	}
	if got := sc.fetchLog(); len(got) != 2 || got[1] != "http://busy/r.git" {
		t.Fatalf("fetches = %v", got)
	}
	if n := env.p.th.QueuedCount("busy"); n != 0 {
		t.Fatalf("busy domain queue = %d after completion", n)
	}
}

// Many identifiers on one domain never exceed its concurrency.
func TestDomainConcurrencyManyIdentifiers(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.DomainRequestsPerWindow = 1000 })
	sc := env.sc
	sc.sources = []Source{{"http://one/r.git", "one"}}
	block := make(chan struct{})
	sc.block = block
	for i := 0; i < 20; i++ {
		sc.serve["http://one/r.git"] = append(sc.serve["http://one/r.git"], oid(100+i))
		if err := env.add(t, stateEv(t, newKey(t), fmt.Sprintf("r%d", i), 1000, oid(100+i)), false); err != nil {
			t.Fatal(err)
		}
	}
	env.clk.Advance(500 * time.Millisecond)
	env.p.pass(context.Background())
	testkit.WaitFor(t, 10*time.Second, "5 fetches in flight", func() bool { sc.mu.Lock(); defer sc.mu.Unlock(); return sc.inFetch["one"] == 5 })
	close(block)
	env.p.wg.Wait()
	if env.p.Len() != 0 {
		t.Fatalf("%d events still held", env.p.Len())
	}
	if m := sc.maxFetch["one"]; m != 5 {
		t.Fatalf("max concurrent fetches on the domain = %d, want 5", m)
	}
}

// Timing through the loop: synced delay, backoff 20/40/80/120 s, expiry.
func TestPassTimingBackoffExpiry(t *testing.T) {
	env := newTestEnv(t, nil)
	sc := env.sc
	sc.sources = []Source{{"http://dead/r.git", "dead"}}
	sc.fail["http://dead/r.git"] = true
	if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(1)), false); err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration, wantFetches int) {
		t.Helper()
		env.clk.Advance(d)
		env.pass()
		if got := len(sc.fetchLog()); got != wantFetches {
			t.Fatalf("at +%v: %d fetches, want %d", d, got, wantFetches)
		}
	}
	step(499*time.Millisecond, 0)
	step(time.Millisecond, 1)
	elapsed := 500 * time.Millisecond
	n := 1
	for _, b := range []time.Duration{20, 40, 80, 120, 120, 120} {
		step(b*time.Second-time.Millisecond, n)
		n++
		step(time.Millisecond, n)
		elapsed += b * time.Second
	}
	if got := testkit.Value(t, env.p.m.attempts.WithLabelValues(resultRetry)); got != float64(n) {
		t.Errorf("attempts{retry} = %v, want %d", got, n)
	}
	env.clk.Advance(30*time.Minute - elapsed)
	env.pass()
	if env.p.Len() != 0 {
		t.Fatal("not expired after 30 minutes")
	}
	if got := testkit.Value(t, env.p.m.expired.WithLabelValues(kindState)); got != 1 {
		t.Errorf("expired{30618} = %v", got)
	}
	if got := testkit.Value(t, env.p.m.queueSize); got != 0 {
		t.Errorf("queue size = %v after expiry", got)
	}
}

// A burst of 10 state events within 100 ms leads to one fetch round.
func TestBurstOneRound(t *testing.T) {
	env := newTestEnv(t, nil)
	sc := env.sc
	sc.sources = []Source{{"http://s/r.git", "s"}}
	for i := 0; i < 10; i++ {
		sc.serve["http://s/r.git"] = append(sc.serve["http://s/r.git"], oid(i+1))
		if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(i+1)), false); err != nil {
			t.Fatal(err)
		}
		env.clk.Advance(10 * time.Millisecond)
		env.pass()
	}
	env.clk.Advance(400 * time.Millisecond)
	env.pass()
	if got := sc.fetchLog(); len(got) != 1 {
		t.Fatalf("fetch rounds = %d, want 1", len(got))
	}
	if env.p.Len() != 0 {
		t.Fatalf("%d held", env.p.Len())
	}
	if got := testkit.Value(t, env.p.m.released.WithLabelValues(kindState)); got != 10 {
		t.Errorf("released = %v", got)
	}
}

// Events first seen on the own relay wait OwnRelayDelay (the push may come).
func TestOwnRelayDelay(t *testing.T) {
	env := newTestEnv(t, nil)
	env.sc.sources = []Source{{"http://s/r.git", "s"}}
	if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(1)), true); err != nil {
		t.Fatal(err)
	}
	env.clk.Advance(3*time.Minute - time.Millisecond)
	env.pass()
	if n := len(env.sc.fetchLog()); n != 0 {
		t.Fatalf("synced before the own-relay delay")
	}
	env.sc.mu.Lock()
	env.sc.local[oid(1)] = true // the author's push arrived meanwhile
	env.sc.mu.Unlock()
	env.clk.Advance(time.Millisecond)
	env.pass()
	if env.p.Len() != 0 || len(env.sc.fetchLog()) != 0 {
		t.Fatalf("held=%d fetches=%d: want released from local data without fetching", env.p.Len(), len(env.sc.fetchLog()))
	}
}

func TestAdd(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.MaxEntries = 3 })
	p := env.p
	alice := newKey(t)
	old := stateEv(t, alice, "repo", 1000, oid(1))
	newer := stateEv(t, alice, "repo", 2000, oid(2))
	if err := env.add(t, newer, false); err != nil {
		t.Fatal(err)
	}
	if err := env.add(t, old, false); !errors.Is(err, ErrStale) {
		t.Fatalf("older state from the same author: %v, want ErrStale", err)
	}
	newest := stateEv(t, alice, "repo", 3000, oid(3))
	if err := env.add(t, newest, false); err != nil {
		t.Fatal(err)
	}
	if p.Has(newer.ID) || !p.Has(newest.ID) || p.Len() != 1 {
		t.Fatalf("newest state does not replace the older one")
	}
	if err := env.add(t, newest, true); err != nil || !p.byID[newest.ID].onOwnRelay {
		t.Fatalf("re-add on own relay: %v", err)
	}
	owner := newKey(t)
	pr := signed(t, alice, KindPR, 1000, nostr.Tags{{"a", "30617:" + owner.pk + ":repo"}, {"c", oid(9)}, {"clone", "http://x/y.git"}})
	if err := env.add(t, pr, false); err != nil {
		t.Fatal(err)
	}
	if e := p.byID[pr.ID]; e.identifier != "repo" || len(e.owners) != 1 || e.owners[0] != owner.pk {
		t.Fatalf("pr entry = %+v", e)
	}
	for _, bad := range []*nostr.Event{
		signed(t, alice, KindPR, 1, nostr.Tags{{"c", oid(1)}}),
		signed(t, alice, KindPR, 1, nostr.Tags{{"a", "30617:" + owner.pk + ":repo"}, {"c", "xyz"}}),
		signed(t, alice, KindState, 1, nostr.Tags{{"d", "../etc"}}),
		signed(t, alice, KindState, 1, nostr.Tags{{"d", "r2"}, {"refs/heads/a..b", oid(1)}}),
		signed(t, alice, KindState, 1, nostr.Tags{{"d", "r2"}, {"HEAD", "ref: refs/heads/-x"}}),
	} {
		if err := env.add(t, bad, false); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("Add(%v) = %v, want ErrInvalidEvent", bad.Tags, err)
		}
	}
	if err := env.add(t, signed(t, alice, 1, 1, nil), false); !errors.Is(err, ErrNotHeld) {
		t.Errorf("kind 1: %v", err)
	}
	if err := env.add(t, stateEv(t, newKey(t), "r3", 1, oid(1)), false); err != nil {
		t.Fatal(err)
	}
	if err := env.add(t, stateEv(t, newKey(t), "r4", 1, oid(1)), false); !errors.Is(err, ErrFull) {
		t.Errorf("over MaxEntries: %v", err)
	}
	if got := testkit.Value(t, p.m.refused.WithLabelValues(kindState)); got != 1 {
		t.Errorf("refused = %v", got)
	}
	if got := testkit.Value(t, p.m.events.WithLabelValues(kindState)); got != 2 {
		t.Errorf("events{30618} = %v", got)
	}
	held := p.Held()
	if len(held) != 3 || len(p.IDs()) != 3 || p.Stats().Events() != 3 || p.Stats().PRs != 1 {
		t.Errorf("held=%v stats=%+v", held, p.Stats())
	}
	// Peeled entries are ignored.
	e, err := parseEntry(signed(t, alice, KindState, 1, nostr.Tags{{"d", "r"}, {"refs/tags/v1", oid(1)}, {"refs/tags/v1^{}", oid(2)}}), 8)
	if err != nil || len(e.refs) != 1 || len(e.oids) != 1 {
		t.Errorf("peeled: %+v %v", e, err)
	}

	off, err := New(DefaultConfig(), Options{Publisher: nopPublisher{}})
	if err != nil {
		t.Fatal(err)
	}
	if off.Needs(newest) {
		t.Error("Needs true without a git directory")
	}
	if err := off.Add(newest, false); !errors.Is(err, ErrDisabled) {
		t.Errorf("Add without git dir: %v", err)
	}
}

func TestMaintainerSets(t *testing.T) {
	ann := func(pk string, ms ...string) *announcement { return &announcement{pubkey: pk, maintainers: ms} }
	anns := map[string]*announcement{
		"alice": ann("alice", "bob"),
		"bob":   ann("bob", "carol"),
		"carol": ann("carol", "alice"), // cycle
		"dave":  ann("dave"),
		"erin":  ann("erin", "bob"),
	}
	set := maintainerSet(anns, "alice")
	if len(set) != 3 || !set["alice"] || !set["bob"] || !set["carol"] {
		t.Errorf("alice's set = %v", set)
	}
	if set := maintainerSet(anns, "dave"); len(set) != 1 {
		t.Errorf("dave's set = %v", set)
	}
	if got := authorisedOwners(anns, "carol"); strings.Join(got, ",") != "alice,bob,carol,erin" {
		t.Errorf("owners authorising carol = %v", got)
	}
	if got := authorisedOwners(anns, "mallory"); len(got) != 0 {
		t.Errorf("owners authorising mallory = %v", got)
	}
	if got := prTargets(anns, &entry{owners: []string{"dave"}}); strings.Join(got, ",") != "dave" {
		t.Errorf("pr targets for dave = %v", got)
	}
	if got := prTargets(anns, &entry{owners: []string{"erin"}}); strings.Join(got, ",") != "alice,bob,carol,erin" {
		t.Errorf("pr targets for erin = %v", got)
	}
}

func TestDomainLabelsBounded(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry(), 2)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{m.domain("a"), m.domain("b"), m.domain("c"), m.domain("a"), m.domain("d")}
	if strings.Join(got, ",") != "a,b,other,a,other" {
		t.Errorf("labels = %v", got)
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, *nostr.Event) error { return nil }

// Run wakes up when the earliest identifier is due (not only every Loop),
// and returns after its syncs finished once ctx ends.
func TestRunWakesAtDueTime(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Loop = time.Hour })
	env.p.runCtx = nil
	sc := env.sc
	sc.sources = []Source{{"http://s/r.git", "s"}}
	sc.serve["http://s/r.git"] = []string{oid(1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.p.Run(ctx) }()
	ev := stateEv(t, newKey(t), "repo", 1000, oid(1))
	if err := env.add(t, ev, false); err != nil {
		t.Fatal(err)
	}
	// Wait until Run armed its timer for the due time (500 ms), then move there.
	testkit.WaitFor(t, 10*time.Second, "timer armed", func() bool {
		due := env.clk.Now().Add(500 * time.Millisecond)
		return slices.ContainsFunc(env.clk.Deadlines(), due.Equal)
	})
	env.clk.Advance(500 * time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "released", func() bool { return !env.p.Has(ev.ID) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := env.p.Run(context.Background()); err == nil {
		t.Fatal("second Run accepted")
	}
}

// TestAddHostedOnly: only events of repositories whose accepted
// announcement lists the service (GRASP-01) are held; a PR is held under the
// first hosted repository among all its a tags; HostAll takes every accepted
// announcement. Nothing of a foreign repository reaches git.
func TestAddHostedOnly(t *testing.T) {
	const domain = "git.example.com"
	service := nostr.Tags{{"clone", "https://git.example.com/npub1x/r.git"}, {"relays", "wss://git.example.com"}}
	elsewhere := nostr.Tags{{"clone", "https://other.org/npub1x/r.git"}, {"relays", "wss://other.org"}}
	env := newTestEnv(t, func(c *Config) { c.OwnDomain = domain })
	p := env.p
	alice, bob, carol := newKey(t), newKey(t), newKey(t)

	st := stateEv(t, alice, "foreign", 1000, oid(1))
	if err := p.Add(st, false); !errors.Is(err, ErrNotHosted) {
		t.Fatalf("state without announcement: %v, want ErrNotHosted", err)
	}
	env.announce(t, alice.pk, "foreign", elsewhere)
	if err := p.Add(st, false); !errors.Is(err, ErrNotHosted) {
		t.Fatalf("state of an announcement not listing the service: %v, want ErrNotHosted", err)
	}
	env.announce(t, bob.pk, "hosted", service)
	hosted := stateEv(t, bob, "hosted", 1000, oid(2))
	if err := p.Add(hosted, false); err != nil {
		t.Fatalf("state of a hosted repository: %v", err)
	}
	if err := p.Add(stateEv(t, carol, "hosted", 1000, oid(3)), false); !errors.Is(err, ErrNotHosted) {
		t.Fatalf("state by someone the hosted announcement does not list: %v, want ErrNotHosted", err)
	}
	// A PR tagging a foreign repository first and the hosted one third.
	pr := signed(t, carol, KindPR, 1000, nostr.Tags{
		{"a", "30617:" + alice.pk + ":foreign"}, {"a", "30617:" + carol.pk + ":nowhere"},
		{"a", "30617:" + bob.pk + ":hosted"}, {"c", oid(4)}})
	if err := p.Add(pr, false); err != nil {
		t.Fatalf("PR whose third a tag is hosted: %v", err)
	}
	if e := p.byID[pr.ID]; e.identifier != "hosted" || len(e.owners) != 1 || e.owners[0] != bob.pk {
		t.Fatalf("PR held as %q owners %v, want hosted/%s", e.identifier, e.owners, bob.pk)
	}
	foreignPR := signed(t, carol, KindPR, 1000, nostr.Tags{{"a", "30617:" + alice.pk + ":foreign"}, {"c", oid(5)}})
	if err := p.Add(foreignPR, false); !errors.Is(err, ErrNotHosted) {
		t.Fatalf("PR of a foreign repository: %v, want ErrNotHosted", err)
	}
	if p.Len() != 2 {
		t.Fatalf("held %d, want 2", p.Len())
	}
	if _, ok := p.queue.entries["hosted"]; !ok || p.queue.len() != 1 {
		t.Fatalf("sync queue %v: want only the hosted identifier", p.queue.entries)
	}

	archive := newTestEnv(t, func(c *Config) { c.OwnDomain, c.HostAll = domain, true })
	archive.announce(t, alice.pk, "foreign", elsewhere)
	if err := archive.p.Add(st, false); err != nil {
		t.Fatalf("HostAll: %v", err)
	}
}

// TestFetchFailureWarnRateLimited: a failed fetch is logged at WARN with the
// clone URL and git's error, at most once per identifier per
// FailureLogInterval, the next line counting the failures in between;
// fetched objects and released events of an identifier are logged at
// DEBUG, and counted in the INFO summary line.
func TestFetchFailureWarnRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	env := newTestEnv(t, func(c *Config) {
		c.FailureLogInterval = 10 * time.Minute
		c.Backoff = []time.Duration{time.Minute}
	})
	env.p.sync.fails = newFailLog(zap.New(core), env.clk, env.p.cfg.FailureLogInterval)
	env.p.sync.log = zap.New(core)
	env.p.log = zap.New(core)
	sc := env.sc
	sc.sources = []Source{{"http://dead/r.git", "dead"}}
	sc.fail["http://dead/r.git"] = true
	if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(1)), false); err != nil {
		t.Fatal(err)
	}
	warns := func() []observer.LoggedEntry { return logs.FilterMessage("git fetch failed").All() }
	for range 5 { // five attempts, a minute apart
		env.clk.Advance(time.Minute)
		env.pass()
	}
	if got := len(sc.fetchLog()); got < 5 {
		t.Fatalf("%d fetches, want one per attempt", got)
	}
	if w := warns(); len(w) != 1 {
		t.Fatalf("%d warnings for 5 failures within the interval, want 1", len(w))
	}
	first := warns()[0].ContextMap()
	if first["url"] != "http://dead/r.git" || first["identifier"] != "repo" || !strings.Contains(fmt.Sprint(first["error"]), "connection refused") {
		t.Fatalf("warning fields %v: want the clone URL, the identifier and git's error", first)
	}
	for range 6 {
		env.clk.Advance(time.Minute)
		env.pass()
	}
	w := warns()
	if len(w) != 2 || w[1].ContextMap()["failures"].(int64) < 5 {
		t.Fatalf("after the interval: %d warnings, last %v; want a second one counting the failures since", len(w), w[len(w)-1].ContextMap())
	}

	// Each pass came a minute after the last: each summary counts one
	// failed fetch and one failed attempt.
	sums := logs.FilterMessage("purgatory summary").All()
	if len(sums) == 0 {
		t.Fatal("no summary line")
	}
	if m := sums[len(sums)-1].ContextMap(); sums[len(sums)-1].Level != zapcore.InfoLevel ||
		m["fetches"] != int64(1) || m["fetches_failed"] != int64(1) || m["attempts_failed"] != int64(1) {
		t.Fatalf("summary %v at %v: want one failed fetch and attempt, at INFO", m, sums[len(sums)-1].Level)
	}

	// The objects appear on the source: fetched and released, at DEBUG,
	// and counted in the next summary.
	sc.mu.Lock()
	sc.fail["http://dead/r.git"] = false
	sc.serve["http://dead/r.git"] = []string{oid(1)}
	sc.mu.Unlock()
	env.clk.Advance(time.Minute)
	env.pass()
	if got := levels(logs, "fetched objects"); len(got) != 1 || got[0] != zapcore.DebugLevel {
		t.Fatalf("fetched objects logged at %v, want once at DEBUG", got)
	}
	if got := levels(logs, "released events"); len(got) != 1 || got[0] != zapcore.DebugLevel {
		t.Fatalf("released events logged at %v, want once at DEBUG", got)
	}
	env.clk.Advance(time.Minute)
	env.pass()
	sums = logs.FilterMessage("purgatory summary").All()
	if m := sums[len(sums)-1].ContextMap(); m["objects_fetched"] != int64(1) || m["fetches_failed"] != int64(0) {
		t.Fatalf("summary after the fetch %v: want objects_fetched 1, no failure", m)
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).Len() - logs.FilterMessage("purgatory summary").Len(); n != 0 {
		t.Fatalf("%d INFO lines besides the summaries", n)
	}
}
