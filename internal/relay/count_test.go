package relay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestCount: a relay that counts (khatru with a CountEvents) answers
// how many stored events match; the COUNT's id is free again afterwards.
func TestCount(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	c := dial(t, url, DefaultOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sk := nostr.GeneratePrivateKey()
	for i, kind := range []int{1621, 1621, 1111} {
		if r := c.PublishWait(ctx, signed(t, sk, kind, string(rune('a'+i)), nil)); !r.OK {
			t.Fatalf("publish: %+v", r)
		}
	}
	for _, tc := range []struct {
		f    nostr.Filter
		want int
	}{{nostr.Filter{Kinds: []int{1621}}, 2}, {nostr.Filter{Kinds: []int{1111, 1621}}, 3}, {nostr.Filter{Kinds: []int{1}}, 0}} {
		res, err := c.Count(ctx, "c", tc.f)
		if err != nil || res.Count != tc.want || res.Approximate {
			t.Fatalf("count of %v: %+v, %v; want %d", tc.f, res, err, tc.want)
		}
	}
	if c.OpenSubscriptions() != 0 {
		t.Fatalf("%d subscriptions open after the COUNTs", c.OpenSubscriptions())
	}
}

// countServer answers every COUNT with answer(id) (nothing when it
// returns "").
func countServer(t *testing.T, answer func(id string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			parts := strings.SplitN(string(data), `"`, 5) // [ "COUNT" , "id" ...
			if len(parts) < 5 || parts[1] != "COUNT" {
				continue
			}
			if msg := answer(parts[3]); msg != "" {
				_ = conn.Write(context.Background(), ws.MessageText, []byte(msg))
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// TestCountAnswers: an approximate count says so, a CLOSED is
// ErrCountClosed, a malformed count or one for another id is no answer
// (the caller's context ends the wait), and a REQ's subscription never
// takes a COUNT frame.
func TestCountAnswers(t *testing.T) {
	url := countServer(t, func(id string) string {
		switch id {
		case "approx":
			return `["COUNT","approx",{"count":93412452,"approximate":true}]`
		case "refused":
			return `["CLOSED","refused","unsupported: no COUNT here"]`
		case "bad":
			return `["COUNT","bad",{"count":-2}]`
		case "other":
			return `["COUNT","req",{"count":5}]`
		}
		return ""
	})
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	if res, err := c.Count(ctx, "approx", nostr.Filter{}); err != nil || res.Count != 93412452 || !res.Approximate {
		t.Fatalf("approximate: %+v, %v", res, err)
	}
	if _, err := c.Count(ctx, "refused", nostr.Filter{}); !errors.Is(err, ErrCountClosed) || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("refused: %v, want ErrCountClosed with the reason", err)
	}
	sub, err := c.Subscribe(ctx, "req", nostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"bad", "other"} {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Count(short, id, nostr.Filter{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want no answer", id, err)
		}
	}
	select {
	case m := <-sub.Messages():
		t.Fatalf("a REQ's subscription got %+v from a COUNT frame", m)
	default:
	}
}
