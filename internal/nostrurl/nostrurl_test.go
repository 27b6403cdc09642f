package nostrurl_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/nostrurl"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestNostrResolverTTLOnManualClock: a resolution is remembered for TTL on
// the resolver's clock, not the wall clock: within TTL no relay is asked
// again, once TTL has passed on the manual clock the relay is asked again
// and a newer announcement is seen.
func TestNostrResolverTTLOnManualClock(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "hint"})
	alice := signed.NewKey()
	r.Inject(alice.Announcement("fork", signed.WithClone("https://git.example.com/fork.git"), signed.WithCreatedAt(1000)))
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	res := &nostrurl.NostrResolver{
		Dial: func(ctx context.Context, url string) (*relay.Conn, error) {
			return relay.Dial(ctx, url, relay.DefaultOptions())
		},
		Timeout: 5 * time.Second, MaxRelays: 4, TTL: 10 * time.Minute, Clock: clk,
	}
	u := nip34.NostrURL{PubKey: alice.PubKey, Identifier: "fork", Relays: []string{r.URL()}}
	resolve := func(want string) {
		t.Helper()
		urls, err := res.Resolve(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(urls, want) {
			t.Fatalf("resolved to %v, want %s among them", urls, want)
		}
	}
	resolve("https://git.example.com/fork.git")
	asked := r.Stats().Reqs
	if asked == 0 {
		t.Fatal("the relay was not asked")
	}
	// The owner moves the repository; the cache answers until TTL passes
	// on the resolver's clock, whatever the wall clock does.
	r.Inject(alice.Announcement("fork", signed.WithClone("https://git.example.org/moved.git"), signed.WithCreatedAt(2000)))
	clk.Advance(10*time.Minute - time.Second)
	resolve("https://git.example.com/fork.git")
	if got := r.Stats().Reqs; got != asked {
		t.Fatalf("asked %d REQs within TTL, want %d", got, asked)
	}
	clk.Advance(time.Second)
	resolve("https://git.example.org/moved.git")
	if got := r.Stats().Reqs; got == asked {
		t.Fatal("the relay was not asked again after TTL")
	}
}
