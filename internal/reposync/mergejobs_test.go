package reposync

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// mergingHistoric is scriptedHistoric claiming to gain from merged jobs.
type mergingHistoric struct{ *scriptedHistoric }

func (mergingHistoric) MergesJobs() bool { return true }

// TestQueuedJobsMergeWhenSlotsAreScarce: with one free job slot (the live
// subscriptions fill the relay's budget) a batch's queued jobs run merged,
// at most maxMergedJobs filters per job, every filter asked once and the
// batch done once; with slots to spare fewer are merged, and Layer 2
// filters, or a syncer that does not merge, run every filter as a job of
// its own.
func TestQueuedJobsMergeWhenSlotsAreScarce(t *testing.T) {
	roots := make([]string, 20*100)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	fs := nip34.Layer3(roots, 100, nil) // 60 filters
	for _, c := range []struct {
		name      string
		live      int
		merging   bool
		maxPerJob int
		minCalls  int
		maxCalls  int
		maxJobs   int // HistoricMaxJobs, default when 0; -1: Layer 2 filters
	}{
		{"one free slot", 18, true, maxMergedJobs, len(fs) / maxMergedJobs, (len(fs) + maxMergedJobs - 1) / maxMergedJobs, 0},
		{"slots to spare", 0, true, 4, len(fs) / 4, len(fs) - 1, 0},
		{"syncer without merging", 18, false, 1, len(fs), len(fs), 0},
		{"layer 2 filters", 18, true, 1, len(fs), len(fs), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHistoricEnv(t)
			if c.merging {
				h.e.d.Historic = mergingHistoric{h.hs}
			}
			if c.maxJobs > 0 {
				h.e.cfg.HistoricMaxJobs = c.maxJobs
			}
			fs := fs
			if c.maxJobs < 0 { // repositories' addresses instead of roots
				refs := make([]string, len(roots))
				for i, id := range roots {
					refs[i] = nip34.RepoRef(id, "r")
				}
				fs = nip34.Layer2(refs, 100, nil)
			}
			for i := range c.live {
				h.r.live[fmt.Sprintf("l%d", i)] = 17
			}
			h.e.sched.startBatch(h.r, repoindex.NewItems(), fs, false)
			h.drain(t)
			asked := map[string]int{}
			for _, call := range h.hs.calls {
				if len(call) > c.maxPerJob {
					t.Fatalf("a job carried %d filters, want at most %d", len(call), c.maxPerJob)
				}
				for _, f := range call {
					asked[f.String()]++
				}
			}
			if n := len(h.hs.calls); n < c.minCalls || n > c.maxCalls {
				t.Errorf("%d jobs, want %d to %d", n, c.minCalls, c.maxCalls)
			}
			for _, f := range fs {
				if asked[f.String()] != 1 {
					t.Fatalf("filter %v asked %d times, want once", f, asked[f.String()])
				}
			}
			if len(h.e.pending[testRelay]) != 0 || h.r.Status != repoindex.Connected {
				t.Fatalf("after the batch: %d pending, %v", len(h.e.pending[testRelay]), h.r.Status)
			}
		})
	}
}

// TestHistoricJobsSharedAmongRelays: a relay whose jobs keep finishing does
// not take a place of HistoricMaxJobs again while it runs its share (the
// bound divided between the two relays) and the other relay waits below
// its share: the places go to the waiting relay.
func TestHistoricJobsSharedAmongRelays(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.cfg.HistoricMaxJobs = 4
	const share = 2
	const other = "wss://other.example.com"
	h.e.track(other, false)
	r2 := h.e.relays[other]
	r2.gen, r2.Status, r2.live = 1, repoindex.Syncing, map[string]int{}
	filters := func(prefix string) []nostr.Filter {
		var fs []nostr.Filter
		for i := range 20 {
			fs = append(fs, nostr.Filter{Tags: nostr.TagMap{"e": {fmt.Sprintf("%s%063x", prefix, i)}}})
		}
		return fs
	}
	h.e.sched.startBatch(h.r, repoindex.NewItems(), filters("a"), false)
	h.e.sched.startBatch(r2, repoindex.NewItems(), filters("b"), false)
	if h.r.running != 4 || r2.running != 0 {
		t.Fatalf("running %d and %d, want the first relay's 4 (nothing else waited)", h.r.running, r2.running)
	}
	type state struct{ running, queued int }
	snap := func() [2]state { return [2]state{{h.r.running, len(h.r.jobs)}, {r2.running, len(r2.jobs)}} }
	prev := snap()
	for h.r.running+r2.running > 0 || len(h.r.jobs)+len(r2.jobs) > 0 {
		select {
		case fn := <-h.e.inbox:
			fn()
		case <-time.After(10 * time.Second):
			t.Fatal("no historic job reported")
		}
		if h.e.historicJobs > 4 {
			t.Fatalf("%d historic jobs run, bound 4", h.e.historicJobs)
		}
		now := snap()
		for i := range 2 {
			me, them := prev[i], prev[1-i]
			started := now[i].queued < me.queued
			if started && me.running-1 >= share && them.queued > 0 && them.running < share {
				// One of its jobs ended in this step (running-1): it was
				// still at its share while the other relay waited below.
				t.Fatalf("relay %d started a job at %d running while the other waited at %d running (%v → %v)", i, me.running, them.running, prev, now)
			}
		}
		prev = now
	}
	if len(h.hs.calls) != 40 {
		t.Fatalf("%d jobs ran, want 40", len(h.hs.calls))
	}
}

// TestHistoricFreedPlacesGoToRelaysBelow: the places of HistoricMaxJobs
// that do not divide evenly among the relays (5 among 3: a share of 1)
// are no one's to keep. The relay that took every place while it was alone
// gives them up as its jobs end: a freed place goes to a relay with queued
// jobs that runs fewer jobs, so no relay starts a job and then runs two
// more than another that waits.
func TestHistoricFreedPlacesGoToRelaysBelow(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.cfg.HistoricMaxJobs = 5
	rs := []*remote{h.r}
	for _, url := range []string{"wss://other1.example.com", "wss://other2.example.com"} {
		h.e.track(url, false)
		r := h.e.relays[url]
		r.gen, r.Status, r.live = 1, repoindex.Syncing, map[string]int{}
		rs = append(rs, r)
	}
	filters := func(prefix string) []nostr.Filter {
		var fs []nostr.Filter
		for i := range 30 {
			fs = append(fs, nostr.Filter{Tags: nostr.TagMap{"e": {fmt.Sprintf("%s%063x", prefix, i)}}})
		}
		return fs
	}
	for i, r := range rs {
		h.e.sched.startBatch(r, repoindex.NewItems(), filters(fmt.Sprint(i)), false)
	}
	if rs[0].running != 5 {
		t.Fatalf("the first relay runs %d, want all 5 places (nothing else waited)", rs[0].running)
	}
	queued := func() []int {
		q := make([]int, len(rs))
		for i, r := range rs {
			q[i] = len(r.jobs)
		}
		return q
	}
	prev := queued()
	busy := func() bool {
		for _, r := range rs {
			if r.running > 0 || len(r.jobs) > 0 {
				return true
			}
		}
		return false
	}
	for busy() {
		select {
		case fn := <-h.e.inbox:
			fn()
		case <-time.After(10 * time.Second):
			t.Fatal("no historic job reported")
		}
		if h.e.historicJobs > 5 {
			t.Fatalf("%d historic jobs run, bound 5", h.e.historicJobs)
		}
		now := queued()
		for i, r := range rs {
			if now[i] == prev[i] {
				continue // started nothing
			}
			for k, o := range rs {
				if k != i && len(o.jobs) > 0 && r.running > o.running+1 {
					t.Fatalf("relay %d started a job and runs %d while relay %d waits with %d running", i, r.running, k, o.running)
				}
			}
		}
		prev = now
	}
	if len(h.hs.calls) != 90 {
		t.Fatalf("%d jobs ran, want 90", len(h.hs.calls))
	}
}
