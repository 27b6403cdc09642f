package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// The status page shows readiness, every relay with state, health,
// progress and its whole last error (escaped) with its notes, the
// relay-repository pairs, the publisher and the purgatory per identifier,
// each table in its own scroll box; it reloads itself and loads nothing
// else.
func TestStatusPage(t *testing.T) {
	snap := sampleSnapshot()
	snap.StartedAt = time.Now().Add(-time.Hour)
	snap.Relays = append(snap.Relays, status.Relay{URL: "wss://b.example", State: "disconnected", Health: "dead",
		ReposConfirmed: 1, ReposPending: 4, RootsConfirmed: 2, RootsPending: 6, Failures: 9,
		LastError:  "dial: <script>alert(1)</script> " + strings.Repeat("long ", 40) + "end",
		Truncation: "a REQ page cut at 500", ReadAuth: "needs a key"})
	snap.State = status.State{Outcome: "resumed", Dir: "/var/lib/grasp-sync", Bytes: 4096, Events: 10, LastFlush: time.Now().Add(-5 * time.Second)}
	next := time.Now().Add(40 * time.Second)
	snap.Purgatory.Identifiers = []status.PurgatoryIdentifier{{Identifier: "tool", States: 2, PRs: 1, Attempts: 3,
		HeldSince: time.Now().Add(-10 * time.Minute), ExpiresAt: time.Now().Add(20 * time.Minute), NextAttempt: &next,
		LastError: "fetch https://git.example/tool.git: not found"}}
	// One identifier waits for a throttled clone domain: not a failure.
	limit := status.DomainLimit{RequestsPerWindow: 30, WindowSeconds: 60, Concurrency: 5}
	slot := time.Now().Add(12 * time.Second)
	snap.Purgatory.Waiting, snap.Purgatory.DomainLimit = 1, limit
	snap.Purgatory.Domains = []status.PurgatoryDomain{{Domain: "git.example:8080", Waiting: 1, RequestsInWindow: 30, NextSlot: &slot}}
	snap.Purgatory.Identifiers = append(snap.Purgatory.Identifiers, status.PurgatoryIdentifier{Identifier: "queued", States: 1,
		HeldSince: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(29 * time.Minute),
		WaitingFor: []status.PurgatoryWait{{Domain: "git.example:8080", DomainLimit: limit}}})
	p := &fakeProvider{snap: snap}
	p.ready.Store(true)
	h := New(Options{Provider: p}).Handler()

	code, body, hdr := get(t, h, "GET", "/")
	if code != 200 || hdr.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/: %d %s\n%s", code, hdr.Get("Content-Type"), body)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="10">`,
		`<dd id="ready"><span class="ok">yes</span></dd>`,
		`ws://own:7777: connected yes, stored state read yes`,
		`<tr class="relay" data-relay="wss://a.example">`,
		`<td class="url">wss://a.example</td>`,
		`<td class="state ok">connected</td>`,
		`<td class="url">wss://b.example</td>`,
		`<td class="state bad">disconnected</td>`,
		`<td class="health bad">dead</td>`,
		`<td class="n">1/5</td>`, `<td class="n">2/8</td>`,
		`dial: &lt;script&gt;alert(1)&lt;/script&gt; long`,
		`long end<div class="note">truncation: a REQ page cut at 500</div><div class="note">read AUTH: needs a key</div></td>`,
		`by state: connected 1, disconnected 1; by health: dead 1, healthy 1; relay-repository pairs confirmed 4/8`,
		`<div class="scroll"><table id="relays">`, `<div class="scroll"><table id="identifiers">`,
		`<dt>accepted</dt><dd>100</dd>`,
		`<dd id="state">resumed, /var/lib/grasp-sync: 4096 bytes, 10 events, last write `,
		`<td class="id">tool</td><td class="n">2</td><td class="n">1</td>`,
		`fetch https://git.example/tool.git: not found`,
		`waiting for a clone domain's request slot (not failed): <span id="waiting">1</span> (each domain: 30 requests per 1m0s, 5 at once)`,
		`<tr class="domain" data-domain="git.example:8080">`,
		`<td>git.example:8080</td><td class="n">1</td><td class="n">0</td><td class="n">30</td>`,
		`<td class="id">queued</td>`,
		`<td class="n">0</td>` + "\n" + `<td>waiting for git.example:8080 (30 requests/1m0s)</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("page contains a script")
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if strings.Contains(m[1], "//") {
			t.Errorf("page refers to an external asset %q", m[1])
		}
	}

	if _, body, _ := get(t, h, "GET", "/?refresh=0"); strings.Contains(body, "http-equiv") {
		t.Error("?refresh=0 still reloads")
	}
	if _, body, _ := get(t, h, "GET", "/?refresh=3"); !strings.Contains(body, `content="3"`) {
		t.Error("?refresh=3 not honoured")
	}
	if code, _, _ := get(t, h, "GET", "/?refresh=soon"); code != http.StatusBadRequest {
		t.Errorf("?refresh=soon: %d, want 400", code)
	}
	if code, _, _ := get(t, h, "GET", "/other"); code != http.StatusNotFound {
		t.Errorf("/other: %d, want 404", code)
	}
}

// Seconds cut by ties show on the page, for the own relay and for a
// remote, as in /status.
func TestStatusPageShowsTiesCut(t *testing.T) {
	snap := sampleSnapshot()
	_, body, _ := get(t, New(Options{Provider: &fakeProvider{snap: snap}}).Handler(), "GET", "/")
	if strings.Contains(body, "seconds cut") {
		t.Fatal("a page without ties cut speaks of seconds cut")
	}
	snap.OwnRelay.TiesCut, snap.OwnRelay.Truncation = 2, "a REQ page cut at 500"
	snap.Relays[0].TiesCut = 3
	_, body, _ = get(t, New(Options{Provider: &fakeProvider{snap: snap}}).Handler(), "GET", "/")
	for _, want := range []string{
		`stored state read yes, <span class="bad">seconds cut: 2</span>`,
		`<div class="note">truncation: a REQ page cut at 500</div></dd>`,
		`<div class="note bad">seconds cut: 3 (`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// Not ready: the page says why. Many identifiers: the page shows
// MaxPageIdentifiers and counts the rest.
func TestStatusPageNotReadyAndManyIdentifiers(t *testing.T) {
	snap := sampleSnapshot()
	snap.Ready = false
	snap.OwnRelay.Connected = false
	for i := range MaxPageIdentifiers + 7 {
		snap.Purgatory.Identifiers = append(snap.Purgatory.Identifiers, status.PurgatoryIdentifier{Identifier: fmt.Sprintf("repo-%d", i), States: 1})
	}
	h := New(Options{Provider: &fakeProvider{snap: snap}}).Handler()
	_, body, _ := get(t, h, "GET", "/")
	for _, want := range []string{
		`<span class="bad">no</span>: own relay ws://own:7777 not connected`,
		"… and 7 more identifiers",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(body, `<tr class="identifier">`); n != MaxPageIdentifiers {
		t.Errorf("%d identifier rows, want %d", n, MaxPageIdentifiers)
	}
}

// BenchmarkStatusDocuments renders / and /status for a large sidecar: 500
// relays and a full purgatory of 10,000 identifiers (purgatory.max_entries),
// each with a git error. It reports the response size as bytes/doc.
func BenchmarkStatusDocuments(b *testing.B) {
	snap := sampleSnapshot()
	snap.Relays = nil
	for i := range 500 {
		snap.Relays = append(snap.Relays, status.Relay{URL: fmt.Sprintf("wss://relay%d.example", i), State: "connected", Health: "healthy",
			ReposConfirmed: 10, ReposPending: 2, RootsConfirmed: 30, RootsPending: 5, LastError: "dial: connection refused"})
	}
	now := time.Now()
	for i := range 10_000 {
		snap.Purgatory.Identifiers = append(snap.Purgatory.Identifiers, status.PurgatoryIdentifier{
			Identifier: fmt.Sprintf("repo-%d", i), States: 1, Attempts: 3, HeldSince: now, ExpiresAt: now.Add(30 * time.Minute),
			NextAttempt: &now, LastError: "fetch https://git.example/npub1xyz/repo.git: git fetch: exit 128: fatal: repository not found"})
	}
	p := &fakeProvider{snap: snap}
	p.ready.Store(true)
	h := New(Options{Provider: p}).Handler()
	for name, path := range map[string]string{"page": "/", "status": "/status"} {
		b.Run(name, func(b *testing.B) {
			size := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/doc")
		})
	}
}
