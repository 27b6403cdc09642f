package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// SubscribeSkipping's skip sees the live events only: one stored event
// (before the EOSE) is delivered although skip would take it, and after
// the EOSE the events skip takes are neither decoded nor delivered, the
// others are.
func TestSubscribeSkippingSkipsLiveEventsOnly(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	stored := signed(t, sk, 1, "stored, skip me", nil)
	skipped := signed(t, sk, 1, "live, skip me", nil)
	kept := signed(t, sk, 1, "live, keep me", nil)
	frame := func(ev *nostr.Event) string {
		raw, _ := ev.MarshalJSON()
		return `["EVENT","s",` + string(raw) + `]`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := context.Background()
		if _, _, err := conn.Read(ctx); err != nil { // the REQ
			return
		}
		for _, msg := range []string{frame(stored), `["EOSE","s"]`, frame(skipped), frame(kept), `["EOSE","t"]`} {
			if err := conn.Write(ctx, ws.MessageText, []byte(msg)); err != nil {
				return
			}
		}
		_, _, _ = conn.Read(ctx)
	}))
	defer srv.Close()
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), DefaultOptions())
	var asked []string // the reader goroutine's; read after the last event arrived
	skip := func(obj []byte) bool {
		id, _, _, ok := EventKeys(obj)
		if !ok {
			t.Errorf("skip got %q", obj)
			return false
		}
		asked = append(asked, string(id))
		return strings.Contains(string(obj), "skip me")
	}
	sub, err := c.SubscribeSkipping(context.Background(), "s", nostr.Filters{{Kinds: []int{1}}}, skip)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case m := <-sub.Messages():
			if m.Type == MsgEvent {
				got = append(got, m.Event.ID)
			}
		case <-timeout:
			t.Fatalf("got %v, want two events", got)
		}
	}
	if want := []string{stored.ID, kept.ID}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v (the stored one and the live one skip left)", got, want)
	}
	if want := []string{skipped.ID, kept.ID}; !slices.Equal(asked, want) {
		t.Fatalf("skip saw %v, want the live events %v", asked, want)
	}
}

func TestEventKeys(t *testing.T) {
	id := strings.Repeat("a", 64)
	sig := strings.Repeat("b", 128)
	for _, c := range []struct {
		name, obj string
		ok        bool
		kind      int
	}{
		{"compact", `{"id":"` + id + `","pubkey":"p","created_at":1,"kind":1621,"tags":[],"content":"x","sig":"` + sig + `"}`, true, 1621},
		{"spaced, another order", `{ "sig" : "` + sig + `", "kind" :7, "content":"a \"id\": \"no\"", "id":  "` + id + `" }`, true, 7},
		{"names in tags and content", `{"id":"` + id + `","kind":1,"tags":[["id","x"],["sig","y"]],"content":"\"kind\":5","sig":"` + sig + `"}`, true, 1},
		{"id twice", `{"id":"` + id + `","id":"` + id + `","kind":1,"sig":"` + sig + `"}`, false, 0},
		{"kind twice", `{"id":"` + id + `","kind":1,"kind":2,"sig":"` + sig + `"}`, false, 0},
		{"no sig", `{"id":"` + id + `","kind":1}`, false, 0},
		{"escaped id", `{"id":"\u0061` + id[1:] + `","kind":1,"sig":"` + sig + `"}`, false, 0},
		{"kind not an integer", `{"id":"` + id + `","kind":1.5,"sig":"` + sig + `"}`, false, 0},
		{"kind a string", `{"id":"` + id + `","kind":"1","sig":"` + sig + `"}`, false, 0},
		{"negative kind", `{"id":"` + id + `","kind":-1,"sig":"` + sig + `"}`, false, 0},
	} {
		gotID, gotSig, kind, ok := EventKeys([]byte(c.obj))
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.name, ok, c.ok)
			continue
		}
		if ok && (string(gotID) != id || string(gotSig) != sig || kind != c.kind) {
			t.Errorf("%s: got %s, %s, %d", c.name, gotID, gotSig, kind)
		}
	}
}
