package reposync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

func newBareEngine(t *testing.T) *Engine {
	t.Helper()
	return newBareEngineWith(t, DefaultConfig(), nil)
}

// newBareEngineWith is newBareEngine with cfg and, when local is set, a
// LocalIndex (so the engine builds its own-relay local set).
func newBareEngineWith(t *testing.T, cfg Config, local *localindex.Index) *Engine {
	t.Helper()
	return newBareEngineDeps(t, cfg, func(d *Deps) { d.LocalIndex = local })
}

// newBareEngineDeps is newBareEngine with cfg and deps changed by mut (its
// Clock, when set, is the health tracker's too).
func newBareEngineDeps(t *testing.T, cfg Config, mut func(*Deps)) *Engine {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := Deps{Registry: reg}
	mut(&d)
	clk := d.Clock
	if clk == nil {
		clk = clock.NewManual(time.Unix(1_700_000_000, 0))
	}
	ht, err := health.New(health.DefaultConfig(), clk, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	noDial := func(context.Context, string, relay.Options) (*relay.Conn, error) {
		return nil, errors.New("no network in this test")
	}
	in, err := ingest.New(ingest.DefaultConfig(), ingest.Deps{Publisher: nopPublisher{}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	d.Health, d.Dial, d.DialOwn, d.Ingest = ht, noDial, noDial, in
	e, err := New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the test calls the Run goroutine's methods itself. Dial
	// attempts the engine starts fail at once and are waited for.
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() { cancel(); e.wg.Wait() })
	return e
}

// TestSelfBatchRootBeforeAnnouncement: the self-subscription streams newest
// first, so a batch can hold root events whose announcement only comes in
// a later batch. Those roots must not be lost.
func TestSelfBatchRootBeforeAnnouncement(t *testing.T) {
	e := newBareEngine(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref := nip34.RepoRef(pk, "repo")
	sign := func(ev *nostr.Event) *nostr.Event {
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	var roots []*nostr.Event
	for i := range 3 {
		roots = append(roots, sign(&nostr.Event{Kind: 1621, CreatedAt: nostr.Timestamp(2000 + i), Content: "issue",
			Tags: nostr.Tags{{"a", ref}}}))
	}
	ann := sign(&nostr.Event{Kind: 30617, CreatedAt: 1000, Tags: nostr.Tags{{"d", "repo"}, {"relays", "wss://relay.example.com"}}})

	e.applySelfBatch(roots) // the repository is not known yet
	if _, ok := e.repos[ref]; ok {
		t.Fatal("a root event created the repository")
	}
	e.applySelfBatch([]*nostr.Event{ann})
	needs := e.repos[ref]
	if needs == nil {
		t.Fatal("announcement not applied")
	}
	for _, r := range roots {
		if !needs.Roots.Has(r.ID) {
			t.Errorf("root %s seen before its announcement was lost", r.ID[:8])
		}
	}
	if e.orphanCount != 0 || len(e.orphans) != 0 {
		t.Errorf("orphans left: %d in %d repos", e.orphanCount, len(e.orphans))
	}
	// The relay the announcement lists is asked about the roots too.
	target, _ := repoindex.DeriveRelayTarget(e.repos, "wss://relay.example.com", false)
	if target.Roots.Len() != len(roots) {
		t.Errorf("relay target has %d roots, want %d", target.Roots.Len(), len(roots))
	}
}

// TestOrphanRootsBounded: a root tagging a malformed reference is not kept,
// and roots whose announcement never came are dropped once the own relay's
// history has been read.
func TestOrphanRootsBounded(t *testing.T) {
	e := newBareEngine(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	root := &nostr.Event{Kind: 1621, CreatedAt: 2000, Content: "issue", Tags: nostr.Tags{
		{"a", nip34.RepoRef(pk, "never-announced")}, {"a", "30617:nothex:x"}, {"a", "30617:" + pk + ":"},
	}}
	if err := root.Sign(sk); err != nil {
		t.Fatal(err)
	}
	e.applySelfBatch([]*nostr.Event{root})
	if e.orphanCount != 1 || len(e.orphans) != 1 {
		t.Fatalf("kept %d orphans under %d refs, want only the well-formed ref", e.orphanCount, len(e.orphans))
	}
	e.dropOrphans()
	if e.orphanCount != 0 || len(e.orphans) != 0 {
		t.Fatalf("%d orphans left after dropOrphans", e.orphanCount)
	}
	for ref, want := range map[string]bool{
		nip34.RepoRef(pk, "d"): true, "30617:" + pk + ":": false, "30617:" + pk: false,
		"30618:" + pk + ":d": false, "30617:" + strings.ToUpper(pk) + ":d": false,
	} {
		if got := validRepoRef(ref); got != want {
			t.Errorf("validRepoRef(%q) = %t, want %t", ref, got, want)
		}
	}
}

// nopPublisher never answers: nothing in these tests is published.
type nopPublisher struct{}

func (nopPublisher) Submit(context.Context, *nostr.Event, func(publish.Result)) error { return nil }
func (nopPublisher) Publish(context.Context, *nostr.Event) (publish.Result, error) {
	return publish.Result{}, errors.New("not publishing in this test")
}

// TestBatchedDropsRootContent: a self batch keeps a root without its
// content (a patch's diff waits for applySelfBatch, which reads only the
// id and tags), leaves the event the handler got untouched, and keeps
// announcements and states whole (noteHead persists their JSON).
func TestBatchedDropsRootContent(t *testing.T) {
	patch := &nostr.Event{ID: "p", Kind: nip34.KindPatch, Content: "diff --git a/x b/x", Tags: nostr.Tags{{"a", "30617:pk:repo"}}}
	b := batched(patch)
	if b.Content != "" || b.ID != "p" || len(b.Tags) != 1 || patch.Content == "" {
		t.Fatalf("batched patch %+v, original content %q", b, patch.Content)
	}
	for _, k := range []int{nip34.KindRepoAnnouncement, nip34.KindRepoState} {
		ev := &nostr.Event{ID: "h", Kind: k, Content: "kept"}
		if batched(ev) != ev {
			t.Fatalf("kind %d not kept whole", k)
		}
	}
}
