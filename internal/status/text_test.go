package status

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func sampleStatus(started time.Time) Snapshot {
	limit := DomainLimit{RequestsPerWindow: 30, WindowSeconds: 60, Concurrency: 5}
	return Snapshot{
		Version: "v0.1.0", StartedAt: started, Ready: true,
		OwnRelay:     OwnRelay{URL: "ws://relay:7777", Connected: true, SelfSubscriptionEOSE: true},
		Repositories: 12, RootEvents: 40, PendingBatches: 2,
		Relays: []Relay{
			{URL: "wss://relay.ngit.dev", State: "connected", Health: "healthy", Bootstrap: true, Negentropy: "supported",
				ReposConfirmed: 10, ReposPending: 2, RootsConfirmed: 30, RootsPending: 10, FiltersOpen: 4, PendingBatches: 1, EventsReceived: 1234, EventsNew: 1000},
			{URL: "wss://gitnostr.com", State: "backoff", Health: "failing", Failures: 3,
				LastError:  "dial tcp: lookup gitnostr.com: no such host, and a very long tail that must not be cut off",
				Truncation: "a REQ page cut at 500 events below its limit", ReadAuth: "needs a key: set auth.key"},
		},
		Publisher: Publisher{Queued: 5, InFlight: 2, Accepted: 1000, Duplicates: 50, Rejected: 3},
		Purgatory: Purgatory{Enabled: true, Events: 7, QueueSize: 7, Identifiers: []PurgatoryIdentifier{
			{Identifier: "tool", States: 2, PRs: 1, HeldSince: started.Add(80 * time.Minute), ExpiresAt: started.Add(110 * time.Minute),
				Attempts: 3, NextAttempt: ptr(started.Add(90*time.Minute + 40*time.Second)),
				LastError: "fetch https://git.example/alice/tool.git: git fetch: exit status 128: fatal: unable to access 'https://git.example/alice/tool.git/': Could not resolve host: git.example"},
			{Identifier: "new", States: 4, HeldSince: started.Add(89 * time.Minute), ExpiresAt: started.Add(119 * time.Minute), Syncing: true},
			{Identifier: "queued", States: 1, HeldSince: started.Add(89 * time.Minute), ExpiresAt: started.Add(119 * time.Minute),
				WaitingFor: []PurgatoryWait{{Domain: "git.example:8080", DomainLimit: limit}}},
		}, Waiting: 1, DomainLimit: limit, Domains: []PurgatoryDomain{
			{Domain: "git.example:8080", Waiting: 1, InFlight: 0, RequestsInWindow: 30, NextSlot: ptr(started.Add(90*time.Minute + 12*time.Second))},
		}},
		Rejected: Rejected{Hot: 3, Cold: 9},
		State: State{Outcome: "resumed", Dir: "/var/lib/grasp-sync", Bytes: 123456, Events: 1000, BytesPerEvent: 123.456,
			LastFlush: started.Add(90*time.Minute - 3*time.Second), RelaysSaved: started.Add(90*time.Minute - 3*time.Second)},
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	snap := sampleStatus(now.Add(-90 * time.Minute))
	var b bytes.Buffer
	if err := WriteText(&b, &snap, now); err != nil {
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
		"rejected         hot 3, cold 9",
		"state            resumed, /var/lib/grasp-sync: 123456 bytes, 1000 events (123 bytes/event), last write 3s ago, relay states saved 3s ago",
		"relay notes\n  wss://gitnostr.com\n    truncation: a REQ page cut at 500 events below its limit\n    read AUTH: needs a key: set auth.key\n",
		"relays (2)",
		"EVENTS (NEW)  FAILURES",
		"wss://relay.ngit.dev (bootstrap)  connected  healthy  supported  10/12  30/40  4        1        1234 (1000)   0",
		"wss://gitnostr.com                backoff    failing  -          0/0    0/0    0        0        0 (0)         3         dial tcp: lookup gitnostr.com: no such host, and a very long\n" +
			strings.Repeat(" ", 121) + "tail that must not be cut off\n",
		"purgatory (identifiers: 3, events waiting for git data: 7)",
		"IDENTIFIER  STATES  PRS  HELD FOR  EXPIRES IN  ATTEMPTS  NEXT ATTEMPT                                     LAST ERROR",
		"tool        2       1    10m0s     20m0s       3         in 40s                                           fetch https://git.example/alice/tool.git: git fetch: exit\n" +
			strings.Repeat(" ", 106) + "status 128: fatal: unable to access\n" +
			strings.Repeat(" ", 106) + "'https://git.example/alice/tool.git/': Could not resolve\n" +
			strings.Repeat(" ", 106) + "host: git.example\n",
		"new         4       0    1m0s      29m0s       0         syncing                                          -",
		// Waiting for a throttled domain: no failed attempt, the domain and its rate.
		"queued      1       0    1m0s      29m0s       0         waiting for git.example:8080 (30 requests/1m0s)  -",
		"purgatory        7 events, 7 identifiers queued for a git sync, 1 waiting for a clone domain's request slot (30 requests per 1m0s, 5 at once)",
		"clone domains (each: 30 requests per 1m0s, 5 at once)\n" +
			"DOMAIN            WAITING  IN FLIGHT  IN WINDOW  NEXT SLOT\n" +
			"git.example:8080  1        0          30         in 12s\n",
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

// Roots the self-subscription did not deliver in time get a line of their
// own, only when there are any.
func TestPrintLateRoots(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	snap := sampleStatus(now.Add(-90 * time.Minute))
	var b bytes.Buffer
	if err := WriteText(&b, &snap, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "late roots") {
		t.Fatalf("a late roots line without any:\n%s", b.String())
	}
	snap.OwnRelay.RootsAppliedLate, snap.OwnRelay.RootsUnapplied = 3, 1
	b.Reset()
	if err := WriteText(&b, &snap, now); err != nil {
		t.Fatal(err)
	}
	if want := "late roots       3 applied although the self-subscription did not deliver them within sync.root_wait, 1 cannot be applied (orphan bound)"; !strings.Contains(b.String(), want) {
		t.Fatalf("no line %q in\n%s", want, b.String())
	}
}
