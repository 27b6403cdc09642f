package neg

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// inWindow returns the items matching the filter's since/until.
func inWindow(items []Item, f nostr.Filter) []Item {
	var out []Item
	for _, it := range items {
		if (f.Since == nil || it.CreatedAt >= *f.Since) && (f.Until == nil || it.CreatedAt <= *f.Until) {
			out = append(out, it)
		}
	}
	return out
}

// blockingRelay answers "blocked:" when a filter matches more than max
// server items, like strfry's maxSyncEvents.
func blockingRelay(server []Item, max int) *fakeConn {
	f := newFakeConn(func(fl nostr.Filter) negentropy.Storage { return ourStorage(inWindow(server, fl)) }, 0)
	f.handle = func(s *fakeSession, round int, msg string) step {
		if round == 0 && len(inWindow(server, s.filter)) > max {
			return step{replies: []relay.NegReply{{Err: "blocked: too many query results"}}}
		}
		return f.serve(s, msg)
	}
	return f
}

func TestReconcileSplit(t *testing.T) {
	d := makeDataset(61, 4000, 0.1) // created_at spread over 1,001 seconds
	conn := blockingRelay(d.server, 600)
	opt := testOptions()
	opt.MinWindow = time.Second
	opt.Clock = clock.Shifted(time.Unix(1_700_000_000+2000, 0))
	local := func(f nostr.Filter) (*Storage, error) { return ourStorage(inWindow(d.client, f)), nil }
	res, err := ReconcileSplit(context.Background(), conn, "w", nostr.Filter{Kinds: []int{1}}, local, opt)
	if err != nil {
		t.Fatalf("ReconcileSplit: %v", err)
	}
	if !slices.Equal(res.Need, d.need) || !slices.Equal(res.Have, d.have) {
		t.Fatalf("need/have = %d/%d, want %d/%d", len(res.Need), len(res.Have), len(d.need), len(d.have))
	}
	if res.Sessions < 8 {
		t.Errorf("%d sessions: the filter was not split", res.Sessions)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %s", res.Duration)
	}
	// Windows are contiguous and disjoint; the newest keeps until unset.
	conn.mu.Lock()
	defer conn.mu.Unlock()
	var accepted []nostr.Filter
	for _, f := range conn.filters {
		if len(inWindow(d.server, f)) <= 600 {
			accepted = append(accepted, f)
		}
		if len(f.Kinds) != 1 || f.Kinds[0] != 1 {
			t.Fatalf("window lost the rest of the filter: %v", f)
		}
	}
	slices.SortFunc(accepted, func(a, b nostr.Filter) int { return int(*a.Since - *b.Since) })
	if *accepted[0].Since != 0 {
		t.Errorf("first window starts at %d, want 0", *accepted[0].Since)
	}
	for i := 1; i < len(accepted); i++ {
		if *accepted[i].Since != *accepted[i-1].Until+1 {
			t.Errorf("gap or overlap between windows %s and %s", windowString(accepted[i-1]), windowString(accepted[i]))
		}
	}
	if last := accepted[len(accepted)-1]; last.Until != nil {
		t.Errorf("newest window %s has an until", windowString(last))
	}
}

func TestReconcileSplitMinimumWindow(t *testing.T) {
	d := makeDataset(62, 1000, 0.1)
	conn := blockingRelay(d.server, 0) // blocks everything non-empty
	opt := testOptions()
	opt.MinWindow = time.Hour
	since, until := nostr.Timestamp(1_700_000_000), nostr.Timestamp(1_700_000_000+10*3600)
	local := func(f nostr.Filter) (*Storage, error) { return ourStorage(inWindow(d.client, f)), nil }
	_, err := ReconcileSplit(context.Background(), conn, "m", nostr.Filter{Since: &since, Until: &until}, local, opt)
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("err = %v, want ErrBlocked", err)
	}
	// 10 hours halve to under an hour in 4 steps: 5 sessions on the first branch.
	if n := len(conn.closedIDs()); n > 6 {
		t.Errorf("%d sessions before giving up, want a handful", n)
	}
}

func TestReconcileSplitLocalError(t *testing.T) {
	errNo := errors.New("cannot answer")
	_, err := ReconcileSplit(context.Background(), newFakeConn(nil, 0), "e", nostr.Filter{},
		func(nostr.Filter) (*Storage, error) { return nil, errNo }, testOptions())
	if !errors.Is(err, errNo) {
		t.Fatalf("err = %v, want the local set error", err)
	}
}

func TestReconcileSplitRetriesLostSession(t *testing.T) {
	d := makeDataset(63, 2000, 0.1)
	for _, tc := range []struct {
		name    string
		lost    int // sessions that lose their state
		wantErr bool
	}{
		{"one lost session is retried", 1, false},
		{"retries are bounded", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := newFakeConn(fixedSet(d.server), 0)
			lost := 0
			conn.handle = func(s *fakeSession, round int, msg string) step {
				if (round == 1 || round == 2) && lost < tc.lost { // the session is gone: the resend fails too
					if round == 2 {
						lost++
					}
					return step{replies: []relay.NegReply{{Err: "CLOSED"}}}
				}
				return conn.serve(s, msg)
			}
			opt := testOptions()
			opt.FrameLimit = 4096
			local := func(nostr.Filter) (*Storage, error) { return ourStorage(d.client), nil }
			res, err := ReconcileSplit(context.Background(), conn, "r", nostr.Filter{}, local, opt)
			if tc.wantErr {
				if !errors.Is(err, ErrSessionClosed) || !errors.Is(err, ErrRelay) {
					t.Fatalf("err = %v, want ErrSessionClosed and ErrRelay", err)
				}
				if got := len(conn.closedIDs()); got != 1+opt.SessionRetries {
					t.Errorf("%d sessions, want %d", got, 1+opt.SessionRetries)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReconcileSplit: %v", err)
			}
			if !slices.Equal(res.Need, d.need) || !slices.Equal(res.Have, d.have) {
				t.Fatalf("need/have = %d/%d, want %d/%d", len(res.Need), len(res.Have), len(d.need), len(d.have))
			}
			if got := conn.closedIDs(); !slices.Equal(got, []string{"r0", "r1"}) {
				t.Errorf("sessions %v, want [r0 r1]", got)
			}
		})
	}
}
