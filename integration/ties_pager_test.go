package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// tiePager pages filter with pageSize, reading tied seconds by NIP-77 when
// withNeg; it returns the events received, how often each arrived at most,
// and the pager's truncation record.
func tiePager(t *testing.T, r *harness.Relay, filter nostr.Filter, pageSize int, withNeg bool) (map[string]int, *historic.Truncation, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trunc := historic.NewTruncation(newTruncCounter(), zap.NewNop())
	p := &historic.Pager{PageSize: pageSize, EOSETimeout: 30 * time.Second, Truncation: trunc}
	if withNeg {
		p.Ties = &historic.TieNeg{Options: neg.DefaultOptions()}
	}
	got := map[string]int{}
	err := p.Sync(ctx, dialTB(t, ctx, r.URL()), []nostr.Filter{filter}, 1, func(_ context.Context, in ingest.Incoming) error {
		got[in.Event.ID]++
		return nil
	})
	return got, trunc, err
}

func newTruncCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t"}, []string{"relay", "kind"})
}

// missing counts the events of want not in got.
func missing(got map[string]int, want []*nostr.Event) int {
	n := 0
	for _, ev := range want {
		if got[ev.ID] == 0 {
			n++
		}
	}
	return n
}

// tiedAnnouncements are n announcements by authors keys (round robin), all
// at one second, and n older ones a minute apart.
func tiedAnnouncements(keys []*signed.Key, n int, at time.Time) (tied, older []*nostr.Event) {
	for i := range n {
		k := keys[i%len(keys)]
		tied = append(tied, k.Announcement(fmt.Sprintf("tied-%d", i), signed.At(at)))
		older = append(older, k.Announcement(fmt.Sprintf("older-%d", i), signed.At(at.Add(-time.Duration(i+1)*time.Minute))))
	}
	return tied, older
}

// TestTiedSecondReadByNegentropy: a relay returning 50 events per REQ holds
// 200 announcements at one second and speaks NIP-77: the pager reads that
// second by NIP-77 (since = until = the second) and fetches the rest by id;
// nothing is reported cut, every event arrives, and the requests are few
// (no loop: one REQ per page, one session, the fetches by id).
func TestTiedSecondReadByNegentropy(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "tied-neg", ReqCap: 50, Negentropy: true})
	keys := []*signed.Key{signed.NewKey(), signed.NewKey(), signed.NewKey()}
	tied, older := tiedAnnouncements(keys, 200, time.Now().Add(-time.Hour))
	r.Inject(tied...)
	r.Inject(older...)
	got, trunc, err := tiePager(t, r, nostr.Filter{Kinds: []int{30617}}, 50, true)
	if err != nil {
		t.Fatalf("paging: %v", err)
	}
	if m := missing(got, append(tied, older...)); m > 0 {
		t.Fatalf("%d of %d events missing", m, len(tied)+len(older))
	}
	if n := trunc.TiesCut(r.URL()); n != 0 {
		t.Fatalf("%d seconds reported cut, want 0", n)
	}
	st := r.Stats()
	// 1 page at the tie, 1 repeating it, 200/50+1 pages below, 3 fetches
	// by id: about 10; a loop would send far more.
	if st.NegOpens != 1 || st.Reqs > 15 {
		t.Fatalf("%d NEG-OPENs and %d REQs, want 1 and at most 15", st.NegOpens, st.Reqs)
	}
}

// TestTiedSecondSplitByTag: a REQ-only relay returning 50 events per REQ
// holds 150 events tagging ten repositories at one second: the pager splits
// the tied second's filter by its #a values until no part is cut, and
// reports nothing cut.
func TestTiedSecondSplitByTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts harness.RelayOptions
	}{
		{"req-only", harness.RelayOptions{Name: "tied-req", ReqCap: 50}},
		// NIP-77 sets capped like REQs (khatru on its slicestore): the
		// session's set of 50 may be cut, so the filter is split.
		{"neg-capped", harness.RelayOptions{Name: "tied-negcap", ReqCap: 50, Negentropy: true, NegCap: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := harness.Start(t, tc.opts)
			alice := signed.NewKey()
			at := time.Now().Add(-time.Hour)
			var repos []string
			var want []*nostr.Event
			for i := range 10 {
				repo := alice.RepoAddress(fmt.Sprintf("r%d", i))
				repos = append(repos, repo)
				for j := range 15 {
					want = append(want, alice.Issue(repo, fmt.Sprintf("tied %d", j), signed.At(at)))
				}
				want = append(want, alice.Issue(repo, "older", signed.At(at.Add(-time.Duration(i+1)*time.Minute))))
			}
			r.Inject(want...)
			got, trunc, err := tiePager(t, r, nostr.Filter{Tags: nostr.TagMap{"a": repos}}, 50, true)
			if err != nil {
				t.Fatalf("paging: %v", err)
			}
			if m := missing(got, want); m > 0 {
				t.Fatalf("%d of %d events missing", m, len(want))
			}
			if n := trunc.TiesCut(r.URL()); n != 0 {
				t.Fatalf("%d seconds reported cut, want 0", n)
			}
			if st := r.Stats(); st.Reqs > 20 {
				t.Fatalf("%d REQs, want at most 20", st.Reqs)
			}
		})
	}
}

// TestTiedSecondByAuthorsStaysCut: a REQ-only relay returning 50 events
// per REQ holds 180 announcements of four authors at one second. Split by
// the authors seen, every one arrives; but events of authors never seen
// cannot be asked for, so the second is reported cut (ErrSaturatedSecond,
// Truncation.TiesCut), once, and the paging goes on below it.
func TestTiedSecondByAuthorsStaysCut(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "tied-authors", ReqCap: 50})
	keys := []*signed.Key{signed.NewKey(), signed.NewKey(), signed.NewKey(), signed.NewKey()}
	tied, older := tiedAnnouncements(keys, 180, time.Now().Add(-time.Hour))
	r.Inject(tied...)
	r.Inject(older...)
	got, trunc, err := tiePager(t, r, nostr.Filter{Kinds: []int{30617}}, 50, true)
	if !errors.Is(err, historic.ErrSaturatedSecond) || !historic.OnlyCutTies(err) {
		t.Fatalf("err = %v, want only ErrSaturatedSecond", err)
	}
	// Four authors, 45 each: all seen in the first page, each author's
	// part under a page.
	if m := missing(got, append(tied, older...)); m > 0 {
		t.Fatalf("%d of %d events missing", m, len(tied)+len(older))
	}
	if n := trunc.TiesCut(r.URL()); n != 1 {
		t.Fatalf("%d seconds reported cut, want 1", n)
	}
	if st := r.Stats(); st.Reqs > 30 {
		t.Fatalf("%d REQs, want at most 30", st.Reqs)
	}
}
