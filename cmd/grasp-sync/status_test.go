package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

type staticProvider struct{ snap status.Snapshot }

func (p staticProvider) Status() status.Snapshot { return p.snap }
func (p staticProvider) Ready() bool             { return p.snap.Ready }

func sampleStatus(started time.Time) status.Snapshot {
	return status.Snapshot{
		Version: "v0.1.0", StartedAt: started, Ready: true,
		OwnRelay:     status.OwnRelay{URL: "ws://relay:7777", Connected: true, SelfSubscriptionEOSE: true},
		Repositories: 12, RootEvents: 40, PendingBatches: 2,
		Relays: []status.Relay{
			{URL: "wss://relay.ngit.dev", State: "connected", Health: "healthy", Bootstrap: true, Negentropy: "supported",
				ReposConfirmed: 10, ReposPending: 2, RootsConfirmed: 30, RootsPending: 10, FiltersOpen: 4, PendingBatches: 1, EventsReceived: 1234},
			{URL: "wss://gitnostr.com", State: "backoff", Health: "failing", Failures: 3,
				LastError:  "dial tcp: lookup gitnostr.com: no such host, and a very long tail that must not be cut off",
				Truncation: "a REQ page cut at 500 events below its limit", ReadAuth: "needs a key: set auth.key"},
		},
		Publisher: status.Publisher{Queued: 5, InFlight: 2, Accepted: 1000, Duplicates: 50, Rejected: 3},
		Purgatory: status.Purgatory{Enabled: true, Events: 7, QueueSize: 7, Identifiers: []status.PurgatoryIdentifier{
			{Identifier: "tool", States: 2, PRs: 1, HeldSince: started.Add(80 * time.Minute), ExpiresAt: started.Add(110 * time.Minute),
				Attempts: 3, NextAttempt: ptr(started.Add(90*time.Minute + 40*time.Second)),
				LastError: "fetch https://git.example/alice/tool.git: git fetch: exit status 128: fatal: unable to access 'https://git.example/alice/tool.git/': Could not resolve host: git.example"},
			{Identifier: "new", States: 4, HeldSince: started.Add(89 * time.Minute), ExpiresAt: started.Add(119 * time.Minute), Syncing: true},
		}},
		Rejected: status.Rejected{Hot: 3, Cold: 9},
		State: status.State{Outcome: "resumed", Dir: "/var/lib/grasp-sync", Bytes: 123456, Events: 1000, BytesPerEvent: 123.456,
			LastFlush: started.Add(90*time.Minute - 3*time.Second)},
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	snap := sampleStatus(now.Add(-90 * time.Minute))
	var b bytes.Buffer
	if err := printStatus(&b, &snap, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"version          v0.1.0",
		"uptime           1h30m0s",
		"ready            yes",
		"own relay        ws://relay:7777 (connected: yes, self-subscription EOSE: yes)",
		"repositories     12",
		"pending batches  2",
		"publisher        queued 5, in flight 2, accepted 1000, duplicates 50, rejected 3",
		"purgatory        7 events, 7 identifiers queued for a git sync",
		"rejected         hot 3, cold 9",
		"state            resumed, /var/lib/grasp-sync: 123456 bytes, 1000 events (123 bytes/event), last write 3s ago",
		"relay notes\n  wss://gitnostr.com\n    truncation: a REQ page cut at 500 events below its limit\n    read AUTH: needs a key: set auth.key\n",
		"relays (2)",
		"wss://relay.ngit.dev (bootstrap)  connected  healthy  supported  10/12  30/40  4        1        1234",
		"wss://gitnostr.com                backoff    failing  -          0/0    0/0    0        0        0       3         dial tcp: lookup gitnostr.com: no such host, and a very long\n" +
			strings.Repeat(" ", 115) + "tail that must not be cut off\n",
		"purgatory (identifiers: 2, events waiting for git data: 7)",
		"IDENTIFIER  STATES  PRS  HELD FOR  EXPIRES IN  ATTEMPTS  NEXT ATTEMPT  LAST ERROR",
		"tool        2       1    10m0s     20m0s       3         in 40s        fetch https://git.example/alice/tool.git: git fetch: exit\n" +
			strings.Repeat(" ", 71) + "status 128: fatal: unable to access\n" +
			strings.Repeat(" ", 71) + "'https://git.example/alice/tool.git/': Could not resolve\n" +
			strings.Repeat(" ", 71) + "host: git.example\n",
		"new         4       0    1m0s      29m0s       0         syncing       -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// wrapText keeps every word, in order, on lines no longer than the width.
func TestWrapText(t *testing.T) {
	long := strings.Repeat("x", 25)
	for _, in := range []string{"", "short", "a  b\n c", "one two three four five six seven eight nine ten", long + " " + long} {
		lines := wrapText(in, 10)
		if in == "" {
			if len(lines) != 1 || lines[0] != "-" {
				t.Errorf("wrapText(%q) = %q, want [-]", in, lines)
			}
			continue
		}
		for _, l := range lines {
			if len(l) > 10 || l == "" {
				t.Errorf("wrapText(%q): line %q", in, l)
			}
		}
		if got, want := strings.ReplaceAll(strings.Join(lines, ""), " ", ""), strings.Join(strings.Fields(in), ""); got != want {
			t.Errorf("wrapText(%q) = %q: text changed", in, lines)
		}
	}
}

func TestStatusCommand(t *testing.T) {
	snap := sampleStatus(time.Now().Add(-time.Minute))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Provider: staticProvider{snap}}).Handler())
	defer srv.Close()

	h := newHarness(t)
	if c := h.run("status", "--addr", srv.URL); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	if out := h.stdout.String(); !strings.Contains(out, "wss://relay.ngit.dev (bootstrap)") || !strings.Contains(out, "repositories     12") {
		t.Errorf("output:\n%s", out)
	}

	h = newHarness(t)
	if c := h.run("status", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--json"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	if out := h.stdout.String(); !strings.Contains(out, `"url": "wss://gitnostr.com"`) {
		t.Errorf("--json output:\n%s", out)
	}

	// Not ready: the reason /readyz gives.
	down := snap
	down.Ready, down.OwnRelay.Connected = false, false
	srvDown := httptest.NewServer(httpapi.New(httpapi.Options{Provider: staticProvider{down}}).Handler())
	defer srvDown.Close()
	h = newHarness(t)
	if c := h.run("status", "--addr", srvDown.URL); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	if want := "ready            no: own relay ws://relay:7777 not connected\n"; !strings.Contains(h.stdout.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, h.stdout)
	}

	// Default address from --listen (here via its environment twin).
	t.Setenv("GRASP_SYNC_LISTEN", ":"+srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	h = newHarness(t)
	if c := h.run("status"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
}

func TestStatusCommandWithoutSidecar(t *testing.T) {
	addr := freeAddr(t)
	h := newHarness(t)
	if c := h.run("status", "--addr", addr); c != 1 {
		t.Fatalf("exit %d", c)
	}
	got := h.stderr.String()
	want := "grasp-sync: no status from sidecar: http://" + addr + "/status: dial tcp " + addr + ": connect: connection refused\n"
	if got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

func TestStatusURL(t *testing.T) {
	tests := []struct{ addr, listen, want string }{
		{"", ":9090", "http://127.0.0.1:9090/status"},
		{"", "0.0.0.0:8080", "http://127.0.0.1:8080/status"},
		{"", "[::]:8080", "http://127.0.0.1:8080/status"},
		{"", "10.1.2.3:9090", "http://10.1.2.3:9090/status"},
		{"sidecar:9090", ":1", "http://sidecar:9090/status"},
		{"https://sync.example.com/", ":1", "https://sync.example.com/status"},
	}
	for _, tt := range tests {
		got, err := statusURL(tt.addr, tt.listen)
		if err != nil || got != tt.want {
			t.Errorf("statusURL(%q, %q) = %q, %v; want %q", tt.addr, tt.listen, got, err, tt.want)
		}
	}
	if _, err := statusURL("", "9090"); err == nil {
		t.Error("bad --listen accepted")
	}
}
