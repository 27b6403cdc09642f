package historic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// resumeEvents returns issues by one key at the given created_at values
// (several at one value are ties).
func resumeEvents(ts ...nostr.Timestamp) []*nostr.Event {
	k := signed.KeyFromSeed("resume")
	out := make([]*nostr.Event, len(ts))
	var wg sync.WaitGroup
	for i, at := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = k.Issue(k.RepoAddress("resume"), fmt.Sprint("issue ", i), signed.WithCreatedAt(at))
		}()
	}
	wg.Wait()
	return out
}

// span returns the created_at values from down to to, one each.
func span(from, to int) []nostr.Timestamp {
	var out []nostr.Timestamp
	for ts := from; ts >= to; ts-- {
		out = append(out, nostr.Timestamp(ts))
	}
	return out
}

// resumeRig is a pager with resume cursors (page size 10, an hour of
// top-up slack) against one harness relay.
type resumeRig struct {
	t     *testing.T
	r     *harness.Relay
	p     *Pager
	ctx   context.Context
	mu    sync.Mutex
	got   map[string]int // id → times handed on
	kinds nostr.Filter
}

func newResumeRig(t *testing.T, evs []*nostr.Event, faults harness.Faults) *resumeRig {
	t.Helper()
	r := harness.Start(t, harness.RelayOptions{Name: "resume", Faults: faults})
	r.Inject(evs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &resumeRig{t: t, r: r, ctx: sweepcursor.With(ctx), got: map[string]int{},
		p:     &Pager{PageSize: 10, EOSETimeout: 10 * time.Second, Resume: sweepcursor.New(0, time.Hour)},
		kinds: nostr.Filter{Kinds: []int{signed.KindIssue}}}
}

// sweep runs one sweep of the rig's filter on a new connection.
func (g *resumeRig) sweep() error {
	g.t.Helper()
	conn, err := relay.Dial(g.ctx, g.r.URL(), relay.DefaultOptions())
	if err != nil {
		g.t.Fatal(err)
	}
	defer conn.Close()
	return g.p.Sync(g.ctx, conn, []nostr.Filter{g.kinds}, 1, func(_ context.Context, in ingest.Incoming) error {
		g.mu.Lock()
		g.got[in.Event.ID]++
		g.mu.Unlock()
		return nil
	})
}

// missing returns how many of evs were never handed on.
func (g *resumeRig) missing(evs []*nostr.Event) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, ev := range evs {
		if g.got[ev.ID] == 0 {
			n++
		}
	}
	return n
}

// sentSince returns the EVENTs the relay sent and the REQs it received
// since t0.
func (g *resumeRig) sentSince(t0 time.Time) (events int, reqs []string) {
	for _, m := range g.r.Sent(t0) {
		if m.Type == "EVENT" {
			events++
		}
	}
	for _, m := range g.r.Received(t0) {
		if m.Type == "REQ" {
			reqs = append(reqs, m.Raw)
		}
	}
	return events, reqs
}

// TestPagerResumesBelowItsCursor: a sweep whose connection closes after
// 25 events (two pages of 10 and five of the third) hands those five on
// too, and the next sweep of the filter asks the range the relay stored
// since the first began, then goes on below the oldest event it trusted:
// it is sent only the events it lacks and the two at the cut again.
func TestPagerResumesBelowItsCursor(t *testing.T) {
	evs := resumeEvents(span(100, 1)...)
	g := newResumeRig(t, evs, harness.Faults{CloseAfterEvents: 25})
	if err := g.sweep(); err == nil || !strings.Contains(err.Error(), "StatusInternalError") {
		t.Fatalf("first sweep: %v, want the relay's close", err)
	}
	// 10 of the first page, 9 new of the second (each page repeats the
	// last one's oldest event), 4 new of the third.
	if n := g.missing(evs); n != 77 {
		t.Fatalf("%d events missing after the first sweep, want 77: the partial page is handed on", n)
	}
	g.r.SetFaults(harness.Faults{})
	t0 := time.Now()
	if err := g.sweep(); err != nil {
		t.Fatal(err)
	}
	if n := g.missing(evs); n != 0 {
		t.Fatalf("%d events missing after the resumed sweep", n)
	}
	sent, reqs := g.sentSince(t0)
	// The first sweep's cursor is at created_at 79 (the last event but
	// one to arrive, 78, is not trusted): 79 down to 1 come, with the
	// page boundaries repeated; from the top it would be 100 and more.
	if sent > 90 {
		t.Errorf("the resumed sweep was sent %d events, want 79 and the pages' repeats", sent)
	}
	if len(reqs) < 2 || !strings.Contains(reqs[0], `"since"`) || !strings.Contains(reqs[1], `"until":79`) {
		t.Errorf("REQs %v: want the top-up range first, then until 79", reqs)
	}
}

// TestPagerResumeKeepsTies: the connection closes inside a second that
// holds eight events; the resumed sweep asks that second again and gets
// the ties the first did not (a resume below the second would skip them).
func TestPagerResumeKeepsTies(t *testing.T) {
	ts := span(100, 61) // 40 events
	for range 8 {
		ts = append(ts, 50)
	}
	ts = append(ts, span(40, 1)...)
	evs := resumeEvents(ts...)
	// Pages of 10 from 100: 100–91, 91–82, 82–73, 73–64 (37 events, each
	// page repeating the last one's oldest), then 64–61 and three ties:
	// the cursor goes to second 50.
	g := newResumeRig(t, evs, harness.Faults{CloseAfterEvents: 47})
	if err := g.sweep(); err == nil {
		t.Fatal("first sweep succeeded, want the relay's close")
	}
	if n := g.missing(evs); n != len(evs)-43 {
		t.Fatalf("%d missing after the cut, want %d", n, len(evs)-43)
	}
	g.r.SetFaults(harness.Faults{})
	t0 := time.Now()
	if err := g.sweep(); err != nil {
		t.Fatal(err)
	}
	if n := g.missing(evs); n != 0 {
		t.Fatalf("%d events missing after the resumed sweep (ties at the cut skipped?)", n)
	}
	if _, reqs := g.sentSince(t0); len(reqs) < 2 || !strings.Contains(reqs[1], `"until":50`) {
		t.Errorf("REQs %v: want the second page at until 50", reqs)
	}
}

// TestPagerResumeTopsUp: events stored after a sweep began (and one
// within the slack before it) arrive through the resumed sweep's top-up;
// a finished sweep run again pages the top-up range only.
func TestPagerResumeTopsUp(t *testing.T) {
	evs := resumeEvents(span(100, 1)...)
	g := newResumeRig(t, evs, harness.Faults{CloseAfterEvents: 15})
	if err := g.sweep(); err == nil {
		t.Fatal("first sweep succeeded, want the relay's close")
	}
	now := time.Now()
	late := resumeEvents(nostr.Timestamp(now.Unix()), nostr.Timestamp(now.Add(-30*time.Minute).Unix()))
	g.r.Inject(late...)
	g.r.SetFaults(harness.Faults{})
	if err := g.sweep(); err != nil {
		t.Fatal(err)
	}
	if n := g.missing(append(evs, late...)); n != 0 {
		t.Fatalf("%d events missing after the resumed sweep", n)
	}
	t0 := time.Now()
	if err := g.sweep(); err != nil {
		t.Fatal(err)
	}
	sent, reqs := g.sentSince(t0)
	for _, req := range reqs {
		if !strings.Contains(req, `"since"`) {
			t.Errorf("a finished sweep run again asked %s, want the top-up range only", req)
		}
	}
	if sent > len(late)+1 {
		t.Errorf("a finished sweep run again was sent %d events, want the %d of the top-up range (and a page's repeat)", sent, len(late))
	}
	if n := g.p.Resume.Len(); n != 1 {
		t.Errorf("%d cursors kept, want 1", n)
	}
	g.p.Resume.Forget(g.r.URL())
	if n := g.p.Resume.Len(); n != 0 {
		t.Errorf("%d cursors after Forget", n)
	}
}

// TestPagerWithoutResumeStartsOver: outside a sweepcursor.With context a sweep
// keeps no cursor and every sweep starts from the top.
func TestPagerWithoutResumeStartsOver(t *testing.T) {
	evs := resumeEvents(span(30, 1)...)
	g := newResumeRig(t, evs, harness.Faults{})
	g.ctx = context.WithoutCancel(context.Background())
	var sent []int
	for range 2 {
		t0 := time.Now()
		if err := g.sweep(); err != nil {
			t.Fatal(err)
		}
		n, _ := g.sentSince(t0)
		sent = append(sent, n)
	}
	if n := g.p.Resume.Len(); n != 0 {
		t.Errorf("%d cursors kept without WithResume", n)
	}
	if sent[0] < len(evs) || sent[1] != sent[0] {
		t.Errorf("sweeps were sent %v events, want all %d each time", sent, len(evs))
	}
}

// TestPartialPageOrder: a partial page yields a position only when its
// events came newest first, and never from its last event alone.
func TestPartialPageOrder(t *testing.T) {
	ev := func(ts int, id string) *nostr.Event { return &nostr.Event{ID: id, CreatedAt: nostr.Timestamp(ts)} }
	cut := errors.New("cut")
	for _, tc := range []struct {
		page    []*nostr.Event
		ordered bool
		bottom  nostr.Timestamp
		ids     []string
	}{
		{[]*nostr.Event{ev(9, "a"), ev(8, "b"), ev(8, "c"), ev(3, "d")}, true, 8, []string{"b", "c"}},
		{[]*nostr.Event{ev(9, "a"), ev(7, "b"), ev(8, "c"), ev(6, "d")}, false, 0, nil},
		{[]*nostr.Event{ev(9, "a")}, false, 0, nil},
		{[]*nostr.Event{ev(5, "a"), ev(5, "b")}, true, 5, []string{"a", "b"}},
	} {
		p := newPartialPage(cut, tc.page)
		if p.ordered != tc.ordered || p.bottom != tc.bottom || !slices.Equal(p.ids, tc.ids) || !errors.Is(p, cut) {
			t.Errorf("page %v: got ordered %v bottom %d ids %v", tc.page, p.ordered, p.bottom, p.ids)
		}
	}
}
