package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestRestartLearnsOldDatedAnnouncementAndState: a restart on the state
// directory takes the announcements and states from the store and pages
// them only since the persisted read point, yet learns what another client
// put on the own relay while the sidecar was down with a created_at older
// than that point (an announcement, a state, a root event: the NIP-77
// catch-up fetches them by id and the self-subscription's handling applies
// them), and forgets an announcement deleted from the own relay meanwhile.
// The announcements of the previous run are not read back.
func TestRestartLearnsOldDatedAnnouncementAndState(t *testing.T) {
	w := newStateWorld(t, 5, 2)
	carol := signed.NewKey()
	hourAgo := signed.At(time.Now().Add(-time.Hour))
	var extra []*nostr.Event
	for i := range 10 {
		extra = append(extra, announceAt(w.alice, fmt.Sprintf("extra%d", i), w.own, hourAgo))
	}
	mustPublish(t, w.own, extra...)
	dir := t.TempDir()
	cfg := stateConfig(t, w.own, dir)
	sc := startSidecar(t, cfg)
	waitHas(t, w.own, w.all...)
	testkit.WaitFor(t, syncTimeout, "11 repositories known", func() bool { return sc.Status().Repositories == 11 })
	time.Sleep(5 * cfg.State.FlushInterval)
	sc.Stop(t)

	// While the sidecar is down another client adds, with a created_at
	// two hours old (before the persisted read point − since_buffer), a
	// repository, a state of the first one and an issue of the new one,
	// and an announcement is deleted.
	twoHoursAgo := signed.At(time.Now().Add(-2 * time.Hour))
	newRepo := announceAt(carol, "late", w.own, twoHoursAgo, w.remote)
	state := w.alice.State("proj", twoHoursAgo)
	issue := carol.Issue(carol.RepoAddress("late"), "old-dated issue", twoHoursAgo)
	mustPublish(t, w.own, newRepo, state, issue)
	if w.own.Delete(extra[0].ID) != 1 {
		t.Fatal("delete did not work")
	}
	// The remote holds a comment on the new repository's issue: syncing it
	// shows the restarted sidecar took the repository and its root.
	comment := carol.Comment(issue, nil, twoHoursAgo)
	w.remote.Inject(comment)
	w.own.ResetStats()

	sc2 := startSidecar(t, stateConfig(t, w.own, dir))
	if st := sc2.Status().State; st.Outcome != string(statestore.Resumed) {
		t.Fatalf("state outcome %q, want resumed", st.Outcome)
	}
	// proj, extra1..9 and the late repository; extra0 is gone.
	testkit.WaitFor(t, syncTimeout, "11 repositories after the restart", func() bool { return sc2.Status().Repositories == 11 })
	waitHas(t, w.own, comment)
	// The catch-up fetches the three added events (its pages repeat their
	// edge second: 6), the paging since the read point brings the first
	// announcement (published just now; twice), the new repository's fill
	// its issue; the 10 announcements older than the read point are not
	// read back (that would be 10 more, 20 with the edges).
	if got := w.own.Stats().Sent["EVENT"]; got > 12 {
		t.Errorf("own relay sent %d events on restart, want at most 12: the announcements were read back", got)
	}
	sc2.Stop(t)

	// A third start: what the second learnt stays known, whether or not
	// its last repository snapshot was saved before it stopped (the local
	// index holds the added events; those the saved repository index lacks
	// are fetched by id), and the deleted announcement stays gone.
	w.own.ResetStats()
	sc3 := startSidecar(t, stateConfig(t, w.own, dir))
	testkit.WaitFor(t, syncTimeout, "11 repositories after the second restart", func() bool { return sc3.Status().Repositories == 11 })
	time.Sleep(300 * time.Millisecond)
	if n := sc3.Status().Repositories; n != 11 {
		t.Errorf("%d repositories after the second restart, want 11", n)
	}
	if got := w.own.Stats().Sent["EVENT"]; got > 12 {
		t.Errorf("own relay sent %d events on the second restart, want at most 12", got)
	}
	if got := w.own.Stats().Received["EVENT"]; got != 0 {
		t.Errorf("%d events published to the own relay on the second restart, want 0", got)
	}
}

// announceAt is repoFor with a created_at.
func announceAt(k *signed.Key, d string, own *harness.Relay, at signed.Option, relays ...*harness.Relay) *nostr.Event {
	urls := []string{own.URL()}
	for _, r := range relays {
		urls = append(urls, r.URL())
	}
	clone := "http://" + own.Addr() + "/" + k.Npub() + "/" + d + ".git"
	return k.Announcement(d, signed.WithRelays(urls...), signed.WithClone(clone), at)
}
