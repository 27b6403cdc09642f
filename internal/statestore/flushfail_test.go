package statestore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
)

// A flush whose transaction fails loses nothing: the journal chunk it
// drained and the purgatory it exported are written by the next flush.
func TestFailedFlushLosesNothing(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, ownA)
	x := newIndex(t)
	x.EnableJournal()
	p := newPurgatory(t)
	src := Sources{Local: x, Purgatory: p}
	evs := events(t, 30)
	for _, ev := range evs[:10] {
		x.Add(ev)
	}
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}

	// Changes made while the store cannot write.
	for _, ev := range evs[10:] {
		x.Add(ev)
	}
	x.Remove(evs[0].ID)
	held := stateEvent(t)
	ann := &nostr.Event{Kind: purgatory.KindAnnouncement, PubKey: held.PubKey, CreatedAt: 1, Tags: nostr.Tags{{"d", "repo"}}}
	ann.ID = ann.GetID()
	p.AddAnnouncement(ann)
	if err := p.Add(held, false); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Close(); err != nil { // the next transaction fails
		t.Fatal(err)
	}
	if err := s.Flush(src); err == nil {
		t.Fatal("flush on a closed database succeeded")
	}
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2, _ := open(t, dir, ownA)
	y := newIndex(t)
	if loaded, err := s2.LoadLocal(y); err != nil || !loaded {
		t.Fatalf("LoadLocal: %v %v", loaded, err)
	}
	if y.Len() != 29 || y.Has(evs[0].ID) || !y.Has(evs[29].ID) {
		t.Fatalf("restored %d events, want 29 (removed one present: %v, last added present: %v)", y.Len(), y.Has(evs[0].ID), y.Has(evs[29].ID))
	}
	ps, err := s2.LoadPurgatory()
	if err != nil || len(ps) != 1 || ps[0].Event.ID != held.ID {
		t.Fatalf("purgatory after a failed flush: %d held, %v", len(ps), err)
	}
}

// Run leaves the final flush to its owner: stopping it writes nothing, so
// the flush after everything stopped is the only one at shutdown.
func TestRunLeavesFinalFlushToOwner(t *testing.T) {
	s, _ := open(t, t.TempDir(), ownA)
	x := newIndex(t)
	x.EnableJournal()
	x.Add(events(t, 1)[0])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, Sources{Local: x}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Flushes != 0 || x.JournalPending() == 0 {
		t.Fatalf("Run flushed at its end: %d flushes, %d journal entries pending", st.Flushes, x.JournalPending())
	}
}

// Run's interval and the flush times follow the injected clock.
func TestRunUsesInjectedClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	s, err := Open(Options{Config: Config{Dir: t.TempDir()}, OwnRelay: ownA, NoSync: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := newIndex(t)
	x.EnableJournal()
	x.Add(events(t, 1)[0])
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, Sources{Local: x}, time.Hour) }()
	for clk.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	if s.Stats().Flushes != 0 {
		t.Fatal("flushed before the interval passed")
	}
	clk.Advance(time.Hour)
	for s.Stats().Flushes == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !st.LastFlush.Equal(clk.Now()) {
		t.Fatalf("last flush %v, want the injected clock's %v", st.LastFlush, clk.Now())
	}
}

// Relay states held back because something received was still on its way
// show as not saved; the first flush that saves them shows when.
func TestRelaysSavedVisible(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	reg := prometheus.NewRegistry()
	s, err := Open(Options{Config: Config{Dir: t.TempDir()}, OwnRelay: ownA, NoSync: true, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	busy := true
	src := Sources{
		Relays: func() []persisted.Relay {
			return []persisted.Relay{{URL: "wss://r.example", ConfirmedGen: 1}}
		},
		Confirmable: func() bool { return !busy },
	}
	gauge := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "ngit_sync_state_relays_saved_timestamp_seconds" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no ngit_sync_state_relays_saved_timestamp_seconds")
		return 0
	}
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !st.RelaysSaved.IsZero() || gauge() != 0 {
		t.Fatalf("relay states shown saved while the sidecar was busy: %v, gauge %v", st.RelaysSaved, gauge())
	}
	busy = false
	clk.Advance(time.Minute)
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !st.RelaysSaved.Equal(clk.Now()) || gauge() != float64(clk.Now().Unix()) {
		t.Fatalf("relay states saved at %v (gauge %v), want %v", st.RelaysSaved, gauge(), clk.Now())
	}
	if rs, err := s.LoadRelays(); err != nil || len(rs) != 1 {
		t.Fatalf("LoadRelays: %+v %v", rs, err)
	}
}

// Relay states a flush held back (something was on its way to the own
// relay) are saved by Run at the first instant nothing is, without waiting
// for a flush to find the sidecar idle.
func TestRunSavesHeldBackRelaysWhenIdle(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	s, err := Open(Options{Config: Config{Dir: t.TempDir()}, OwnRelay: ownA, NoSync: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var busy atomic.Bool
	busy.Store(true)
	src := Sources{
		Relays: func() []persisted.Relay {
			return []persisted.Relay{{URL: "wss://r.example", ConfirmedGen: 1}}
		},
		Confirmable: func() bool { return !busy.Load() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, src, time.Minute) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The clock moves only once Run waits on waiters timers (the flush
	// tick, and the look while relay states are held back): moved while
	// Run had not yet taken a look, it would reach the next flush, which
	// saves the relay states too, however late Run runs on a loaded machine.
	waitFor := func(what string, cond func() bool, step time.Duration, waiters int) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i == 5000 {
				t.Fatalf("timed out waiting for %s", what)
			}
			if step > 0 && clk.Waiters() >= waiters {
				clk.Advance(step)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("a flush", func() bool { return s.Stats().Flushes > 0 }, time.Minute, 1)
	if !s.relaysWaiting() || !s.Stats().RelaysSaved.IsZero() {
		t.Fatal("relay states not held back while the sidecar was busy")
	}
	busy.Store(false)
	flushes := s.Stats().Flushes
	waitFor("the held-back relay states saved", func() bool { return !s.Stats().RelaysSaved.IsZero() }, time.Minute/relayLooks, 2)
	if s.Stats().Flushes != flushes {
		t.Fatal("saved by a flush, want by a look between flushes")
	}
	if rs, err := s.LoadRelays(); err != nil || len(rs) != 1 {
		t.Fatalf("LoadRelays: %+v %v", rs, err)
	}
}

// Options.Heartbeat paces the writes of unchanged relay states (their
// timestamps alone): none before it has passed since the last, one after.
func TestHeartbeatOption(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	s, err := Open(Options{Config: Config{Dir: t.TempDir(), Heartbeat: 5 * time.Minute}, OwnRelay: ownA, NoSync: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := Sources{
		Relays: func() []persisted.Relay {
			return []persisted.Relay{{URL: "wss://r.example", ConfirmedGen: 1}}
		},
		Confirmable: func() bool { return true },
	}
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}
	first := s.Stats().RelaysSaved
	for _, step := range []time.Duration{time.Minute, 3*time.Minute + 59*time.Second} {
		clk.Advance(step)
		if err := s.Flush(src); err != nil {
			t.Fatal(err)
		}
		if got := s.Stats().RelaysSaved; !got.Equal(first) {
			t.Fatalf("unchanged relay states written again at %v, before the 5m heartbeat", got)
		}
	}
	clk.Advance(time.Second)
	if err := s.Flush(src); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().RelaysSaved; !got.Equal(clk.Now()) {
		t.Fatalf("relay states last written at %v, want %v (heartbeat passed)", got, clk.Now())
	}
}
