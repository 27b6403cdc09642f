package integration

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestLearnedLimitsSurviveRestart: limits a relay enforces without
// announcing them (3 filters per REQ, 4 tag values per filter), learned
// from its refusals, are kept in the state store: the restarted sidecar
// subscribes within them at once, and the relay refuses nothing (no
// CLOSED) while it resumes and a new reply arrives live.
func TestLearnedLimitsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts harness.RelayOptions
	}{
		{"filters", harness.RelayOptions{Negentropy: true, ReqCap: 500, MaxFilters: 3}},
		{"tag-values", harness.RelayOptions{ReqCap: 500, MaxTagValues: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := ownRelay(t)
			tc.opts.Name = tc.name
			remote := harness.Start(t, tc.opts)
			evs := wildRepo(t, own, remote, "restart-"+tc.name, scaled(300, 200))
			dir := t.TempDir()
			cfg := stateConfig(t, own, dir)
			cfg.Sync.ValuesPerFilter = 20
			sc := startSidecar(t, cfg)
			waitSyncedComplete(t, sc, own, remote, evs)
			waitRootsConfirmed(t, sc, remote, evs)
			if n := remote.Stats().Sent["CLOSED"]; n == 0 {
				t.Fatal("the relay refused nothing: the sidecar learned no limit from it")
			}
			sc.Stop(t)

			remote.ResetStats()
			sc2 := startSidecar(t, stateConfig(t, own, dir))
			var last *nostr.Event
			for _, ev := range evs {
				if ev.Kind == nip34.KindIssue {
					last = ev
				}
			}
			live := signed.NewKey().Comment(last, nil)
			published := 0 // each publish is a connection of its own
			testkit.WaitFor(t, syncTimeout, "a live reply after the restart", func() bool {
				mustPublish(t, remote, live)
				published++
				return own.Has(live.ID)
			})
			waitRootsConfirmed(t, sc2, remote, evs)
			st := remote.Stats()
			if st.Sent["CLOSED"] != 0 {
				t.Fatalf("after the restart the relay refused %d requests (CLOSED): the learned limits were not kept", st.Sent["CLOSED"])
			}
			if n := st.Connections - published; n != 1 {
				t.Fatalf("the sidecar opened %d connections after the restart, want 1", n)
			}
		})
	}
}
