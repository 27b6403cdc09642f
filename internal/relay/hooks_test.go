package relay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestReasonHooks: OnOK hears every OK and OnNegErr every NEG-ERR, from
// the reader, before the publisher or the session does.
func TestReasonHooks(t *testing.T) {
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.Negentropy = true
		rl.RejectEvent = append(rl.RejectEvent, func(context.Context, *nostr.Event) (bool, string) {
			return true, "rate-limited: slow down"
		})
	})
	var mu sync.Mutex
	var oks, negErrs []string
	opts := DefaultOptions()
	opts.OnOK = func(id string, ok bool, reason string) {
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			oks = append(oks, reason)
		}
	}
	opts.OnNegErr = func(sub, reason string) {
		mu.Lock()
		defer mu.Unlock()
		negErrs = append(negErrs, sub+" "+reason)
	}
	c := dial(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := c.PublishWait(ctx, signed(t, nostr.GeneratePrivateKey(), 1, "x", nil))
	mu.Lock()
	heard := append([]string(nil), oks...)
	mu.Unlock()
	if r.OK || len(heard) != 1 || heard[0] != r.Reason {
		t.Fatalf("OK %+v, OnOK heard %q", r, heard)
	}
	ch, err := c.NegOpen(ctx, "n1", nostr.Filter{Kinds: []int{1}}, "zz")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-ch:
		mu.Lock()
		heard = append([]string(nil), negErrs...)
		mu.Unlock()
		if rep.Err == "" || len(heard) != 1 || heard[0] != "n1 "+rep.Err {
			t.Fatalf("NEG reply %+v, OnNegErr heard %q", rep, heard)
		}
	case <-ctx.Done():
		t.Fatal("no NEG-ERR for a garbage NEG-OPEN")
	}
}
