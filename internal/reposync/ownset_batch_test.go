package reposync

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// capRelay is a minimal relay serving a fixed set of events to REQs: each
// filter's matches newest first, cut at the filter's limit; with reqCap,
// at most reqCap events per REQ in all, the filters served one after the
// other (a later filter gets what the earlier ones left: nothing, once
// they took the cap); an event matching several filters is sent once per
// filter (ngit-relay). With maxFilters, a REQ with more filters is
// refused with CLOSED.
type capRelay struct {
	events     []*nostr.Event
	reqCap     int
	maxFilters int
	reqs       atomic.Int64
	filters    atomic.Int64
}

func (r *capRelay) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := req.Context()
		send := func(v ...any) error {
			b, _ := json.Marshal(v)
			return c.Write(ctx, websocket.MessageText, b)
		}
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var msg []json.RawMessage
			var typ, id string
			if json.Unmarshal(data, &msg) != nil || len(msg) < 2 || json.Unmarshal(msg[0], &typ) != nil || typ != "REQ" {
				continue
			}
			_ = json.Unmarshal(msg[1], &id)
			r.reqs.Add(1)
			r.filters.Add(int64(len(msg) - 2))
			if r.maxFilters > 0 && len(msg)-2 > r.maxFilters {
				_ = send("CLOSED", id, "invalid: too many filters")
				continue
			}
			budget := r.reqCap
			for _, raw := range msg[2:] {
				var f nostr.Filter
				if f.UnmarshalJSON(raw) != nil {
					continue
				}
				var out []*nostr.Event
				for _, ev := range r.events {
					if f.Matches(ev) {
						out = append(out, ev)
					}
				}
				slices.SortFunc(out, func(a, b *nostr.Event) int {
					return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(a.ID, b.ID))
				})
				if f.Limit > 0 && len(out) > f.Limit {
					out = out[:f.Limit]
				}
				if r.reqCap > 0 {
					out = out[:min(len(out), budget)]
					budget -= len(out)
				}
				for _, ev := range out {
					if send("EVENT", id, ev) != nil {
						return
					}
				}
			}
			_ = send("EOSE", id)
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// fillUniverse is roots, one in ten with discussion under it (E, e and q
// tags; a top-level comment tags its root with both E and e), a few
// events sharing one second, and an event the fill must not read: as on
// a forge, most fill filters match nothing.
func fillUniverse(nRoots int) (roots []string, events []*nostr.Event) {
	pk := strings.Repeat("ab", 32)
	mk := func(kind int, at int, tags nostr.Tags) *nostr.Event {
		ev := &nostr.Event{PubKey: pk, Kind: kind, CreatedAt: nostr.Timestamp(1_700_000_000 + at), Tags: tags, Content: fmt.Sprint(kind, at, tags)}
		ev.ID = ev.GetID()
		events = append(events, ev)
		return ev
	}
	for i := range nRoots {
		root := mk(1621, i*100, nostr.Tags{{"a", "30617:" + pk + ":repo"}})
		roots = append(roots, root.ID)
		if i%10 != 0 {
			continue
		}
		for j := range 1 + i%7 {
			at := i*100 + 1 + j/3 // up to three comments a second
			switch j % 3 {
			case 0:
				mk(1111, at, nostr.Tags{{"E", root.ID}, {"e", root.ID}, {"K", "1621"}})
			case 1:
				mk(1, at, nostr.Tags{{"e", root.ID}})
			default:
				mk(1, at, nostr.Tags{{"q", root.ID}})
			}
		}
	}
	mk(1, 5, nostr.Tags{{"e", strings.Repeat("cd", 32)}}) // names no root filled
	return roots, events
}

func fillFrom(t *testing.T, url string, roots []string, noBatch bool) *OwnLocalSet {
	t.Helper()
	idx, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context) (*relay.Conn, error) { return relay.Dial(ctx, url, relay.DefaultOptions()) }
	o := NewOwnLocalSet(idx, dial, 3, 4, 5*time.Second, nil, zap.NewNop())
	o.noBatch.Store(noBatch)
	t.Cleanup(o.Close)
	if err := o.FillItems(context.Background(), false, nil, roots); err != nil {
		t.Fatal(err)
	}
	return o
}

// wantFilled is every event a fill of roots must read.
func wantFilled(roots []string, events []*nostr.Event) []string {
	fs := nip34.Layers23(nil, roots, 3, nil)
	var ids []string
	for _, ev := range events {
		if nostr.Filters(fs).Match(ev) {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

func checkFilled(t *testing.T, o *OwnLocalSet, want []string, events []*nostr.Event) {
	t.Helper()
	if got := o.Index().Len(); got != len(want) {
		t.Errorf("index holds %d events, want %d", got, len(want))
	}
	for _, id := range want {
		if !o.Index().Has(id) {
			t.Fatalf("event %s not filled", id)
		}
	}
}

// TestFillBatchesFilters: the fill sends several filters per REQ and
// reads everything, with far fewer REQs than one filter at a time.
func TestFillBatchesFilters(t *testing.T) {
	roots, events := fillUniverse(60)
	want := wantFilled(roots, events)
	r := &capRelay{events: events}
	url := r.start(t)
	batched := fillFrom(t, url, roots, false)
	checkFilled(t, batched, want, events)
	reqBatched := r.reqs.Swap(0)
	single := fillFrom(t, url, roots, true)
	checkFilled(t, single, want, events)
	reqSingle := r.reqs.Load()
	t.Logf("%d fill filters: %d REQs batched, %d one filter at a time", len(nip34.Layers23(nil, roots, 3, nil)), reqBatched, reqSingle)
	if reqBatched*4 > reqSingle*3 {
		t.Fatalf("%d REQs batched against %d one at a time: not batched", reqBatched, reqSingle)
	}
}

// TestFillBatchSurvivesReqCap: a relay capping the results of a whole REQ
// (the first filters take it all, the last get nothing) still has every
// event read: a filter that got nothing is asked again until a REQ brings
// nothing at all.
func TestFillBatchSurvivesReqCap(t *testing.T) {
	roots, events := fillUniverse(60)
	want := wantFilled(roots, events)
	for _, reqCap := range []int{3, 5, 8} { // at least the events of one second: no pager gets past less
		t.Run(fmt.Sprint("cap-", reqCap), func(t *testing.T) {
			r := &capRelay{events: events, reqCap: reqCap}
			o := fillFrom(t, r.start(t), roots, false)
			checkFilled(t, o, want, events)
			if o.noBatch.Load() {
				t.Fatal("batching turned off")
			}
		})
	}
}

// TestFillBatchRefusedFallsBack: a relay refusing REQs of several filters
// gets them one at a time, and everything is read.
func TestFillBatchRefusedFallsBack(t *testing.T) {
	roots, events := fillUniverse(20)
	want := wantFilled(roots, events)
	r := &capRelay{events: events, maxFilters: 1}
	o := fillFrom(t, r.start(t), roots, false)
	checkFilled(t, o, want, events)
	if !o.noBatch.Load() {
		t.Fatal("batching still on after the relay refused a batch")
	}
}
