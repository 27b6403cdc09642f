package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/netpolicy"
	"github.com/grasp-sync/grasp-sync/internal/nostrurl"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// nip05Host serves /.well-known/nostr.json over HTTPS on 127.0.0.1 naming
// alice → pubkey with the given relays, and counts requests.
func nip05Host(t *testing.T, pubkey string, relays []string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/nostr.json" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		rs := `"` + strings.Join(relays, `","`) + `"`
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"names":{"alice":%q},"relays":{%q:[%s]}}`, pubkey, pubkey, rs)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// nip05Client is the policy's NIP-05 client trusting srv's test certificate.
func nip05Client(pol *netpolicy.Policy, srv *httptest.Server) *http.Client {
	c := pol.HTTPClientFor(netpolicy.KindNIP05, 5*time.Second)
	c.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return c
}

// TestPurgatoryPRFromNIP05Fork: a PR whose only clone URL is
// nostr://alice@<host:port>/<identifier> is released: alice is looked up
// in the host's nostr.json over HTTPS (dialled under the address policy,
// loopback allowed as an operator would with dial.allow), the fork is
// found through the owner's announcement on the relay that document
// lists, fetched by git, and no git command line carries the nostr:// URL.
func TestPurgatoryPRFromNIP05Fork(t *testing.T) {
	own := startPgOwnRelay(t)
	hint := harness.Start(t, harness.RelayOptions{Name: "nip05-relay"})
	const d, forkD = "app", "app-fork"
	owner, contributor := newPgKey(t), newPgKey(t)
	forkSrv := pgGitServer(t, 0)
	forkRepo, err := forkSrv.CreateRepo(contributor.rel(t, forkD))
	if err != nil {
		t.Fatal(err)
	}
	tip := mustCommit(t, forkRepo, "feature", "work in the fork")
	hint.Inject(pgAnnouncement(t, contributor, forkD, []string{forkSrv.CloneURL(contributor.rel(t, forkD))}))
	web, hits := nip05Host(t, contributor.pk, []string{hint.URL()})

	reg := prometheus.NewRegistry()
	pol, err := netpolicy.New(netpolicy.Options{Allow: []string{"127.0.0.1"}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	lookup := &nostrurl.NIP05Lookup{Client: nip05Client(pol, web), Timeout: 5 * time.Second, TTL: time.Minute}
	nostrURL := "nostr://alice@" + strings.TrimPrefix(web.URL, "https://") + "/" + forkD
	releaseNostrForkPR(t, own, owner, contributor, d, nostrURL, forkSrv.CloneURL(contributor.rel(t, forkD)), tip, nostrResolver(lookup.Lookup).Resolve)
	if hits.Load() == 0 {
		t.Fatal("nostr.json was never requested")
	}
}

// TestNIP05LookupRefusedAddress: a NIP-05 domain on a refused address
// (loopback as an IP, and a name resolving to a private address) is
// refused by the policy before anything is requested, and the refusals are
// counted in ngit_sync_dial_refused_total{kind="nip05"}.
func TestNIP05LookupRefusedAddress(t *testing.T) {
	web, hits := nip05Host(t, newPgKey(t).pk, nil)
	reg := prometheus.NewRegistry()
	pol, err := netpolicy.New(netpolicy.Options{Registerer: reg, Resolver: staticResolver{
		"nip05.example": {netip.MustParseAddr("10.1.2.3")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lookup := &nostrurl.NIP05Lookup{Client: nip05Client(pol, web), Timeout: 5 * time.Second, TTL: time.Minute}
	u := "alice@" + strings.TrimPrefix(web.URL, "https://")
	_, _, err = lookup.Lookup(context.Background(), u)
	if !errors.Is(err, netpolicy.ErrRefused) || netpolicy.Reason(err) != netpolicy.ReasonLoopback {
		t.Fatalf("lookup of %s: %v, want a loopback refusal", u, err)
	}
	_, _, err = lookup.Lookup(context.Background(), "alice@nip05.example")
	if !errors.Is(err, netpolicy.ErrRefused) || netpolicy.Reason(err) != netpolicy.ReasonPrivate {
		t.Fatalf("lookup of alice@nip05.example: %v, want a private refusal", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the refused server was reached")
	}
	for _, reason := range []string{netpolicy.ReasonLoopback, netpolicy.ReasonPrivate} {
		if got := testkit.Metric(t, reg, "ngit_sync_dial_refused_total", map[string]string{"kind": "nip05", "reason": reason}); got != 1 {
			t.Errorf("ngit_sync_dial_refused_total{kind=nip05,reason=%s} = %v, want 1", reason, got)
		}
	}
}

// staticResolver answers host names from a table.
type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestSSRFNIP05Owner: in the sidecar, a state event whose repository's
// only clone URLs are nostr:// URLs with NIP-05 owners on a private and a
// loopback address makes the purgatory look the owners up through the
// policy, which refuses both domains (counted with kind nip05); nothing
// is dialled.
func TestSSRFNIP05Owner(t *testing.T) {
	own := ownRelay(t)
	res := &ssrfResolver{asked: map[string]int{}, answers: map[string][]netip.Addr{
		"nip05.test": {netip.MustParseAddr("10.0.0.7")},
	}}
	dial, dialled := guardedDial(t)
	alice := signed.NewKey()
	commit := signed.FakeCommit("nip05")
	own.Inject(
		alice.Announcement("clones", signed.WithRelays(own.URL()),
			signed.WithClone("nostr://alice@nip05.test/clones", "nostr://bob@127.0.0.1:1/clones")),
		alice.State("clones", signed.WithRef("refs/heads/main", commit), signed.WithHEAD("main")))

	cfg := fastConfig(own)
	cfg.Dial.Allow = []string{} // nothing private is allowed
	cfg.GitDir = t.TempDir()
	cfg.Purgatory.CreateMissingRepos = true
	cfg.Purgatory.OwnRelayDelay = 50 * time.Millisecond
	cfg.Purgatory.SyncedDelay = 50 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.Backoff = []time.Duration{100 * time.Millisecond}
	sc, _ := startPolicySidecar(t, cfg, sidecar.Deps{Resolver: res, PolicyDial: dial})

	testkit.WaitFor(t, syncTimeout, "the NIP-05 domains were not refused", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_dial_refused_total", map[string]string{"kind": "nip05", "reason": "private"}) >= 1 &&
			testkit.Metric(t, sc.Registry, "ngit_sync_dial_refused_total", map[string]string{"kind": "nip05", "reason": "loopback"}) >= 1
	})
	if res.count("nip05.test") == 0 {
		t.Fatal("nip05.test was never resolved")
	}
	if n := dialled.Load(); n != 0 {
		t.Fatalf("%d connections dialled", n)
	}
}
