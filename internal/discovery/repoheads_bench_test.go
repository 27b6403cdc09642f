package discovery

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// headsJSON is n announcements and n states shaped as a medium profile's
// (clone, relays, web, maintainers; a state with a branch and HEAD), as
// the own relay sends them.
func headsJSON(n int) [][]byte {
	out := make([][]byte, 0, 2*n)
	hex := func(i, l int) string { return fmt.Sprintf("%0*x", l, i) }
	for i := range n {
		pub, d := hex(i, 64), fmt.Sprintf("repo-%d", i)
		ann := nostr.Event{ID: hex(2*i, 64), PubKey: pub, CreatedAt: nostr.Timestamp(1_700_000_000 + i), Kind: nip34.KindRepoAnnouncement, Sig: hex(i, 128),
			Tags: nostr.Tags{{"d", d}, {"name", d}, {"description", "a repository of the benchmark"},
				{"clone", "http://127.0.0.1:8081/" + pub + "/" + d + ".git", "http://127.0.0.1:8082/" + pub + "/" + d + ".git"},
				{"relays", "ws://127.0.0.1:7001", "ws://127.0.0.1:7002", "ws://127.0.0.1:7003"},
				{"web", "http://127.0.0.1:8081/" + pub + "/" + d}, {"r", hex(i, 40), "euc"}, {"maintainers", hex(i+1, 64)}}}
		st := nostr.Event{ID: hex(2*i+1, 64), PubKey: pub, CreatedAt: nostr.Timestamp(1_700_000_000 + i), Kind: nip34.KindRepoState, Sig: hex(i, 128),
			Tags: nostr.Tags{{"d", d}, {"refs/heads/main", hex(i, 40)}, {"HEAD", "ref: refs/heads/main"}}}
		for _, ev := range []nostr.Event{ann, st} {
			b, err := json.Marshal(ev)
			if err != nil {
				panic(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// BenchmarkHeadBytes reports the heap bytes per kept announcement or state
// (B/head, its key included) as decoded events (map of *nostr.Event, as
// the heads were first kept) and as kept now (their JSON and created_at),
// in the same run. Each event is decoded from its JSON, as it arrives.
//
//	go test -run '^$' -bench HeadBytes -count 3 ./internal/reposync/
func BenchmarkHeadBytes(b *testing.B) {
	const n = 10_000
	raws := headsJSON(n)
	size := 0 // the JSON's own bytes
	for _, raw := range raws {
		size += len(raw)
	}
	decode := func(raw []byte) *nostr.Event {
		ev := &nostr.Event{}
		if err := json.Unmarshal(raw, ev); err != nil {
			b.Fatal(err)
		}
		return ev
	}
	for _, v := range []struct {
		name  string
		build func() any
	}{
		{"decoded-events", func() any {
			m := map[string]*nostr.Event{}
			for _, raw := range raws {
				ev := decode(raw)
				m[headKey(ev)] = ev
			}
			return m
		}},
		{"json", func() any {
			e := &Discovery{deps: Deps{KeepHeads: true}}
			for _, raw := range raws {
				e.noteHead(decode(raw))
			}
			return e.heads
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				s := v.build()
				per = float64(testkit.HeapInUse()-before) / float64(len(raws))
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/head")
			b.ReportMetric(float64(size)/float64(len(raws)), "JSON-B/head")
		})
	}
}
