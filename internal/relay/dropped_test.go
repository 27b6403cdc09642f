package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// An EVENT for a subscription that is not open, or whose event does not
// decode, reaches no subscription: OnDropped hears each, with its reason,
// and the subscription still gets the events that are its own.
func TestOnDroppedHearsUndeliverableEvents(t *testing.T) {
	good := signed(t, nostr.GeneratePrivateKey(), 1, "good", nil)
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
		raw, _ := good.MarshalJSON()
		for _, msg := range []string{
			`["EVENT","gone",` + string(raw) + `]`,
			`["EVENT","s",{"kind":"one","id":7}]`,
			`["EVENT","s",` + string(raw) + `]`,
			`["EOSE","s"]`,
		} {
			if err := conn.Write(ctx, ws.MessageText, []byte(msg)); err != nil {
				return
			}
		}
		_, _, _ = conn.Read(ctx)
	}))
	defer srv.Close()
	var mu sync.Mutex
	var reasons []string
	opts := DefaultOptions()
	opts.OnDropped = func(reason string) {
		mu.Lock()
		defer mu.Unlock()
		reasons = append(reasons, reason)
	}
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), opts)
	sub, err := c.Subscribe(context.Background(), "s", nostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case m := <-sub.Messages():
			switch m.Type {
			case MsgEvent:
				got = append(got, m.Event.ID)
			case MsgEOSE:
				done = true
			}
		case <-timeout:
			t.Fatal("no EOSE")
		}
	}
	if len(got) != 1 || got[0] != good.ID {
		t.Fatalf("subscription got %v, want only %s", got, good.ID)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{DropClosedSubscription, DropMalformed}; !slices.Equal(reasons, want) {
		t.Fatalf("OnDropped heard %v, want %v", reasons, want)
	}
}
