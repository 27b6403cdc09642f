package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestFetchEachIDFromOneRelay: two NIP-77 relays hold the same events (one
// store). With both honest, each missing event is fetched from one of them:
// the sidecar receives each about once, not once per relay. When the relay
// whose fetch claimed the ids withholds them (EOSE alone) or drops its
// connection instead of answering, or sends forged copies, the other
// relay's fetch, which deferred to it, takes them over: every event still
// reaches the own relay, as the real event.
func TestFetchEachIDFromOneRelay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faulty harness.Faults
	}{
		{"honest", harness.Faults{}},
		// The faulty relay answers NIP-77 at once and holds its fetches
		// for 2 s; the other is 100 ms away, so its reconciliation ends
		// while the faulty relay's claims are open.
		{"withholds", harness.Faults{WithholdIDs: true, IDsAfter: 2 * time.Second}},
		{"drops", harness.Faults{DropOnIDs: true, IDsAfter: 2 * time.Second}},
		// The faulty relay answers by id at once, with forged signatures:
		// the own relay refuses them as invalid, and the real events come
		// from the other relay.
		{"forges", harness.Faults{ForgeIDs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := ownRelay(t)
			store := harness.NewStore()
			faulty := harness.Start(t, harness.RelayOptions{Name: "first", Negentropy: true, Store: store, Faults: tc.faulty})
			other := harness.RelayOptions{Name: "second", Negentropy: true, Store: store}
			if tc.faulty != (harness.Faults{}) {
				other.Faults.Latency = 50 * time.Millisecond
			}
			second := harness.Start(t, other)

			alice := signed.NewKey()
			const d = "claims"
			repo := repoFor(alice, d, own, faulty, second)
			mustPublish(t, own, repo)
			n := scaled(300, 90)
			var evs []*nostr.Event
			base := time.Now().Add(-10 * 24 * time.Hour)
			for i := 0; i < n; i++ {
				issue := alice.Issue(alice.RepoAddress(d), fmt.Sprint("issue ", i), signed.At(base.Add(time.Duration(i)*time.Minute)))
				evs = append(evs, issue)
				if i%3 == 0 {
					evs = append(evs, alice.Comment(issue, nil, signed.At(base.Add(time.Duration(i)*time.Minute+time.Second))))
				}
			}
			store.Put(repo)
			store.Put(evs...)

			cfg := fastConfig(own)
			cfg.Negentropy.ClaimWait = 20 * time.Second
			sc := startSidecar(t, cfg)
			waitHas(t, own, evs...)
			for _, ev := range evs {
				if got := own.Store().Get(ev.ID); got == nil || got.Sig != ev.Sig {
					t.Fatalf("own relay's copy of %s is not the real event", ev.ID)
				}
			}

			metric := func(name string, labels map[string]string) float64 {
				return testkit.Metric(t, sc.Registry, name, labels)
			}
			received := metric("ngit_sync_events_received_total", nil)
			claimed := metric("ngit_sync_negentropy_fetch_skipped_total", map[string]string{"reason": "claimed"})
			seen := metric("ngit_sync_negentropy_fetch_skipped_total", map[string]string{"reason": "seen"})
			failed := metric("ngit_sync_negentropy_fetch_claim_failed_total", map[string]string{"reason": "failed"})
			t.Logf("%d events: received %.0f, ids skipped as claimed %.0f and as seen %.0f, fetched after a failed claim %.0f",
				len(evs), received, claimed, seen, failed)
			if claimed+seen == 0 {
				t.Error("no id was left to the other relay's fetch")
			}
			if tc.faulty == (harness.Faults{}) {
				// Fetched from both relays, every event would arrive twice.
				if limit := float64(len(evs)) * 1.25; received > limit {
					t.Errorf("received %.0f events for %d (limit %.0f): ids fetched from both relays", received, len(evs), limit)
				}
				return
			}
			if failed == 0 {
				t.Error("no id deferred to the faulty relay's fetch was fetched from the other relay")
			}
		})
	}
}
