package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/nbd-wtf/go-nostr"
)

// Send delivers every answer on the caller's one channel, tagged: the OK
// of a raw EVENT and of an encoded one, none for a withdrawn wait, and
// the connection's end for a wait still open.
func TestSendSharedOKChannel(t *testing.T) {
	url := harness.StartKhatru(t, harness.NewStore(), nil)
	c := dial(t, url, DefaultOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sk := nostr.GeneratePrivateKey()
	to := make(chan OKReply, 4)
	a, b := signed(t, sk, 1, "a", nil), signed(t, sk, 1, "b", nil)
	raw, err := a.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, a, raw, 7, to); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, b, nil, 8, to); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]OKReply{}
	for range 2 {
		select {
		case r := <-to:
			got[r.Tag] = r
		case <-ctx.Done():
			t.Fatal("no OK")
		}
	}
	if r := got[7]; r.ID != a.ID || !r.OK || r.Err != nil {
		t.Errorf("raw EVENT: %+v", r)
	}
	if r := got[8]; r.ID != b.ID || !r.OK || r.Err != nil {
		t.Errorf("encoded EVENT: %+v", r)
	}

	// A wait withdrawn before the OK: nothing arrives for it.
	c.mu.Lock()
	c.oks.add(strings.Repeat("c", 64), okWaiter{to: to, tag: 9})
	c.oks.add(strings.Repeat("c", 64), okWaiter{to: to, tag: 10})
	c.mu.Unlock()
	if !c.CancelOK(strings.Repeat("c", 64), 9, to) || c.CancelOK(strings.Repeat("c", 64), 9, to) {
		t.Fatal("CancelOK must withdraw a wait once")
	}
	c.Close()
	select {
	case r := <-to:
		if r.Tag != 10 || !errors.Is(r.Err, ErrClosed) {
			t.Fatalf("after close: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection's end was not delivered")
	}
	select {
	case r := <-to:
		t.Fatalf("withdrawn wait answered: %+v", r)
	default:
	}
	if err := c.Send(ctx, a, raw, 11, to); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after close: %v", err)
	}
}

// With CoalesceWrites, what is sent between Cork and Uncork stays in one
// buffer (the relay sees nothing) and goes out at Uncork.
func TestCorkHoldsWritesUntilUncork(t *testing.T) {
	url := harness.StartKhatru(t, harness.NewStore(), nil)
	opts := DefaultOptions()
	opts.CoalesceWrites = true
	c := dial(t, url, opts)
	if c.cork == nil {
		t.Fatal("no corked socket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sk := nostr.GeneratePrivateKey()
	to := make(chan OKReply, 3)
	c.Cork()
	for i := range 3 {
		ev := signed(t, sk, 1, strings.Repeat("x", i+1), nil)
		raw, _ := ev.MarshalJSON()
		if err := c.Send(ctx, ev, raw, uint64(i), to); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-to:
		t.Fatalf("answer before Uncork: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	c.cork.mu.Lock()
	held := len(c.cork.buf)
	c.cork.mu.Unlock()
	if held == 0 {
		t.Fatal("nothing held back")
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case r := <-to:
			if !r.OK {
				t.Fatalf("%+v", r)
			}
		case <-ctx.Done():
			t.Fatal("no OK after Uncork")
		}
	}
}
