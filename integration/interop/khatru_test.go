package interop

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

var _ neg.Conn = (*relay.Conn)(nil)

// startKhatru runs a real khatru relay on 127.0.0.1 serving events from an
// uncapped in-memory store (eventstore's slicestore treats since as
// exclusive, so a plain scan with nostr.Filter.Matches stands in). With
// maxSync > 0 it refuses filters matching more events, as strfry's
// maxSyncEvents does: khatru answers NEG-ERROR "blocked: too many query
// results".
func startKhatru(t *testing.T, negentropyOn bool, events []*nostr.Event, maxSync int) string {
	t.Helper()
	query := func(ctx context.Context, f nostr.Filter) (chan *nostr.Event, error) {
		ch := make(chan *nostr.Event)
		go func() {
			defer close(ch)
			for _, ev := range events {
				if f.Matches(ev) {
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		return ch, nil
	}
	rl := khatru.NewRelay()
	rl.Negentropy = negentropyOn
	rl.QueryEvents = append(rl.QueryEvents, query)
	if maxSync > 0 {
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			n := 0
			for _, ev := range events {
				if f.Matches(ev) {
					n++
				}
			}
			return n > maxSync, "too many query results"
		})
	}
	srv := httptest.NewServer(rl)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// signedEvents makes n signed events spread over n seconds.
func signedEvents(t *testing.T, n int) []*nostr.Event {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	out := make([]*nostr.Event, n)
	for i := range out {
		ev := &nostr.Event{Kind: 1621, CreatedAt: nostr.Timestamp(1_700_000_000 + i), Content: "issue",
			Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("ab", 32) + ":repo"}}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		out[i] = ev
	}
	return out
}

func dial(t *testing.T, url string) *relay.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := relay.Dial(ctx, url, relay.DefaultOptions())
	if err != nil {
		t.Fatalf("Dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKhatruReconcile reconciles against a real khatru relay over our
// relay connection, with the local set from a LocalIndex.
func TestKhatruReconcile(t *testing.T) {
	events := signedEvents(t, 600)
	remote, localOnly := events[:550], events[550:]
	url := startKhatru(t, true, remote, 0)

	idx, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wantNeed []string
	for i, ev := range events {
		if i < 550 && i%10 == 0 {
			wantNeed = append(wantNeed, ev.ID) // the relay has it, we do not
			continue
		}
		if err := idx.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	var wantHave []string
	for _, ev := range localOnly {
		wantHave = append(wantHave, ev.ID)
	}
	slices.Sort(wantNeed)
	slices.Sort(wantHave)

	conn := dial(t, url)
	filter := nostr.Filter{Kinds: []int{1621}}
	opt := neg.DefaultOptions()
	opt.FrameLimit = 4096 // several rounds
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// ReconcileSplit retries a session khatru lost (it can answer NEG-OPEN
	// before storing the session).
	res, err := neg.ReconcileSplit(ctx, conn, "k", filter, idx.LocalFunc(), opt)
	if err != nil {
		t.Fatalf("ReconcileSplit: %v", err)
	}
	if !slices.Equal(res.Need, wantNeed) || !slices.Equal(res.Have, wantHave) {
		t.Fatalf("need/have %d/%d, want %d/%d", len(res.Need), len(res.Have), len(wantNeed), len(wantHave))
	}
	t.Logf("%d rounds, %d bytes sent, %d received", res.Rounds, res.BytesSent, res.BytesReceived)
}

func TestKhatruWithoutNegentropyIsUnsupported(t *testing.T) {
	url := startKhatru(t, false, signedEvents(t, 10), 0)
	conn := dial(t, url)
	opt := neg.DefaultOptions()
	opt.InitialTimeout = 5 * time.Second
	_, err := neg.Reconcile(context.Background(), conn, "u", nostr.Filter{}, neg.NewStorage(nil), opt)
	if !errors.Is(err, neg.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

// TestKhatruBlockedSplitsWindows: a khatru relay refusing large filters
// with NEG-ERROR "blocked: too many query results" is reconciled window by
// window.
func TestKhatruBlockedSplitsWindows(t *testing.T) {
	events := signedEvents(t, 400) // created_at 1,700,000,000 + 0..399
	url := startKhatru(t, true, events, 60)
	idx, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, ev := range events {
		if i%3 == 0 {
			want = append(want, ev.ID)
			continue
		}
		if err := idx.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	conn := dial(t, url)
	opt := neg.DefaultOptions()
	opt.MinWindow = time.Second
	opt.Clock = clock.Shifted(time.Unix(1_700_000_000+2000, 0))
	since := nostr.Timestamp(1_700_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := neg.ReconcileSplit(ctx, conn, "b", nostr.Filter{Kinds: []int{1621}, Since: &since}, idx.LocalFunc(), opt)
	if err != nil {
		t.Fatalf("ReconcileSplit: %v", err)
	}
	if !slices.Equal(res.Need, want) || len(res.Have) != 0 {
		t.Fatalf("need/have %d/%d, want %d/0", len(res.Need), len(res.Have), len(want))
	}
	if res.Sessions < 8 {
		t.Errorf("%d sessions: the relay's refusal did not split the filter", res.Sessions)
	}
	t.Logf("%d sessions, %d rounds", res.Sessions, res.Rounds)
}

// TestKhatruConcurrentSessions runs several sessions with distinct
// subscription ids on one connection at once.
func TestKhatruConcurrentSessions(t *testing.T) {
	events := signedEvents(t, 300)
	url := startKhatru(t, true, events, 0)
	conn := dial(t, url)
	idx, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if i%4 != 0 {
			if err := idx.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt := neg.DefaultOptions()
	opt.FrameLimit = 4096
	const sessions = 4
	errs := make(chan error, sessions)
	for s := range sessions {
		go func() {
			// Session s covers a quarter of the time range.
			since := nostr.Timestamp(1_700_000_000 + 75*s)
			until := since + 74
			f := nostr.Filter{Kinds: []int{1621}, Since: &since, Until: &until}
			res, err := neg.ReconcileSplit(ctx, conn, fmt.Sprintf("c%d-", s), f, idx.LocalFunc(), opt)
			if err == nil {
				var want []string
				for i, ev := range events {
					if i%4 == 0 && f.Matches(ev) {
						want = append(want, ev.ID)
					}
				}
				slices.Sort(want)
				if !slices.Equal(res.Need, want) || len(res.Have) != 0 {
					err = fmt.Errorf("session %d: need/have %d/%d, want %d/0", s, len(res.Need), len(res.Have), len(want))
				}
			}
			errs <- err
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
