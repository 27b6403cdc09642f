package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// stateWorld is an own relay speaking NIP-77 and a remote relay holding one
// repository's roots and many comments on them.
type stateWorld struct {
	own, remote *harness.Relay
	alice, bob  *signed.Key
	repo        *nostr.Event
	roots       []*nostr.Event
	all         []*nostr.Event
}

func newStateWorld(t *testing.T, roots, commentsPerRoot int) *stateWorld {
	w := &stateWorld{alice: signed.NewKey(), bob: signed.NewKey()}
	w.own = harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), Negentropy: true})
	w.remote = harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true, ReqCap: 500})
	w.repo = repoFor(w.alice, "proj", w.own, w.remote)
	mustPublish(t, w.own, w.repo)
	addr := w.alice.RepoAddress("proj")
	w.all = []*nostr.Event{w.repo}
	for i := 0; i < roots; i++ {
		// History an hour old: older than since_buffer, as a restart meets it.
		old := signed.At(time.Now().Add(-time.Hour + time.Duration(i)*time.Second))
		issue := w.bob.Issue(addr, fmt.Sprintf("issue %d", i), old)
		w.roots = append(w.roots, issue)
		w.all = append(w.all, issue)
		for j := 0; j < commentsPerRoot; j++ {
			w.all = append(w.all, w.alice.Comment(issue, nil, signed.WithContent(fmt.Sprintf("comment %d on %d", j, i)), old))
		}
	}
	w.remote.Inject(w.all...)
	return w
}

func stateConfig(t *testing.T, own *harness.Relay, dir string) *config.Config {
	cfg := fastConfig(own)
	cfg.State.Dir = dir
	cfg.State.FlushInterval = 100 * time.Millisecond
	return cfg
}

// TestRestartCatchesUpWithOwnRelay: a sidecar restarted with its state
// directory loads the local index from the store and learns by NIP-77 what
// another client published to (or deleted from) the own relay while it was
// down, without
// reading the own relay's events back; nothing is published again.
//
// A GRASP relay holds little beyond what sync covers: one reconciliation of
// the whole relay does. On a relay that holds much more (here 1,200 notes
// unrelated to any repository, written while the sidecar was down) the
// catch-up reconciles only the filters sync covers and fetches none of it.
func TestRestartCatchesUpWithOwnRelay(t *testing.T) {
	t.Run("grasp-relay", func(t *testing.T) { testRestartCatchesUp(t, 0) })
	t.Run("general-relay", func(t *testing.T) { testRestartCatchesUp(t, 1200) })
}

func testRestartCatchesUp(t *testing.T, unrelated int) {
	w := newStateWorld(t, 20, 15)
	dir := t.TempDir()
	sc := startSidecar(t, stateConfig(t, w.own, dir))
	waitHas(t, w.own, w.all...)
	missing := func() (n int) {
		for _, ev := range w.all {
			if !sc.LocalIndex().Has(ev.ID) {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, syncTimeout, "local index holds the whole set", func() bool { return missing() == 0 })
	// Let a few flushes save the converged relay state (saved only while
	// nothing is on its way to the own relay).
	time.Sleep(5 * stateConfig(t, w.own, dir).State.FlushInterval)
	sc.Stop(t)

	// Another client writes to the own relay while the sidecar is down.
	late := w.bob.Comment(w.roots[3], nil, signed.WithContent("written while the sidecar was down"))
	mustPublish(t, w.own, late)
	// And an event is deleted from it behind the sidecar's back.
	gone := w.all[len(w.all)-1]
	if w.own.Delete(gone.ID) != 1 {
		t.Fatal("delete did not work")
	}
	notes := signed.Corpus()[:unrelated]
	w.own.Inject(notes...)
	w.own.ResetStats()
	w.remote.ResetStats()
	restarted := time.Now()

	sc2 := startSidecar(t, stateConfig(t, w.own, dir))
	if st := sc2.Status().State; st.Outcome != string(statestore.Resumed) {
		t.Fatalf("state outcome %q, want resumed", st.Outcome)
	}
	if !sc2.LocalIndex().Has(late.ID) {
		t.Fatal("the event another client published while the sidecar was down is not in the local index after the restart")
	}
	for _, n := range notes {
		if sc2.LocalIndex().Has(n.ID) {
			t.Fatal("an unrelated note on the own relay was fetched into the local index")
		}
	}
	if sc2.LocalIndex().Has(gone.ID) {
		t.Fatal("the event deleted from the own relay while the sidecar was down is still in the local index")
	}
	st := w.own.Stats()
	// The self-subscription pages the announcement again (the roots only
	// since the restored point: none); the comments (the bulk, 300) are
	// not read back: only the late one. Pages repeat their edge second.
	if max := 2*1 + 2 + 2; st.Sent["EVENT"] > max {
		t.Errorf("own relay sent %d events on restart, want at most %d (announcement, the late comment): a read-back", st.Sent["EVENT"], max)
	}
	if st.NegOpens == 0 {
		t.Error("no NIP-77 reconciliation with the own relay on restart")
	}
	// The remote relay resumes as a quick reconnect (catch-up with since
	// over what was confirmed), as a dropped connection would: no new
	// historic sync of the repository and its roots; a NIP-77 relay
	// reconciles the sync.since_buffer before the disconnection only
	// (each NEG-OPEN bounded by since and until).
	testkit.WaitFor(t, syncTimeout, "remote relay reconnected", func() bool { return w.remote.Stats().Reqs > 0 })
	time.Sleep(500 * time.Millisecond)
	for _, m := range w.remote.Received(restarted) {
		if m.Type == "NEG-OPEN" && !(strings.Contains(m.Raw, `"since":`) && strings.Contains(m.Raw, `"until":`)) {
			t.Errorf("remote relay got a NEG-OPEN after the restart beyond the since_buffer window (quick reconnect): %s", m.Raw)
		}
	}
	// Nothing is published again (the deleted event is older than the
	// quick reconnect's since: the next full resync restores it).
	if got := w.own.Stats().Received["EVENT"]; got != 0 {
		t.Errorf("%d events published to the own relay after the restart, want 0", got)
	}
}

// TestBadStoreGivesWorkingSidecar: a store made for another own relay, a
// store of an older format and a truncated store file each give one clear
// log line naming the reason, and a sidecar that syncs (from the relays,
// as without a store).
func TestBadStoreGivesWorkingSidecar(t *testing.T) {
	for _, tc := range []struct {
		reason string
		level  zapcore.Level
		damage func(t *testing.T, dir string)
	}{
		{"other-relay", zapcore.InfoLevel, func(t *testing.T, dir string) {
			s, err := statestore.Open(statestore.Options{Config: statestore.Config{Dir: dir}, OwnRelay: "ws://another-relay.example"})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}},
		{"old-format", zapcore.InfoLevel, func(t *testing.T, dir string) {
			db, err := bolt.Open(filepath.Join(dir, statestore.FileName), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucketIfNotExists([]byte("meta"))
				return b.Put([]byte("format"), []byte{0, 0, 0, 0})
			})
			db.Close()
		}},
		{"corrupt", zapcore.WarnLevel, func(t *testing.T, dir string) {
			s, err := statestore.Open(statestore.Options{Config: statestore.Config{Dir: dir}, OwnRelay: "ws://x.example"})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			path := filepath.Join(dir, statestore.FileName)
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/2)
		}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			w := newStateWorld(t, 3, 5)
			dir := t.TempDir()
			tc.damage(t, dir)
			core, logs := observer.New(zapcore.InfoLevel)
			cfg := stateConfig(t, w.own, dir)
			sc, err := sidecar.New(cfg, sidecar.Deps{Log: zap.New(core), Registry: prometheus.NewRegistry(), Version: "test"})
			if err != nil {
				t.Fatalf("sidecar.New on a %s store: %v", tc.reason, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- sc.Run(ctx) }()
			defer func() { cancel(); <-done }()
			testkit.WaitFor(t, syncTimeout, "sidecar ready", sc.Ready)
			waitHas(t, w.own, w.all...)
			lines := logs.FilterMessageSnippet("set aside").All()
			if len(lines) != 1 || lines[0].Level != tc.level || lines[0].ContextMap()["reason"] != tc.reason {
				t.Fatalf("log lines about the store: %+v, want one at %s with reason %s", lines, tc.level, tc.reason)
			}
			if got := sc.Status().State.Outcome; got != tc.reason {
				t.Fatalf("/status state outcome %q, want %q", got, tc.reason)
			}
		})
	}
}

// TestRestartAfterOwnRelayLostItsData: the own relay's database was wiped
// (or restored from an old backup) while the sidecar was down. The
// catch-up finds the events gone; the relays' confirmed progress no longer
// holds, so every remote relay syncs afresh and the own relay gets
// everything back, instead of a quick reconnect asking only for what is new.
func TestRestartAfterOwnRelayLostItsData(t *testing.T) {
	w := newStateWorld(t, 20, 60)
	dir := t.TempDir()
	sc := startSidecar(t, stateConfig(t, w.own, dir))
	waitHas(t, w.own, w.all...)
	time.Sleep(5 * stateConfig(t, w.own, dir).State.FlushInterval)
	sc.Stop(t)

	var lost []string
	for _, ev := range w.all[1:] { // the announcement stays
		lost = append(lost, ev.ID)
	}
	if n := w.own.Delete(lost...); n != len(lost) {
		t.Fatalf("deleted %d of %d", n, len(lost))
	}
	startSidecar(t, stateConfig(t, w.own, dir))
	waitHas(t, w.own, w.all...)
}
