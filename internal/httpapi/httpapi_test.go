package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

type fakeProvider struct {
	ready atomic.Bool
	snap  status.Snapshot
	// block, when not nil, makes Status wait for it to close.
	block   chan struct{}
	entered chan struct{}
}

var _ Provider = (*fakeProvider)(nil)

func (f *fakeProvider) Status() status.Snapshot {
	if f.block != nil {
		close(f.entered)
		<-f.block
	}
	return f.snap
}
func (f *fakeProvider) Ready() bool { return f.ready.Load() }

type reasonProvider struct{ fakeProvider }

func (r *reasonProvider) NotReadyReason() string { return "waiting for the publisher" }

func sampleSnapshot() status.Snapshot {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return status.Snapshot{
		Version: "v1.2.3", StartedAt: t0, Ready: true,
		OwnRelay:     status.OwnRelay{URL: "ws://own:7777", Connected: true, SelfSubscriptionEOSE: true},
		Relays:       []status.Relay{{URL: "wss://a.example", State: "connected", Health: "healthy", ReposConfirmed: 3, LastConnected: &t0}},
		Repositories: 3, RootEvents: 10, PendingBatches: 1,
		Publisher: status.Publisher{Queued: 2, Accepted: 100, Duplicates: 5, Rejected: 1},
		Purgatory: status.Purgatory{Enabled: true, Events: 4},
		Rejected:  status.Rejected{Hot: 1, Cold: 7},
	}
}

func get(t *testing.T, h http.Handler, method, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String(), rec.Header()
}

func TestRoutes(t *testing.T) {
	p := &fakeProvider{snap: sampleSnapshot()}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBuildInfoCollector(version.Build{Version: "v1.2.3", Commit: "abc", Date: "2026-11-21", GoVersion: "go1.26"}))
	h := New(Options{Provider: p, Gatherer: reg}).Handler()

	if code, body, _ := get(t, h, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body, _ := get(t, h, "GET", "/readyz")
	if code != http.StatusServiceUnavailable || body != "not ready: starting\n" {
		t.Errorf("/readyz not ready: %d %q", code, body)
	}
	p.ready.Store(true)
	if code, body, _ := get(t, h, "GET", "/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz ready: %d %q", code, body)
	}

	code, body, hdr := get(t, h, "GET", "/status")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("/status: %d %s", code, hdr.Get("Content-Type"))
	}
	var got status.Snapshot
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if want := sampleSnapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("/status: got %+v, want %+v", got, want)
	}

	code, body, _ = get(t, h, "GET", "/metrics")
	wantLine := `ngit_sync_build_info{commit="abc",date="2026-11-21",goversion="go1.26",version="v1.2.3"} 1`
	if code != 200 || !strings.Contains(body, wantLine) {
		t.Errorf("/metrics: %d, missing %q in\n%s", code, wantLine, body)
	}

	if code, _, _ := get(t, h, "POST", "/status"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %d", code)
	}
	if code, _, _ := get(t, h, "GET", "/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}
	if code, _, _ := get(t, h, "HEAD", "/healthz"); code != 200 {
		t.Errorf("HEAD /healthz: %d", code)
	}
}

func TestReadyReasons(t *testing.T) {
	tests := []struct {
		name string
		p    Provider
		want string
	}{
		{"own relay down", &fakeProvider{snap: status.Snapshot{OwnRelay: status.OwnRelay{URL: "ws://own"}}},
			"not ready: own relay ws://own not connected\n"},
		{"no EOSE", &fakeProvider{snap: status.Snapshot{OwnRelay: status.OwnRelay{URL: "ws://own", Connected: true}}},
			"not ready: self-subscription on the own relay has not reached EOSE\n"},
		{"provider reason", &reasonProvider{}, "not ready: waiting for the publisher\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := get(t, New(Options{Provider: tt.p}).Handler(), "GET", "/readyz")
			if code != http.StatusServiceUnavailable || body != tt.want {
				t.Errorf("got %d %q, want 503 %q", code, body, tt.want)
			}
			// /status gives the same reason.
			_, body, _ = get(t, New(Options{Provider: tt.p}).Handler(), "GET", "/status")
			var snap status.Snapshot
			if err := json.Unmarshal([]byte(body), &snap); err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(strings.TrimPrefix(tt.want, "not ready: "), "\n"); snap.NotReady != want {
				t.Errorf("/status not_ready %q, want %q", snap.NotReady, want)
			}
		})
	}
	code, _, _ := get(t, New(Options{}).Handler(), "GET", "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("nil provider: %d", code)
	}
	if code, _, _ := get(t, New(Options{}).Handler(), "GET", "/metrics"); code != http.StatusNotFound {
		t.Errorf("nil gatherer /metrics: %d", code)
	}
}

func TestBuildInfoCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBuildInfoCollector(version.Build{Version: "v", Commit: "c", Date: "d", GoVersion: "g"}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "ngit_sync_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v", mfs)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, lp := range m.GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	if want := map[string]string{"version": "v", "commit": "c", "date": "d", "goversion": "g"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	if got := m.GetGauge().GetValue(); got != 1 {
		t.Errorf("value %v, want 1", got)
	}
}

func TestStartAndShutdown(t *testing.T) {
	p := &fakeProvider{snap: sampleSnapshot(), block: make(chan struct{}), entered: make(chan struct{})}
	s := New(Options{Addr: "127.0.0.1:0", Provider: p})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	base := "http://" + s.Addr()

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}

	// A request in flight when Shutdown starts completes before Shutdown returns.
	type result struct {
		code int
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/status")
		if err != nil {
			inflight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inflight <- result{resp.StatusCode, string(b), err}
	}()
	<-p.entered
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownDone <- s.Shutdown(ctx)
	}()
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	case r := <-inflight:
		t.Fatalf("request finished while blocked: %+v", r)
	default:
	}
	close(p.block)
	r := <-inflight
	if r.err != nil || r.code != 200 || !strings.Contains(r.body, `"version": "v1.2.3"`) {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Fatal("still accepting connections after Shutdown")
	}
}

func TestStartReportsBindErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := New(Options{Addr: ln.Addr().String()})
	if err := s.Start(); err == nil {
		_ = s.Shutdown(context.Background())
		t.Fatal("Start on a port in use succeeded")
	}
	if err := New(Options{}).Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown before Start: %v", err)
	}
}

// BenchmarkStatus serves /status for a snapshot at the default relay bound
// (limits.max_tracked_relays = 500).
func BenchmarkStatus(b *testing.B) {
	snap := sampleSnapshot()
	for i := len(snap.Relays); i < 500; i++ {
		r := snap.Relays[0]
		r.URL = "wss://relay" + strings.Repeat("x", i%20) + ".example"
		snap.Relays = append(snap.Relays, r)
	}
	h := New(Options{Provider: &fakeProvider{snap: snap}}).Handler()
	req := httptest.NewRequest("GET", "/status", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
}
