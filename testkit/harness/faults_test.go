package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// quiet is how long a test waits to conclude that a relay sends nothing.
// Only absence is asserted with it, so a slow machine cannot make a test fail.
const quiet = 300 * time.Millisecond

// nextWithin returns the next message, or "" if none arrives within d.
func nextWithin(c *harness.Client, d time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, _ := c.Next(ctx)
	return m
}

func TestHarnessNegentropyOn(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true, ReqCap: 50})
	evs := corpus()[:100]
	r.Inject(evs...)
	local := append([]*nostr.Event{}, evs[:60]...)
	clientOnly := notes(signed.KeyFromSeed("client-only"), 10, 1_600_000_000)
	local = append(local, clientOnly...)

	c := dial(t, ctx, r.URL())
	need, extra, err := c.Negentropy(ctx, "neg", nostr.Filter{Kinds: []int{1}}, local)
	if err != nil {
		t.Fatalf("Negentropy: %v", err)
	}
	sort.Strings(need)
	var wantNeed []string
	for _, ev := range evs[60:] {
		wantNeed = append(wantNeed, ev.ID)
	}
	sort.Strings(wantNeed)
	if strings.Join(need, ",") != strings.Join(wantNeed, ",") {
		t.Fatalf("need = %d ids, want the relay's 40 (ReqCap must not cap NEG sets)", len(need))
	}
	if len(extra) != len(clientOnly) {
		t.Fatalf("extra = %d ids, want %d", len(extra), len(clientOnly))
	}
	testkit.WaitFor(t, waitTimeout, "NEG-CLOSE not seen", func() bool { return r.Stats().NegCloses == 1 })
	if st := r.Stats(); st.NegOpens != 1 || st.NegMsgs < 1 {
		t.Fatalf("NegOpens %d, NegMsgs %d; want 1, >=1", st.NegOpens, st.NegMsgs)
	}

	// NIP-11 announces NIP-77 and the cap
	info := nip11(t, r)
	if !containsNIP(info.SupportedNIPs, 77) || info.Limitation.MaxLimit != 50 {
		t.Fatalf("NIP-11 = %+v", info)
	}
}

func TestHarnessNegentropyOffAnswersNotice(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	r.Inject(corpus()[:10]...)
	c := dial(t, ctx, r.URL())
	_, _, err := c.Negentropy(ctx, "neg", nostr.Filter{}, nil)
	if !errors.Is(err, harness.ErrNegentropy) || !strings.Contains(err.Error(), "NOTICE") {
		t.Fatalf("NEG-OPEN without NIP-77: err = %v, want a NOTICE", err)
	}
	if info := nip11(t, r); containsNIP(info.SupportedNIPs, 77) {
		t.Fatal("NIP-11 announces 77 with negentropy off")
	}
}

func TestHarnessNegMaxEvents(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true, NegMaxEvents: 20})
	r.Inject(corpus()[:30]...)
	c := dial(t, ctx, r.URL())
	_, _, err := c.Negentropy(ctx, "big", nostr.Filter{}, nil)
	if !errors.Is(err, harness.ErrNegentropy) || !strings.Contains(err.Error(), "NEG-ERR blocked: too many query results") {
		t.Fatalf("err = %v, want NEG-ERR blocked", err)
	}
	// a narrower filter fits
	until := corpus()[9].CreatedAt
	need, _, err := c.Negentropy(ctx, "small", nostr.Filter{Until: &until}, nil)
	if err != nil || len(need) != 10 {
		t.Fatalf("small window: %d ids, err %v", len(need), err)
	}
}

// untilLabel reads messages until one with label arrives and returns the
// messages read before it and the matching one.
func untilLabel(t *testing.T, ctx context.Context, c *harness.Client, label string) (before []string, m string) {
	t.Helper()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v (got %q)", label, err, before)
		}
		if harness.Label(m) == label {
			return before, m
		}
		before = append(before, m)
	}
}

func TestHarnessFaultsOnReq(t *testing.T) {
	// Each case waits (up to testCtx) for what must arrive, and uses the short
	// quiet window only to check that something does not.
	tests := []struct {
		name   string
		faults harness.Faults
		check  func(t *testing.T, ctx context.Context, c *harness.Client)
	}{
		{"notice", harness.Faults{ReqNotice: "rate-limited: slow down"}, func(t *testing.T, ctx context.Context, c *harness.Client) {
			before, m := untilLabel(t, ctx, c, "NOTICE")
			if len(before) != 0 || !strings.Contains(m, "rate-limited: slow down") {
				t.Fatalf("got %q then %s", before, m)
			}
			if m := nextWithin(c, quiet); m != "" {
				t.Fatalf("REQ served after the NOTICE: %s", m)
			}
		}},
		{"closed", harness.Faults{ReqClosed: "rate-limited: too many requests"}, func(t *testing.T, ctx context.Context, c *harness.Client) {
			before, m := untilLabel(t, ctx, c, "CLOSED")
			if len(before) != 0 || m != `["CLOSED","sub","rate-limited: too many requests"]` {
				t.Fatalf("got %q then %s", before, m)
			}
		}},
		{"no eose", harness.Faults{NoEOSE: true}, func(t *testing.T, ctx context.Context, c *harness.Client) {
			for i := 0; i < 5; i++ {
				if m, err := c.Next(ctx); err != nil || harness.Label(m) != "EVENT" {
					t.Fatalf("message %d: %q %v, want EVENT", i, m, err)
				}
			}
			if m := nextWithin(c, quiet); m != "" {
				t.Fatalf("got %s after the events, want nothing", m)
			}
		}},
		{"mute", harness.Faults{Mute: true}, func(t *testing.T, _ context.Context, c *harness.Client) {
			if m := nextWithin(c, quiet); m != "" {
				t.Fatalf("mute relay sent %s", m)
			}
		}},
		{"drop after send", harness.Faults{DropAfterSend: 3}, func(t *testing.T, ctx context.Context, c *harness.Client) {
			n := 0
			for {
				m, err := c.Next(ctx)
				if err != nil {
					break
				}
				if harness.Label(m) != "EVENT" {
					t.Fatalf("got %s, want only EVENTs before the drop", m)
				}
				n++
			}
			if ctx.Err() != nil || !c.Closed() || n != 3 {
				t.Fatalf("got %d messages, closed %v; want 3 and a dropped connection", n, c.Closed())
			}
		}},
		{"drop on receive", harness.Faults{DropOnReceive: 1}, func(t *testing.T, ctx context.Context, c *harness.Client) {
			testkit.WaitFor(t, waitTimeout, "connection not dropped", c.Closed)
			if m, err := c.Next(ctx); err == nil {
				t.Fatalf("relay answered before dropping: %s", m)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			r := harness.Start(t, harness.RelayOptions{Faults: tt.faults})
			r.Inject(corpus()[:5]...)
			c := dial(t, ctx, r.URL())
			if err := c.Send(ctx, []any{"REQ", "sub", nostr.Filter{}}); err != nil {
				t.Fatal(err)
			}
			tt.check(t, ctx, c)
			if got := r.Stats().Reqs; got < 1 {
				t.Fatalf("Stats.Reqs = %d, want the REQ counted", got)
			}

			// clearing the faults heals new connections
			r.SetFaults(harness.Faults{})
			c2 := dial(t, ctx, r.URL())
			if evs := req(t, ctx, c2, "again", nostr.Filter{}); len(evs) != 5 {
				t.Fatalf("after SetFaults: %d events", len(evs))
			}
		})
	}
}

func TestHarnessDropOnReceiveCountsMessages(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{DropOnReceive: 2}})
	c := dial(t, ctx, r.URL())
	req(t, ctx, c, "first", nostr.Filter{})
	if err := c.Send(ctx, []any{"REQ", "second", nostr.Filter{}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitTimeout, "connection not dropped on the 2nd message", c.Closed)
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("relay answered the dropping message: %s", m)
	}
}

func TestHarnessIgnoreNegentropy(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true, Faults: harness.Faults{IgnoreNegentropy: true}})
	c := dial(t, ctx, r.URL())
	if err := c.Send(ctx, []any{"NEG-OPEN", "n", nostr.Filter{}, "6100000200"}); err != nil {
		t.Fatal(err)
	}
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("relay answered an ignored NEG-OPEN: %s", m)
	}
	req(t, ctx, c, "alive", nostr.Filter{}) // the connection still works
}

func TestHarnessEventFaults(t *testing.T) {
	ctx := testCtx(t)
	k := signed.NewKey()
	evs := notes(k, 3, 1_700_000_000)

	r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{EventReject: "rate-limited: slow down"}})
	err := harness.Publish(ctx, r.URL(), evs[0])
	var rej *harness.RejectedError
	if !errors.As(err, &rej) || rej.Reason != "rate-limited: slow down" || r.Has(evs[0].ID) {
		t.Fatalf("EventReject: err %v", err)
	}

	r2 := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{EventLimit: 2}})
	err = harness.Publish(ctx, r2.URL(), evs...)
	if !errors.As(err, &rej) || rej.ID != evs[2].ID || !strings.HasPrefix(rej.Reason, "rate-limited:") {
		t.Fatalf("EventLimit: err %v", err)
	}
	if !r2.Has(evs[0].ID) || !r2.Has(evs[1].ID) || r2.Has(evs[2].ID) {
		t.Fatal("EventLimit stored the wrong events")
	}
	// the limit is per connection
	if err := harness.Publish(ctx, r2.URL(), evs[2]); err != nil {
		t.Fatalf("new connection: %v", err)
	}

	r3 := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{EventIgnore: true}})
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := harness.Publish(short, r3.URL(), evs[0]); err == nil || r3.Has(evs[0].ID) {
		t.Fatalf("EventIgnore: err %v, stored %t; want no answer and nothing stored", err, r3.Has(evs[0].ID))
	}
}

func TestHarnessRefusedAndClosedPorts(t *testing.T) {
	ctx := testCtx(t)
	for _, tt := range []struct {
		name   string
		faults harness.Faults
		status int
	}{
		{"503", harness.Faults{Refuse: true}, http.StatusServiceUnavailable},
		{"plain http", harness.Faults{PlainHTTP: true}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := harness.Start(t, harness.RelayOptions{Faults: tt.faults})
			if c, err := harness.Dial(ctx, r.URL()); err == nil {
				c.Close()
				t.Fatal("websocket dial succeeded")
			}
			resp, err := http.Get(r.HTTPURL())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if st := r.Stats(); st.Refused != 2 || st.Connections != 0 {
				t.Fatalf("Refused %d, Connections %d", st.Refused, st.Connections)
			}
		})
	}
	_, err := harness.Dial(ctx, harness.ClosedPort(t))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("closed port: err = %v, want connection refused", err)
	}
}

func TestHarnessMaxSubscriptions(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{MaxSubscriptions: 2, EnforceMaxSubscriptions: true})
	if info := nip11(t, r); info.Limitation == nil || info.Limitation.MaxSubscriptions != 2 {
		t.Fatalf("NIP-11 limitation = %+v", info.Limitation)
	}
	c := dial(t, ctx, r.URL())
	req(t, ctx, c, "a", nostr.Filter{})
	req(t, ctx, c, "b", nostr.Filter{})
	if err := c.Send(ctx, []any{"REQ", "c", nostr.Filter{}}); err != nil {
		t.Fatal(err)
	}
	if before, m := untilLabel(t, ctx, c, "NOTICE"); len(before) != 0 || m != `["NOTICE","ERROR: too many concurrent REQs"]` {
		t.Fatalf("third REQ: %q then %s", before, m)
	}
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("third REQ served: %s", m)
	}
	req(t, ctx, c, "a", nostr.Filter{Limit: 1}) // reusing an open id is fine
	if err := c.CloseSub(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	req(t, ctx, c, "d", nostr.Filter{})
	// the limit is per connection
	c2 := dial(t, ctx, r.URL())
	req(t, ctx, c2, "a", nostr.Filter{})
	st := r.Stats()
	if st.PeakSubsPerConn != 2 || st.OpenSubs != 3 || st.PeakSubs != 3 {
		t.Fatalf("PeakSubsPerConn %d, OpenSubs %d, PeakSubs %d; want 2, 3, 3", st.PeakSubsPerConn, st.OpenSubs, st.PeakSubs)
	}

	// announced but not enforced: REQs go through
	r2 := harness.Start(t, harness.RelayOptions{MaxSubscriptions: 1})
	c3 := dial(t, ctx, r2.URL())
	req(t, ctx, c3, "a", nostr.Filter{})
	req(t, ctx, c3, "b", nostr.Filter{})
}

func TestHarnessRestartKeepsPortAndData(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true})
	url := r.URL()
	r.Inject(corpus()[:10]...)
	c := dial(t, ctx, url)
	req(t, ctx, c, "live", nostr.Filter{LimitZero: true})

	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	testkit.WaitFor(t, waitTimeout, "client connection survived Stop", c.Closed)
	if _, err := harness.Dial(ctx, url); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial stopped relay: %v, want connection refused", err)
	}
	if err := r.Stop(); !errors.Is(err, harness.ErrNotRunning) {
		t.Fatalf("second Stop: %v", err)
	}
	r.Inject(corpus()[10:15]...) // the store stays usable while down

	if err := r.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.URL() != url {
		t.Fatalf("URL changed: %s -> %s", url, r.URL())
	}
	c2 := dial(t, ctx, url)
	if evs := req(t, ctx, c2, "all", nostr.Filter{}); len(evs) != 15 {
		t.Fatalf("after restart: %d events, want 15", len(evs))
	}
	// Restart of a running relay stops it first
	if err := r.Restart(); err != nil {
		t.Fatalf("Restart running: %v", err)
	}
	testkit.WaitFor(t, waitTimeout, "connection survived Restart", c2.Closed)
	if st := r.Stats(); st.Connections != 2 || st.OpenSubs != 0 {
		t.Fatalf("Connections %d, OpenSubs %d", st.Connections, st.OpenSubs)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestHarnessDropConnections(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	c := dial(t, ctx, r.URL())
	req(t, ctx, c, "s", nostr.Filter{})
	r.DropConnections()
	testkit.WaitFor(t, waitTimeout, "connection not dropped", c.Closed)
	c2 := dial(t, ctx, r.URL())
	req(t, ctx, c2, "s", nostr.Filter{})
}

type relayInfo struct {
	SupportedNIPs []int `json:"supported_nips"`
	Limitation    *struct {
		MaxSubscriptions int `json:"max_subscriptions"`
		MaxLimit         int `json:"max_limit"`
	} `json:"limitation"`
}

func nip11(t *testing.T, r *harness.Relay) relayInfo {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.HTTPURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("NIP-11: %v", err)
	}
	defer resp.Body.Close()
	var info relayInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatalf("NIP-11 decode: %v", err)
	}
	if info.Limitation == nil {
		t.Fatal("NIP-11 without limitation")
	}
	return info
}

func containsNIP(nips []int, n int) bool {
	for _, x := range nips {
		if x == n {
			return true
		}
	}
	return false
}

func TestHarnessAuth(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{AuthWrites: true, AuthReads: true})
	k := signed.NewKey()
	ev := notes(k, 1, 1_700_000_000)[0]
	err := r.Publish(ctx, ev)
	var rej *harness.RejectedError
	if !errors.As(err, &rej) || !strings.HasPrefix(rej.Reason, "auth-required:") {
		t.Fatalf("unauthenticated publish: %v", err)
	}

	c := dial(t, ctx, r.URL())
	res, err := c.Req(ctx, "s", nostr.Filter{})
	if err != nil || !strings.HasPrefix(res.Closed, "auth-required:") {
		t.Fatalf("unauthenticated REQ: %+v %v", res, err)
	}
	// the challenge came before the CLOSED and stays queued for Next
	m, err := c.Next(ctx)
	if err != nil || harness.Label(m) != "AUTH" {
		t.Fatalf("want an AUTH challenge, got %q %v", m, err)
	}
	var v []string
	if err := json.Unmarshal([]byte(m), &v); err != nil || len(v) != 2 {
		t.Fatalf("AUTH message %q", m)
	}
	challenge := v[1]
	if st := r.Stats(); st.Sent["AUTH"] != 2 {
		t.Fatalf("Sent AUTH = %d, want 2 (one per connection)", st.Sent["AUTH"])
	}
	bad := k.Auth(r.URL(), "wrong")
	if err := c.Send(ctx, []any{"AUTH", bad}); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Next(ctx); !strings.Contains(m, "false") || !strings.Contains(m, bad.ID) {
		t.Fatalf("bad AUTH answered %s", m)
	}
	good := k.Auth(r.URL(), challenge)
	if err := c.Send(ctx, []any{"AUTH", good}); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Next(ctx); !strings.Contains(m, "true") || !strings.Contains(m, good.ID) {
		t.Fatalf("good AUTH answered %s", m)
	}
	req(t, ctx, c, "s2", nostr.Filter{})
	if ok, reason, err := c.Publish(ctx, ev); !ok || err != nil {
		t.Fatalf("authenticated EVENT: %q %v", reason, err)
	}
	if !r.Has(ev.ID) {
		t.Fatal("authenticated EVENT not stored")
	}
}

func TestHarnessDelayAndNIP11Extra(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{
		Faults:     harness.Faults{Delay: quiet},
		NIP11Extra: map[string]any{"supported_grasps": []string{"GRASP-01"}},
	})
	c := dial(t, ctx, r.URL())
	if err := c.Send(ctx, []any{"REQ", "s", nostr.Filter{}}); err != nil {
		t.Fatal(err)
	}
	// EOSE is held back by the delay …
	if m := nextWithin(c, quiet/3); m != "" {
		t.Fatalf("delayed relay answered at once: %s", m)
	}
	// … but arrives
	if m, err := c.Next(ctx); err != nil || harness.Label(m) != "EOSE" {
		t.Fatalf("got %q, %v", m, err)
	}

	req, _ := http.NewRequest(http.MethodGet, r.HTTPURL(), nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if g, ok := doc["supported_grasps"].([]any); !ok || len(g) != 1 || g[0] != "GRASP-01" || doc["software"] == nil {
		t.Fatalf("NIP-11 = %v", doc)
	}
}

func TestHarnessPublishToMuteRelayTimesOut(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{Mute: true}})
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	err := r.Publish(ctx, notes(signed.NewKey(), 1, 1_700_000_000)...)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish to a mute relay: %v, want a deadline error", err)
	}
}

// Faults.Latency delays every message both ways: a REQ's EOSE comes one
// round trip (2×Latency) after the REQ at the earliest, and the events
// before it arrive in order, with nothing lost.
func TestHarnessLatency(t *testing.T) {
	ctx := testCtx(t)
	const latency = 100 * time.Millisecond
	r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{Latency: latency}})
	k := signed.NewKey()
	var want []string
	for i := 0; i < 50; i++ {
		ev := k.Issue(k.RepoAddress("lat"), fmt.Sprintf("issue %d", i))
		r.Inject(ev)
		want = append(want, ev.ID)
	}
	c := dial(t, ctx, r.URL())
	start := time.Now()
	res, err := c.Req(ctx, "s", nostr.Filter{Kinds: []int{1621}})
	if err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*latency {
		t.Fatalf("EOSE after %s, before one round trip of %s", rtt, 2*latency)
	}
	if len(res.Events) != len(want) {
		t.Fatalf("got %d events, want %d", len(res.Events), len(want))
	}
}

// TestHarnessCloseAfterEvents: the relay closes the connection with status
// 1011 (a close frame, not a cut) right after the N-th EVENT it sent on it,
// counting EVENTs only; CloseCode picks another status.
func TestHarnessCloseAfterEvents(t *testing.T) {
	for _, tc := range []struct {
		code int
		want websocket.StatusCode
	}{{0, websocket.StatusInternalError}, {int(websocket.StatusGoingAway), websocket.StatusGoingAway}} {
		ctx := testCtx(t)
		r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{CloseAfterEvents: 4, CloseCode: tc.code}})
		r.Inject(corpus()[:10]...)
		c := dial(t, ctx, r.URL())
		// Two EOSEs first: they do not count.
		req(t, ctx, c, "empty1", nostr.Filter{Kinds: []int{12345}})
		req(t, ctx, c, "empty2", nostr.Filter{Kinds: []int{12345}})
		if err := c.Send(ctx, []any{"REQ", "sub", nostr.Filter{}}); err != nil {
			t.Fatal(err)
		}
		n := 0
		var err error
		for {
			var m string
			if m, err = c.Next(ctx); err != nil {
				break
			}
			if harness.Label(m) != "EVENT" {
				t.Fatalf("got %s, want only EVENTs before the close", m)
			}
			n++
		}
		if n != 4 || websocket.CloseStatus(err) != tc.want {
			t.Fatalf("%d EVENTs, then %v (status %d); want 4 and a close frame with %d", n, err, websocket.CloseStatus(err), tc.want)
		}
	}
}

// TestHarnessCutAfter: every connection opened while CutAfter is set is
// cut abruptly (no close frame) within [CutAfter, CutAfterMax] of opening,
// each after its own duration.
func TestHarnessCutAfter(t *testing.T) {
	ctx := testCtx(t)
	const low, high = 200 * time.Millisecond, 600 * time.Millisecond
	r := harness.Start(t, harness.RelayOptions{Faults: harness.Faults{CutAfter: low, CutAfterMax: high}})
	var lived []time.Duration
	for i := 0; i < 8; i++ {
		start := time.Now()
		c := dial(t, ctx, r.URL())
		_, err := c.Next(ctx)
		took := time.Since(start)
		if ctx.Err() != nil || websocket.CloseStatus(err) != -1 {
			t.Fatalf("connection %d ended with %v, want a cut without close frame", i, err)
		}
		if took < low {
			t.Fatalf("connection %d cut after %s, before CutAfter %s", i, took, low)
		}
		lived = append(lived, took)
	}
	slices.Sort(lived)
	if lived[len(lived)-1]-lived[0] < 20*time.Millisecond {
		t.Errorf("connections lived %v: the same duration each, want drawn from the range", lived)
	}
	testkit.WaitFor(t, waitTimeout, "every cut connection counted closed", func() bool {
		st := r.Stats()
		return st.Connections == 8 && st.OpenConnections == 0
	})
}
