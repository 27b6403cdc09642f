package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// reply is how the fake relay answers one EVENT.
type reply struct {
	ok     bool
	reason string
	silent bool // send no OK (the test may answer later with fakeConn.answer)
	drop   bool // close the connection abruptly instead of answering
}

// fakeRelay is a scriptable relay speaking just enough NIP-01/NIP-42 for the
// publisher: EVENT → OK as decide says, AUTH → OK. It records every EVENT
// frame it receives.
type fakeRelay struct {
	t   testing.TB
	srv *httptest.Server
	url string

	mu sync.Mutex
	// decide answers an EVENT; it runs under mu. nil: store and accept,
	// duplicates answered OK false "duplicate:".
	decide func(c *fakeConn, ev *nostr.Event) reply
	// requireAuth makes unauthenticated EVENTs get an AUTH challenge and
	// OK false "auth-required:".
	requireAuth bool
	refuseAuth  bool
	frames      int            // EVENT frames received
	perID       map[string]int // EVENT frames per event id
	order       []string       // event ids in order of first arrival
	stored      map[string]bool
	conns       int
	authFrames  int
}

type fakeConn struct {
	n         int // 1-based connection number
	ws        *ws.Conn
	challenge string
	authed    bool
	events    int // EVENT frames on this connection
}

func newFakeRelay(t testing.TB) *fakeRelay {
	f := &fakeRelay{t: t, perID: make(map[string]int), stored: make(map[string]bool)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.url = "ws" + strings.TrimPrefix(f.srv.URL, "http")
	return f
}

// coalescing are the relay options the sidecar dials the own relay with:
// the publisher's bursts go out in one write.
func coalescing() relay.Options {
	o := relay.DefaultOptions()
	o.CoalesceWrites = true
	return o
}

func (f *fakeRelay) dialer() Dialer {
	return func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, f.url, coalescing())
	}
}

func (f *fakeRelay) setDecide(d func(c *fakeConn, ev *nostr.Event) reply) {
	f.mu.Lock()
	f.decide = d
	f.mu.Unlock()
}

// accept is the default decision: store, or answer duplicate.
func (f *fakeRelay) accept(ev *nostr.Event) reply {
	if f.stored[ev.ID] {
		return reply{ok: false, reason: "duplicate: already have it"}
	}
	f.stored[ev.ID] = true
	return reply{ok: true}
}

func (f *fakeRelay) snapshot() (frames int, conns int, authFrames int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frames, f.conns, f.authFrames
}

// sent returns the EVENT frames received for id.
func (f *fakeRelay) sent(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.perID[id]
}

func (f *fakeRelay) serve(w http.ResponseWriter, r *http.Request) {
	c, err := ws.Accept(w, r, &ws.AcceptOptions{CompressionMode: ws.CompressionDisabled})
	if err != nil {
		return
	}
	defer c.CloseNow()
	f.mu.Lock()
	f.conns++
	fc := &fakeConn{n: f.conns, ws: c, challenge: fmt.Sprintf("challenge-%d", f.conns)}
	f.mu.Unlock()
	ctx := r.Context()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if !f.handle(ctx, fc, data) {
			return
		}
	}
}

// handle processes one frame; false means drop the connection.
func (f *fakeRelay) handle(ctx context.Context, fc *fakeConn, data []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch env := nostr.ParseMessage(string(data)).(type) {
	case *nostr.EventEnvelope:
		ev := &env.Event
		f.frames++
		fc.events++
		if f.perID[ev.ID] == 0 {
			f.order = append(f.order, ev.ID)
		}
		f.perID[ev.ID]++
		if f.requireAuth && !fc.authed {
			fc.send(ctx, []any{"AUTH", fc.challenge})
			fc.answer(ev.ID, false, "auth-required: authenticate first")
			return true
		}
		var rep reply
		if f.decide != nil {
			rep = f.decide(fc, ev)
		} else {
			rep = f.accept(ev)
		}
		switch {
		case rep.drop:
			return false
		case rep.silent:
		default:
			fc.answer(ev.ID, rep.ok, rep.reason)
		}
	case *nostr.AuthEnvelope:
		f.authFrames++
		ev := env.Event
		ok, _ := ev.CheckSignature()
		if f.refuseAuth || !ok || ev.Kind != nostr.KindClientAuthentication || ev.Tags.GetFirst([]string{"challenge", fc.challenge}) == nil {
			fc.answer(ev.ID, false, "error: failed to authenticate")
			return true
		}
		fc.authed = true
		fc.answer(ev.ID, true, "")
	}
	return true
}

func (fc *fakeConn) send(ctx context.Context, msg []any) {
	b, _ := json.Marshal(msg)
	_ = fc.ws.Write(ctx, ws.MessageText, b)
}

// answer writes an OK (errors are ignored: the connection may be gone).
func (fc *fakeConn) answer(id string, ok bool, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fc.send(ctx, []any{"OK", id, ok, reason})
}

// testConfig is DefaultConfig with timers shrunk for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.Window = 16
	c.OKTimeout = 5 * time.Second
	c.RetryBase = 5 * time.Millisecond
	c.RetryMax = 50 * time.Millisecond
	c.QueueSize = 1000
	c.AuthTimeout = 5 * time.Second
	c.DialTimeout = 5 * time.Second
	return c
}

type pubHarness struct {
	p    *Publisher
	reg  *prometheus.Registry
	stop func() // cancels Run and waits for it
}

// startPublisher runs a publisher until the test ends (or stop is called).
func startPublisher(t testing.TB, cfg Config, dial Dialer, sign Signer, opts ...Option) *pubHarness {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(cfg, dial, sign, zaptest.NewLogger(t), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return &pubHarness{p: p, reg: reg, stop: stop}
}

// results collects outcomes reported to done callbacks.
type results struct {
	mu   sync.Mutex
	byID map[string][]Result
	n    int
}

func newResults() *results { return &results{byID: make(map[string][]Result)} }

func (r *results) done(res Result) {
	r.mu.Lock()
	r.byID[res.ID] = append(r.byID[res.ID], res)
	r.n++
	r.mu.Unlock()
}

func (r *results) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *results) get(id string) []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.byID[id]...)
}

func makeEvents(t testing.TB, n int) []*nostr.Event {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	evs := make([]*nostr.Event, n)
	base := nostr.Now()
	for i := range evs {
		ev := &nostr.Event{Kind: 1621, CreatedAt: base, Content: fmt.Sprintf("issue %d", i), Tags: nostr.Tags{}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		evs[i] = ev
	}
	return evs
}

func submitAll(t testing.TB, p *Publisher, evs []*nostr.Event, res *results) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ev := range evs {
		if err := p.Submit(ctx, ev, res.done); err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
}

func signer(t testing.TB) Signer {
	sk := nostr.GeneratePrivateKey()
	return func(ev *nostr.Event) error { return ev.Sign(sk) }
}
