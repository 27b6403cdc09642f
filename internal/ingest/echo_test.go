package ingest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// answeringPublish holds every submission until answer, then settles each
// with the result the test gives.
type answeringPublish struct {
	mu      sync.Mutex
	pending []func(publish.Result)
	events  []*nostr.Event
}

func (p *answeringPublish) Submit(_ context.Context, ev *nostr.Event, done func(publish.Result)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, done)
	p.events = append(p.events, ev)
	return nil
}

func (p *answeringPublish) Publish(context.Context, *nostr.Event) (publish.Result, error) {
	panic("not used")
}

func (p *answeringPublish) answer(r func(ev *nostr.Event) publish.Result) {
	p.mu.Lock()
	list, evs := p.pending, p.events
	p.pending, p.events = nil, nil
	p.mu.Unlock()
	for i, done := range list {
		done(r(evs[i]))
	}
}

func newEchoHandler(t *testing.T) (*Handler, *answeringPublish, *localindex.Index, *[]*nostr.Event) {
	t.Helper()
	idx, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := &answeringPublish{}
	cfg := DefaultConfig()
	cfg.Rejected = RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}
	h, err := New(cfg, Deps{Publisher: pub, Present: idx, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	var echoed []*nostr.Event
	h.OnEcho(func(ev *nostr.Event) { echoed = append(echoed, ev) })
	return h, pub, idx, &echoed
}

func rawOf(t *testing.T, ev *nostr.Event) []byte {
	t.Helper()
	raw, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The echo of a copy in flight is skipped, and the copy's OK hands the
// event on as its echo: recorded as new on the own relay (the own-relay
// fill skips it) and passed to OnEcho's function once. Other copies,
// replaceable kinds and ids not in flight are not skipped, nor is an echo
// that comes once the OK is being settled.
func TestSkippedEchoIsHandledWithItsOK(t *testing.T) {
	h, pub, idx, echoed := newEchoHandler(t)
	ctx := context.Background()
	ev := issueEvent(t, 1)
	raw := rawOf(t, ev)
	if h.SkipEcho(raw) {
		t.Fatal("skipped the echo of an event not in flight")
	}
	h.process(ctx, Incoming{Event: ev, Raw: raw, Relay: "ws://a"})

	other := *ev
	other.Sig = strings.Repeat("1", 128)
	if h.SkipEcho(rawOf(t, &other)) {
		t.Fatal("skipped another copy of the id in flight")
	}
	replaceable := *ev
	replaceable.Kind = 30618
	if h.SkipEcho(rawOf(t, &replaceable)) {
		t.Fatal("skipped a replaceable kind (a relay broadcasts those without storing them)")
	}
	if !h.SkipEcho(raw) {
		t.Fatal("the echo of the copy in flight was not skipped")
	}
	if idx.Has(ev.ID) || len(*echoed) != 0 {
		t.Fatal("the skipped echo was handled before its OK")
	}
	if n := testkit.Value(t, h.m.echoesSkipped); n != 1 {
		t.Fatalf("echoes skipped counted %v, want 1", n)
	}

	pub.answer(func(e *nostr.Event) publish.Result { return publish.Result{ID: e.ID, Outcome: publish.Accepted} })
	if got := *echoed; len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("OnEcho got %v, want the event once", got)
	}
	if !idx.Has(ev.ID) || !idx.Filled(ev.ID) {
		t.Fatal("the settled echo is not indexed as new on the own relay")
	}
	if h.SkipEcho(raw) {
		t.Fatal("skipped an echo after the flight settled")
	}
}

// An echo proves the own relay stored the copy, whatever its OK says: a
// copy refused for another reason after its echo (a rate limit, say) is
// still handed on as its echo.
func TestSkippedEchoOfARefusedCopyIsStillHandled(t *testing.T) {
	h, pub, idx, echoed := newEchoHandler(t)
	ev := issueEvent(t, 2)
	raw := rawOf(t, ev)
	h.process(context.Background(), Incoming{Event: ev, Raw: raw, Relay: "ws://a"})
	if !h.SkipEcho(raw) {
		t.Fatal("the echo of the copy in flight was not skipped")
	}
	pub.answer(func(e *nostr.Event) publish.Result {
		return publish.Result{ID: e.ID, Outcome: publish.Rejected, Reason: "rate-limited: slow down"}
	})
	if got := *echoed; len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("OnEcho got %v, want the event", got)
	}
	if !idx.Has(ev.ID) {
		t.Fatal("the echoed event is not indexed as on the own relay")
	}
}

// Settling closes the flight to echoes first: the close and the echo
// race, and either the echo is skipped (close reports it) or it is not.
func TestFlightClosedToEchoes(t *testing.T) {
	f := newFlights()
	seen := newSeenSet(10, time.Hour, time.Now)
	var id [32]byte
	id[0] = 1
	sig := strings.Repeat("a", 128)
	if f.claim(seen, id, sig) != claimSend {
		t.Fatal("first copy not sent")
	}
	if f.echo(id, []byte(strings.Repeat("b", 128))) {
		t.Fatal("echo of another copy taken")
	}
	if f.close(id, sig) {
		t.Fatal("close reports an echo that did not come")
	}
	if f.echo(id, []byte(sig)) {
		t.Fatal("echo taken after close")
	}
	var id2 [32]byte
	id2[0] = 2
	f.claim(seen, id2, sig)
	if !f.echo(id2, []byte(sig)) || !f.close(id2, sig) {
		t.Fatal("an echo before close is not reported by it")
	}
	if n := f.len(); n != 2 {
		t.Fatalf("%d flights, want 2: close leaves them to settle", n)
	}
}
