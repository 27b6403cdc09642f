package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/nbd-wtf/go-nostr"
)

// gatedRelay starts a khatru relay that counts the filters it was asked
// for (REQ and NEG-OPEN both pass RejectFilter).
func gatedRelay(t *testing.T) (url string, filters *atomic.Int64) {
	t.Helper()
	filters = new(atomic.Int64)
	url = harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.Negentropy = true
		rl.RejectFilter = append(rl.RejectFilter, func(context.Context, nostr.Filter) (bool, string) {
			filters.Add(1)
			return false, ""
		})
	})
	return url, filters
}

// TestBeforeRequestHoldsREQAndNegOpen: a blocking BeforeRequest keeps REQ
// and NEG-OPEN from being sent until it returns.
func TestBeforeRequestHoldsREQAndNegOpen(t *testing.T) {
	url, filters := gatedRelay(t)
	release := make(chan struct{})
	var calls atomic.Int64
	opts := DefaultOptions()
	opts.BeforeRequest = func(ctx context.Context) error {
		calls.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := dial(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type result struct {
		sub *Subscription
		err error
	}
	subDone := make(chan result, 1)
	go func() {
		sub, err := c.Subscribe(ctx, "held", nostr.Filters{{Kinds: []int{1}}})
		subDone <- result{sub, err}
	}()
	negDone := make(chan error, 1)
	go func() {
		_, err := c.NegOpen(ctx, "neg", nostr.Filter{Kinds: []int{1}}, emptyNegMessage)
		negDone <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("BeforeRequest called %d times, want 2", got)
	}
	select {
	case r := <-subDone:
		t.Fatalf("Subscribe returned while held: %+v", r)
	case err := <-negDone:
		t.Fatalf("NegOpen returned while held: %v", err)
	default:
	}
	if n := c.OpenSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions registered while held", n)
	}
	if n := filters.Load(); n != 0 {
		t.Fatalf("relay saw %d filters while the request was held", n)
	}

	close(release)
	r := <-subDone
	if r.err != nil {
		t.Fatalf("Subscribe after release: %v", r.err)
	}
	if err := <-negDone; err != nil {
		t.Fatalf("NegOpen after release: %v", err)
	}
	select {
	case m := <-r.sub.Messages():
		if m.Type != MsgEOSE {
			t.Fatalf("first message %+v, want EOSE", m)
		}
	case <-ctx.Done():
		t.Fatal("no EOSE after release")
	}
	// NegOpen returns once NEG-OPEN is sent; the relay counts its filter
	// when it reads it, which may come after the REQ's EOSE.
	testkit.WaitFor(t, 5*time.Second, "the relay to see both filters", func() bool { return filters.Load() >= 2 })
	if n := filters.Load(); n != 2 {
		t.Fatalf("relay saw %d filters after release, want 2", n)
	}
}

// TestBeforeRequestError: an error from BeforeRequest aborts the call, and
// a connection that ends while a request is held returns ErrClosed.
func TestBeforeRequestError(t *testing.T) {
	url, filters := gatedRelay(t)
	errCooling := errors.New("cooling down")
	opts := DefaultOptions()
	opts.BeforeRequest = func(ctx context.Context) error { return errCooling }
	c := dial(t, url, opts)
	ctx := context.Background()
	if _, err := c.Subscribe(ctx, "s", nostr.Filters{{Kinds: []int{1}}}); !errors.Is(err, errCooling) {
		t.Fatalf("Subscribe: got %v, want %v", err, errCooling)
	}
	if _, err := c.NegOpen(ctx, "n", nostr.Filter{Kinds: []int{1}}, emptyNegMessage); !errors.Is(err, errCooling) {
		t.Fatalf("NegOpen: got %v, want %v", err, errCooling)
	}
	if n := c.OpenSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions registered after a refused request", n)
	}

	held := DefaultOptions()
	held.BeforeRequest = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	c2 := dial(t, url, held)
	done := make(chan error, 1)
	go func() {
		_, err := c2.Subscribe(ctx, "s", nostr.Filters{{Kinds: []int{1}}})
		done <- err
	}()
	c2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("held Subscribe on a closed connection: got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held Subscribe did not return when the connection closed")
	}
	if n := filters.Load(); n != 0 {
		t.Fatalf("relay saw %d filters", n)
	}
}

// emptyNegMessage is a valid first negentropy message for an empty set:
// protocol version 0x61 and one IdList range of zero items up to infinity.
const emptyNegMessage = "6100000200"

// TestOnClosedBeforeSubscription: OnClosed hears a CLOSED, with its
// subscription id and reason, before the subscription's reader does.
func TestOnClosedBeforeSubscription(t *testing.T) {
	const reason = "rate-limited: slow down"
	url := harness.StartKhatru(t, nil, func(rl *khatru.Relay) {
		rl.RejectFilter = append(rl.RejectFilter, func(context.Context, nostr.Filter) (bool, string) {
			return true, reason
		})
	})
	var heard atomic.Value
	opts := DefaultOptions()
	opts.OnClosed = func(subID, r string) { heard.Store(subID + " " + r) }
	c := dial(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, "refused", nostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub.Messages():
		if m.Type != MsgClosed || m.Reason != reason {
			t.Fatalf("got %+v, want CLOSED %q", m, reason)
		}
	case <-ctx.Done():
		t.Fatal("no CLOSED")
	}
	if got, want := heard.Load(), "refused "+reason; got != want {
		t.Fatalf("OnClosed heard %v before the subscription saw CLOSED, want %q", got, want)
	}
}
