package nostrurl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// nip05Server serves /.well-known/nostr.json with doc for name=alice, a
// redirect for name=moved and counts requests per path.
func nip05Server(t *testing.T, doc func(name string) string) (*httptest.Server, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var hits, redirected atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/nostr.json", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		name := r.URL.Query().Get("name")
		if name == "moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, doc(name))
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		fmt.Fprint(w, `{"names":{"moved":"`+strings.Repeat("a", 64)+`"}}`)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits, &redirected
}

func TestNIP05Lookup(t *testing.T) {
	alice := newKey(t)
	srv, hits, redirected := nip05Server(t, func(name string) string {
		switch name {
		case "alice":
			return `{"names":{"alice":"` + alice.pk + `"},"relays":{"` + alice.pk +
				`":["wss://Relay.Example/","wss://relay.example","https://not-a-relay.example","ws://b.example","wss://c.example","wss://d.example"]}}`
		case "badkey":
			return `{"names":{"badkey":"` + strings.ToUpper(alice.pk) + `"}}`
		case "big":
			return `{"names":{"big":"` + alice.pk + `"},"pad":"` + strings.Repeat("x", 70<<10) + `"}`
		case "notjson":
			return `<html>`
		default:
			return `{"names":{}}`
		}
	})
	host := strings.TrimPrefix(srv.URL, "https://")
	clk := newManualClock()
	l := &NIP05Lookup{Client: srv.Client(), Timeout: 5 * time.Second, MaxBody: 64 << 10, MaxRelays: 3, TTL: time.Minute, Clock: clk}
	ctx := context.Background()

	pk, relays, err := l.Lookup(ctx, "Alice@"+host)
	if err != nil {
		t.Fatal(err)
	}
	if pk != alice.pk {
		t.Fatalf("pubkey = %s, want %s", pk, alice.pk)
	}
	if want := []string{"wss://relay.example", "ws://b.example", "wss://c.example"}; fmt.Sprint(relays) != fmt.Sprint(want) {
		t.Fatalf("relays = %v, want %v (normalised, deduplicated, non-relay dropped, capped at 3)", relays, want)
	}

	// Cached for TTL by the clock, then asked again.
	n := hits.Load()
	if _, _, err := l.Lookup(ctx, "alice@"+host); err != nil || hits.Load() != n {
		t.Fatalf("second lookup: err %v, requests %d -> %d (want cached)", err, n, hits.Load())
	}
	clk.Advance(time.Minute)
	if _, _, err := l.Lookup(ctx, "alice@"+host); err != nil || hits.Load() != n+1 {
		t.Fatalf("lookup after TTL: err %v, requests %d -> %d (want one more)", err, n, hits.Load())
	}

	for _, c := range []struct{ id, want string }{
		{"bob@" + host, "name not listed"},
		{"badkey@" + host, "invalid public key"},
		{"big@" + host, "larger than"},
		{"notjson@" + host, "invalid JSON"},
		{"moved@" + host, "redirect"},
		{"a/b@" + host, "local part"},
		{"alice@bad_domain", "bad domain"},
		{"alice@" + host + "/x", "bad port"},
	} {
		_, _, err := l.Lookup(ctx, c.id)
		if !errors.Is(err, ErrNIP05) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Lookup(%q) = %v, want ErrNIP05 with %q", c.id, err, c.want)
		}
	}
	if redirected.Load() != 0 {
		t.Fatal("the redirect was followed")
	}

	// Only HTTPS is spoken: a plain-HTTP server does not answer.
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if _, _, err := l.Lookup(ctx, "alice@"+strings.TrimPrefix(plain.URL, "http://")); err == nil {
		t.Fatal("a plain-HTTP server answered an https lookup")
	}
}

func TestParseNIP05(t *testing.T) {
	for _, c := range []struct{ id, name, domain string }{
		{"Alice@Example.COM", "alice", "example.com"},
		{"example.com", "_", "example.com"},
		{"bob@127.0.0.1:8443", "bob", "127.0.0.1:8443"},
		{"bob@[::1]:8443", "bob", "[::1]:8443"},
		{"bob@[::1]", "bob", "[::1]"},
		{"bob@::1", "bob", "[::1]"},
	} {
		name, domain, err := parseNIP05(c.id)
		if err != nil || name != c.name || domain != c.domain {
			t.Errorf("parseNIP05(%q) = %q, %q, %v; want %q, %q", c.id, name, domain, err, c.name, c.domain)
		}
	}
	for _, id := range []string{"", "@example.com", "a b@example.com", "bob@localhost", "bob@example.com:0",
		"bob@example.com:99999", "bob@[fe80::1%eth0]:1", "bob@-x.example", "bob@a..example", "bob@example.com?x=1"} {
		if _, _, err := parseNIP05(id); !errors.Is(err, ErrNIP05) {
			t.Errorf("parseNIP05(%q) = %v, want ErrNIP05", id, err)
		}
	}
}

// TestNIP05CacheBounded: at the bound, expired entries are pruned on insert
// and nothing is stored beyond it.
func TestNIP05CacheBounded(t *testing.T) {
	alice := newKey(t)
	srv, _, _ := nip05Server(t, func(name string) string { return `{"names":{"` + name + `":"` + alice.pk + `"}}` })
	host := strings.TrimPrefix(srv.URL, "https://")
	clk := newManualClock()
	l := &NIP05Lookup{Client: srv.Client(), Timeout: 5 * time.Second, TTL: time.Minute, Clock: clk}
	for i := 0; i < resolveCacheMax; i++ {
		l.cache.put(fmt.Sprintf("n%d@x.example", i), nip05Result{pubkey: alice.pk}, clk.Now(), l.TTL)
	}
	if _, _, err := l.Lookup(context.Background(), "fresh@"+host); err != nil {
		t.Fatal(err)
	}
	if n := l.cache.len(); n != resolveCacheMax {
		t.Fatalf("cache holds %d, want %d (full, nothing expired)", n, resolveCacheMax)
	}
	clk.Advance(2 * time.Minute)
	if _, _, err := l.Lookup(context.Background(), "later@"+host); err != nil {
		t.Fatal(err)
	}
	if n := l.cache.len(); n != 1 {
		t.Fatalf("cache holds %d after pruning, want 1", n)
	}
}

// TestNostrResolverNIP05Owner: without a NIP05 lookup a NIP-05 owner fails
// ErrNIP05Owner; with one, a failed lookup is the error and no relay is
// dialled.
func TestNostrResolverNIP05Owner(t *testing.T) {
	u, err := nip34.ParseNostrURL("nostr://alice@example.com/repo")
	if err != nil {
		t.Fatal(err)
	}
	r := &NostrResolver{MaxRelays: 4, Timeout: time.Second, TTL: time.Minute}
	if _, err := r.Resolve(context.Background(), u); !errors.Is(err, ErrNIP05Owner) {
		t.Fatalf("err = %v, want ErrNIP05Owner", err)
	}
	r.NIP05 = func(ctx context.Context, id string) (string, []string, error) {
		if id != "alice@example.com" {
			t.Errorf("lookup of %q", id)
		}
		return "", nil, ErrNIP05
	}
	if _, err := r.Resolve(context.Background(), u); !errors.Is(err, ErrNIP05) {
		t.Fatalf("err = %v, want ErrNIP05", err)
	}
}
