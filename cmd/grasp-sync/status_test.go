package main

import (
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

// commandStatus is a snapshot for the command's tests (status.WriteText's
// own tests cover the rendering).
func commandStatus(started time.Time) status.Snapshot {
	return status.Snapshot{
		Version: "v0.1.0", StartedAt: started, Ready: true,
		OwnRelay:     status.OwnRelay{URL: "ws://relay:7777", Connected: true, SelfSubscriptionEOSE: true},
		Repositories: 12,
		Relays: []status.Relay{
			{URL: "wss://relay.ngit.dev", State: "connected", Health: "healthy", Bootstrap: true},
			{URL: "wss://gitnostr.com", State: "backoff", Health: "failing", Failures: 3},
		},
	}
}

func TestStatusCommand(t *testing.T) {
	snap := commandStatus(time.Now().Add(-time.Minute))
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
