package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip11"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

// startOwnRelay runs a real khatru relay on loopback. Its NIP-11 document
// is served by a wrapper so it can carry supported_grasps, which go-nostr's
// nip11 type lacks.
func startOwnRelay(t *testing.T, authRequired bool) string {
	t.Helper()
	return startOwnRelayWith(t, authRequired, nil)
}

// startOwnRelayWith is startOwnRelay with a hook to configure the relay.
func startOwnRelayWith(t *testing.T, authRequired bool, setup func(*khatru.Relay)) string {
	t.Helper()
	rl := khatru.NewRelay()
	if setup != nil {
		setup(rl)
	}
	rl.Info.Name = "test own relay"
	rl.Info.Software = "https://github.com/fiatjaf/khatru"
	rl.Info.Version = "v0.19.1"
	rl.Info.SupportedNIPs = []any{1, 11, 42, 77}
	rl.Info.Limitation = &nip11.RelayLimitationDocument{MaxSubscriptions: 20, MaxLimit: 500, MaxMessageLength: 131072, AuthRequired: authRequired}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "application/nostr+json" {
			b, _ := json.Marshal(rl.Info)
			var doc map[string]any
			_ = json.Unmarshal(b, &doc)
			doc["supported_grasps"] = []string{"GRASP-01"}
			doc["limitation"].(map[string]any)["max_filters"] = 10
			w.Header().Set("Content-Type", "application/nostr+json")
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
		rl.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func TestCheckAgainstRealRelay(t *testing.T) {
	url := startOwnRelay(t, false)
	gitDir := t.TempDir()
	h := newHarness(t)
	c := h.run("check", "--own-relay", url, "--git-dir", gitDir, "--timeout", "5s")
	if c != 0 {
		t.Fatalf("exit %d, stderr:\n%s", c, h.stderr)
	}
	out := h.stdout.String()
	t.Logf("report:\n%s", out)
	for _, want := range []string{
		"grasp-sync check: OK",
		url + " connected in ",
		"REQ answered with EOSE",
		`"test own relay", software https://github.com/fiatjaf/khatru v0.19.1`,
		"supported_nips    1, 11, 42, 77",
		"supported_grasps  GRASP-01",
		"max_subscriptions=20 max_filters=10 max_limit=500 max_message_length=131072",
		"NIP-77 advertised",
		gitDir + " writable (1 directories checked), purgatory on",
		"git version ",
		"NIP-42 key        none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "max_message_length 131072 is below limits.max_event_bytes 262144") {
		t.Errorf("no warning about the small max_message_length:\n%s", out)
	}
	entries, _ := os.ReadDir(gitDir)
	if len(entries) != 0 {
		t.Errorf("check left files in the git directory: %v", entries)
	}
	if h.stderr.String() != "" {
		t.Errorf("stderr not empty: %q", h.stderr)
	}
}

func TestCheckWarnsAboutMissingAuthKey(t *testing.T) {
	url := startOwnRelay(t, true)
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	if out := h.stdout.String(); !strings.Contains(out, "requires NIP-42 auth but no key is configured") ||
		!strings.Contains(out, "not configured: purgatory off") {
		t.Errorf("report:\n%s", out)
	}
}

// requireAuthToRead makes every REQ of an unauthenticated connection fail
// with auth-required:, as GRASP relays restricting reads do.
func requireAuthToRead(rl *khatru.Relay) {
	rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, _ nostr.Filter) (bool, string) {
		if khatru.GetAuthed(ctx) == "" {
			return true, "auth-required: read access needs NIP-42"
		}
		return false, ""
	})
}

func TestCheckAuthenticatesWithTheKey(t *testing.T) {
	url := startOwnRelayWith(t, true, requireAuthToRead)
	const sk = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvAuthKey, sk)
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--timeout", "5s"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	t.Logf("report:\n%s", out)
	for _, want := range []string{"REQ answered with EOSE", "NIP-42 AUTH       accepted for " + pk, "NIP-42 key        loaded, public key " + pk} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, sk) || strings.Contains(h.stderr.String(), sk) {
		t.Error("the secret key was printed")
	}
	if strings.Contains(out, "no key is configured") {
		t.Errorf("unexpected AUTH warning:\n%s", out)
	}
}

func TestCheckWithoutKeyWarnsWhenReadsNeedAuth(t *testing.T) {
	url := startOwnRelayWith(t, false, requireAuthToRead)
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--timeout", "5s"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	if !strings.Contains(out, `REQ answered with CLOSED "auth-required: read access needs NIP-42"`) ||
		!strings.Contains(out, "requires NIP-42 AUTH to read but no key is configured") {
		t.Errorf("report:\n%s", out)
	}
}

func TestCheckReportsRefusedAuth(t *testing.T) {
	url := startOwnRelayWith(t, true, func(rl *khatru.Relay) {
		requireAuthToRead(rl)
		rl.ServiceURL = "wss://somewhere.else" // AUTH events naming our URL are refused
	})
	t.Setenv(config.EnvAuthKey, "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa")
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--timeout", "5s"); c != 1 {
		t.Fatalf("exit %d", c)
	}
	if got, want := h.stderr.String(), "grasp-sync: own relay refused NIP-42 AUTH: error: failed to authenticate\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if h.stdout.String() != "" {
		t.Errorf("stdout: %q", h.stdout)
	}
}

// A failing check prints exactly one line on stderr, nothing on stdout,
// and exits 1.
func TestCheckFailuresAreOneLine(t *testing.T) {
	notRelay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not a relay</html>", http.StatusNotFound)
	}))
	defer notRelay.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Port 1 is never listened on here. A port freed by freeAddr could be
	// taken again by the relay started next (this test failed that way).
	closed := "ws://127.0.0.1:1"
	relay := startOwnRelay(t, false)

	tests := []struct {
		name   string
		args   []string
		prefix string
		also   string
	}{
		{"closed port", []string{"--own-relay", closed},
			"grasp-sync: cannot connect to the own relay " + closed + ": ", "connection refused"},
		{"not a relay", []string{"--own-relay", "ws" + strings.TrimPrefix(notRelay.URL, "http")},
			"grasp-sync: cannot connect to the own relay ws" + strings.TrimPrefix(notRelay.URL, "http") + ": ", "404"},
		{"git dir is a file", []string{"--own-relay", relay, "--git-dir", file},
			"grasp-sync: git directory unusable: " + file + " is not a directory", ""},
		{"git dir missing", []string{"--own-relay", relay, "--git-dir", file + "-missing"},
			"grasp-sync: git directory unusable: stat " + file + "-missing: no such file or directory", ""},
		{"invalid config", []string{"--own-relay", relay, "--relay.max-message-bytes", "1000"},
			`grasp-sync: relay.max_message_bytes (--relay.max-message-bytes, GRASP_SYNC_RELAY_MAX_MESSAGE_BYTES): must be >= 1048576, got "1000"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			c := h.run(append([]string{"check", "--timeout", "5s"}, tt.args...)...)
			if c != 1 {
				t.Errorf("exit %d, want 1", c)
			}
			errOut := h.stderr.String()
			t.Logf("stderr: %s", errOut)
			if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
				t.Errorf("stderr is not one line: %q", errOut)
			}
			if !strings.HasPrefix(errOut, tt.prefix) || !strings.Contains(errOut, tt.also) {
				t.Errorf("stderr %q, want prefix %q containing %q", errOut, tt.prefix, tt.also)
			}
			if strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, "panic") {
				t.Errorf("stack trace on stderr: %q", errOut)
			}
			if out := h.stdout.String(); out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
		})
	}
}

func TestCheckNeedsGitForPurgatory(t *testing.T) {
	url := startOwnRelay(t, false)
	t.Setenv("PATH", t.TempDir()) // no git here
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--git-dir", t.TempDir()); c != 1 {
		t.Fatalf("exit %d", c)
	}
	if got, want := h.stderr.String(), "grasp-sync: git is not usable: purgatory runs git: exec: \"git\": executable file not found in $PATH\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	h = newHarness(t)
	if c := h.run("check", "--own-relay", url, "--git-dir", t.TempDir(), "--purgatory.enabled=false"); c != 0 {
		t.Fatalf("purgatory off: exit %d: %s", c, h.stderr)
	}
}

// With git_http.listen, check says the git server can start, or why not:
// a git without http-backend.
func TestCheckGitServer(t *testing.T) {
	url := startOwnRelay(t, false)
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--git-dir", t.TempDir(), "--git-http.listen", "127.0.0.1:8080"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	if out := h.stdout.String(); !strings.Contains(out, "127.0.0.1:8080: clones served read-only (git http-backend found)") {
		t.Errorf("report:\n%s", out)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho "+bin+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin) // a git whose exec path has no http-backend
	h = newHarness(t)
	if c := h.run("check", "--own-relay", url, "--git-dir", t.TempDir(), "--purgatory.enabled=false", "--git-http.listen", "127.0.0.1:8080"); c != 1 {
		t.Fatalf("exit %d", c)
	}
	want := "grasp-sync: git is not usable: git_http.listen runs git http-backend: git http-backend not found in " + bin + ": git_http.listen needs git's server-side commands\n"
	if got := h.stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

// A WebSocket server that never answers a REQ is not a Nostr relay.
func TestCheckSilentWebSocketIsNotARelay(t *testing.T) {
	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			serveSilentWebSocket(t, w, r)
			return
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(silent)
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	h := newHarness(t)
	if c := h.run("check", "--own-relay", url, "--timeout", "300ms"); c != 1 {
		t.Fatalf("exit %d", c)
	}
	want := "grasp-sync: own relay does not answer as a Nostr relay: " + url + ": no EOSE or CLOSED in answer to a REQ before the timeout\n"
	if got := h.stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}
