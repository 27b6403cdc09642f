package relay

import (
	"context"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// An event is delivered as an event.Incoming whose id the read loop
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
		if got, ok := m.ID(); !ok || got != want {
			t.Fatalf("ID() = %x, %v; want %x decoded by the read loop", got, ok, want)
		}
		if m.Relay != c.URL() || m.Sub != "s1" || m.Size == 0 || m.Raw == nil {
			t.Fatalf("relay %q sub %q size %d raw %d bytes", m.Relay, m.Sub, m.Size, len(m.Raw))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event did not arrive")
	}
}
