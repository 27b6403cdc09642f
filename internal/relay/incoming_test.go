package relay

import (
	"context"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// An event is handed on as an event.Incoming whose id the read loop
// decoded (it survives the event's hex id being changed afterwards), with
// the relay's URL and the subscription it came on.
func TestSubMsgCarriesDecodedIncoming(t *testing.T) {
	url := harness.StartKhatru(t, nil, nil)
	c := dial(t, url, DefaultOptions())
	ctx := context.Background()
	ev := signed(t, nostr.GeneratePrivateKey(), 1621, "issue", nil)
	if r := c.PublishWait(ctx, ev); r.Err != nil || !r.OK {
		t.Fatalf("publish: %+v", r)
	}
	want, _ := event.DecodeID(ev.ID)
	sub, err := c.Subscribe(ctx, "s1", nostr.Filters{{IDs: []string{ev.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	select {
	case m := <-sub.Messages():
		if m.Type != MsgEvent {
			t.Fatalf("got %+v, want the event", m)
		}
		m.Event.ID = "changed"
		in := sub.Incoming(m)
		if got, ok := in.ID(); !ok || got != want {
			t.Fatalf("ID() = %x, %v; want %x decoded by the read loop", got, ok, want)
		}
		if in.Event != m.Event || in.Relay != c.URL() || in.Sub != "s1" || in.Size == 0 || in.Raw == nil {
			t.Fatalf("relay %q sub %q size %d raw %d bytes", in.Relay, in.Sub, in.Size, len(in.Raw))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event did not arrive")
	}
}
