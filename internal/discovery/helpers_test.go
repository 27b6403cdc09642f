package discovery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// newTestDiscovery is discovery as the engine builds it with its default
// settings, not running: the test calls the Run goroutine's methods itself
// and what discovery posts to the engine is dropped. mut, when set,
// changes the settings and deps first (a Clock set there is its clock).
func newTestDiscovery(t *testing.T, mut func(*Settings, *Deps)) *Discovery {
	t.Helper()
	cfg := Settings{
		SelfKinds:   []int{nip34.KindRepoAnnouncement, nip34.KindRepoState, nip34.KindPatch, nip34.KindPullRequest, nip34.KindPRUpdate, nip34.KindIssue},
		BatchWindow: 5 * time.Second, BatchQuiet: 250 * time.Millisecond, SinceBuffer: 15 * time.Minute,
		MaxRelaysPerAnnouncement: 20, MaxRepositories: 50000,
	}
	deps := Deps{
		Post:            func(func()) {},
		Applied:         func(map[string]repoindex.Items) {},
		Ready:           func() {},
		ForgetConfirmed: func(context.Context, int) {},
		Refresh:         func() {}, // the engine is not running
	}
	if mut != nil {
		mut(&cfg, &deps)
	}
	if deps.Clock == nil {
		deps.Clock = clock.NewManual(time.Unix(1_700_000_000, 0))
	}
	// Wired as the sidecar does: the handler notes the roots the own relay
	// stores in the unapplied set (made here with heads kept, a state
	// store).
	var stored []func(*nostr.Event)
	if deps.KeepHeads && deps.Unapplied == nil {
		deps.Unapplied = NewUnappliedRoots(cfg.SelfKinds, deps.Clock, nil)
	}
	if deps.Unapplied != nil {
		stored = append(stored, deps.Unapplied.Note)
	}
	in, err := ingest.New(ingest.DefaultConfig(), ingest.Deps{Publisher: nopPublisher{}, Registry: prometheus.NewRegistry(), Stored: stored})
	if err != nil {
		t.Fatal(err)
	}
	deps.Ingest = in
	d, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// nopPublisher never answers: nothing in these tests is published.
type nopPublisher struct{}

func (nopPublisher) Submit(context.Context, *nostr.Event, func(publish.Result)) error { return nil }
func (nopPublisher) Publish(context.Context, *nostr.Event) (publish.Result, error) {
	return publish.Result{}, errors.New("not publishing in this test")
}
