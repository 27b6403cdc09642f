package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/grasp-sync/grasp-sync/testkit/harness"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
)

func signed(t testing.TB, sk string, kind int, content string, tags nostr.Tags) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Content: content, Tags: tags}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return ev
}

func dial(t *testing.T, url string, opts Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPublishSubscribeEOSEAndLive(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	sk := nostr.GeneratePrivateKey()

	for i := 0; i < 20; i++ {
		ev := signed(t, sk, 1621, fmt.Sprint("issue ", i), nil)
		if r := c.PublishWait(ctx, ev); r.Err != nil || !r.OK {
			t.Fatalf("publish %d: %+v", i, r)
		}
	}
	// Publishing the same event again is a duplicate, reported as OK.
	dup := signed(t, sk, 1621, "dup", nil)
	c.PublishWait(ctx, dup)
	if r := c.PublishWait(ctx, dup); r.Err != nil || !strings.HasPrefix(r.Reason, "duplicate:") && !r.OK {
		t.Fatalf("duplicate publish: %+v", r)
	}

	sub, err := c.Subscribe(ctx, "s1", nostr.Filters{{Kinds: []int{1621}}})
	if err != nil {
		t.Fatal(err)
	}
	got, eose := 0, false
	timeout := time.After(5 * time.Second)
	for !eose {
		select {
		case m := <-sub.Messages():
			switch m.Type {
			case MsgEvent:
				got++
				if m.Size == 0 {
					t.Fatal("event without frame size")
				}
			case MsgEOSE:
				eose = true
			}
		case <-timeout:
			t.Fatal("no EOSE")
		}
	}
	if got != 21 {
		t.Fatalf("got %d stored events, want 21", got)
	}

	// A live event published by another client arrives after EOSE.
	other := dial(t, url, DefaultOptions())
	live := signed(t, sk, 1621, "live", nil)
	if r := other.PublishWait(ctx, live); !r.OK {
		t.Fatalf("publish live: %+v", r)
	}
	select {
	case m := <-sub.Messages():
		if m.Type != MsgEvent || m.Event.ID != live.ID {
			t.Fatalf("got %+v, want live event", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("live event did not arrive")
	}
	sub.Close()
	sub.Close() // idempotent
	select {
	case <-sub.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if s := c.Stats(); s.BytesIn == 0 || s.BytesOut == 0 || s.FramesIn < 22 {
		t.Fatalf("stats not counted: %+v", s)
	}
}

func TestDuplicateSubscriptionID(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	if _, err := c.Subscribe(ctx, "x", nostr.Filters{{Kinds: []int{1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, "x", nostr.Filters{{Kinds: []int{1}}}); !errors.Is(err, ErrDuplicateSubscription) {
		t.Fatalf("got %v, want ErrDuplicateSubscription", err)
	}
}

func TestSubscribeBufferedQueueLength(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	for _, tc := range []struct {
		id            string
		buffer, queue int
	}{{"a", 3, 3}, {"b", 0, 1}} {
		sub, err := c.SubscribeBuffered(ctx, tc.id, nostr.Filters{{Kinds: []int{1}}}, tc.buffer)
		if err != nil {
			t.Fatal(err)
		}
		if cap(sub.ch) != tc.queue {
			t.Errorf("buffer %d: queue of %d, want %d", tc.buffer, cap(sub.ch), tc.queue)
		}
	}
	def, err := c.Subscribe(ctx, "d", nostr.Filters{{Kinds: []int{1}}})
	if err != nil || cap(def.ch) != DefaultOptions().SubscriptionBuffer {
		t.Fatalf("Subscribe: %v, queue of %d", err, cap(def.ch))
	}
}

func TestClosedReasonAndRejectedOK(t *testing.T) {
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			if len(f.Kinds) == 1 && f.Kinds[0] == 7 {
				return true, "rate-limited: slow down"
			}
			return false, ""
		})
		rl.RejectEvent = append(rl.RejectEvent, func(ctx context.Context, ev *nostr.Event) (bool, string) {
			return ev.Kind == 7, "blocked: no reactions"
		})
	})
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "r", nostr.Filters{{Kinds: []int{7}}})
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for m := range sub.Messages() { // closed after CLOSED
		if m.Type == MsgClosed {
			reason = m.Reason
		}
	}
	if !strings.HasPrefix(reason, "rate-limited:") {
		t.Fatalf("CLOSED reason %q", reason)
	}
	r := c.PublishWait(ctx, signed(t, nostr.GeneratePrivateKey(), 7, "+", nil))
	if r.Err != nil || r.OK || r.Reason != "blocked: no reactions" {
		t.Fatalf("got %+v", r)
	}
}

func TestAuthenticate(t *testing.T) {
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.RejectEvent = append(rl.RejectEvent, func(ctx context.Context, ev *nostr.Event) (bool, string) {
			if khatru.GetAuthed(ctx) == "" {
				return true, "auth-required: please authenticate"
			}
			return false, ""
		})
		rl.OnConnect = append(rl.OnConnect, func(ctx context.Context) { khatru.RequestAuth(ctx) })
	})
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	sk := nostr.GeneratePrivateKey()
	ev := signed(t, sk, 1, "hi", nil)
	if r := c.PublishWait(ctx, ev); r.OK || !strings.HasPrefix(r.Reason, "auth-required:") {
		t.Fatalf("got %+v before auth", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Challenge() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Authenticate(ctx, func(e *nostr.Event) error { return e.Sign(sk) }); err != nil {
		t.Fatal(err)
	}
	if r := c.PublishWait(ctx, ev); !r.OK {
		t.Fatalf("got %+v after auth", r)
	}
}

func TestConnectionEndFailsWaiters(t *testing.T) {
	drop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		go func() {
			for {
				if _, _, err := conn.Read(context.Background()); err != nil {
					return
				}
			}
		}()
		<-drop
		conn.CloseNow()
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	c := dial(t, url, DefaultOptions())
	sub, err := c.Subscribe(context.Background(), "s", nostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	close(drop)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not notice the server going away")
	}
	if c.Err() == nil {
		t.Fatal("Err is nil after the connection ended")
	}
	for range sub.Messages() {
	}
	r := <-c.Publish(context.Background(), signed(t, nostr.GeneratePrivateKey(), 1, "x", nil))
	if !errors.Is(r.Err, ErrClosed) {
		t.Fatalf("publish after close: %+v", r)
	}
}

func TestDialNotWebsocket(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), DefaultOptions())
	if !errors.Is(err, ErrNotWebsocket) {
		t.Fatalf("got %v, want ErrNotWebsocket", err)
	}
}

func TestNegentropyPassthrough(t *testing.T) {
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) { rl.Negentropy = true })
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	// An empty client message (version byte only, one full-range IdList of
	// zero items) is a valid first message.
	ch, err := c.NegOpen(ctx, "n1", nostr.Filter{Kinds: []int{1}}, "6100000200")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.Msg == "" && r.Err == "" {
			t.Fatalf("got %+v, want NEG-MSG or NEG-ERR", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no negentropy reply")
	}
	c.NegClose("n1")
	if _, ok := <-ch; ok {
		t.Fatal("channel not closed after NegClose")
	}
	// Garbage payloads must come back as an error, never kill the connection.
	ch, err = c.NegOpen(ctx, "n2", nostr.Filter{Kinds: []int{1}}, "zz")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
	}
	if c.Err() != nil {
		t.Fatalf("connection ended: %v", c.Err())
	}
}

func TestFrameLabel(t *testing.T) {
	for in, want := range map[string]string{
		`["EVENT","s",{}]`:     "EVENT",
		`["NEG-ERROR","x",""]`: "NEG-ERROR",
		`garbage`:              "INVALID",
		`[1,2]`:                "INVALID",
	} {
		if got := frameLabel(in); got != want {
			t.Errorf("frameLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHandleGarbageDoesNotPanic(t *testing.T) {
	c := &Conn{subs: map[string]*Subscription{}, negs: map[string]chan NegReply{}, oks: map[string]okWaiters{}}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	for _, m := range []string{``, `[`, `["EVENT"]`, `["EVENT","s",[]]`, `["OK"]`, `["OK","x",true]`, `["NEG-MSG"]`, `["AUTH",{}]`, `["CLOSED","s"]`, `["EOSE",1]`, `["NOTICE",{"a":1}]`} {
		c.log = nil
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%q panicked: %v", m, r)
				}
			}()
			c.opts.Logger = nil
			c.log = zapNop()
			c.handle([]byte(m))
		}()
	}
}

func zapNop() *zap.Logger { return zap.NewNop() }

// TestExtraFieldsAfterReason: NEG-ERR (relay.damus.io sends a fourth field)
// and CLOSED with fields after the reason still reach their session and
// subscription.
func TestExtraFieldsAfterReason(t *testing.T) {
	var frames []string
	c, sub, neg, _ := fuzzConn(t, zapNop(), &frames)
	c.handle([]byte(`["NEG-ERR","n1","error: negentropy disabled",{"extra":1}]`))
	select {
	case r := <-neg:
		if r.Err != "error: negentropy disabled" {
			t.Fatalf("NEG-ERR reply %+v", r)
		}
	default:
		t.Fatal("NEG-ERR with a fourth field was dropped")
	}
	c.handle([]byte(`["CLOSED","s1","auth-required: who are you","extra"]`))
	select {
	case m := <-sub.ch:
		if m.Type != MsgClosed || m.Reason != "auth-required: who are you" {
			t.Fatalf("CLOSED delivered as %+v", m)
		}
	default:
		t.Fatal("CLOSED with a fourth field was dropped")
	}
}

// TestMessageTooBigAndClosedFilters: a relay closing the connection for a
// message over its limit (khatru: status 1009) is told apart from other
// ends, the largest message sent is counted, and OnClosedTagValues hears a
// refused subscription's filters (the most values one of their tags carried).
func TestMessageTooBigAndClosedFilters(t *testing.T) {
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.MaxMessageSize = 4000
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			return len(f.Tags["e"]) > 1, "error: too many tag values"
		})
	})
	opts := DefaultOptions()
	refused := make(chan int, 1)
	opts.OnClosedTagValues = func(reason string, most int) { refused <- most }
	c := dial(t, url, opts)
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "tags", nostr.Filters{{Tags: nostr.TagMap{"e": {"a", "b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for range sub.Messages() {
	}
	select {
	case most := <-refused:
		if most != 2 {
			t.Fatalf("OnClosedTagValues got %d values, want the 2 of the refused filter's e tag", most)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnClosedTagValues not called")
	}
	if MessageTooBig(c.Err()) {
		t.Fatal("a live connection counted as closed for a message too big")
	}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = strings.Repeat("0", 63) + "1"
	}
	_, _ = c.Subscribe(ctx, "big", nostr.Filters{{IDs: ids}})
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the relay kept a connection sending a message over its limit")
	}
	if !MessageTooBig(c.Err()) {
		t.Fatalf("Err %v: not recognised as a message too big", c.Err())
	}
	if got := c.Stats().MaxFrameOut; got < 6000 {
		t.Fatalf("MaxFrameOut %d, want the big REQ's size", got)
	}
}
