package statestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
)

const ownA, ownB = "ws://own-a.example", "ws://own-b.example"

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, *nostr.Event) error { return nil }

func open(t *testing.T, dir, own string) (*Store, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := Open(Options{Config: Config{Dir: dir}, OwnRelay: own, NoSync: true, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func events(t *testing.T, n int) []*nostr.Event {
	sk := nostr.GeneratePrivateKey()
	var out []*nostr.Event
	for i := 0; i < n; i++ {
		ev := &nostr.Event{Kind: 1630, CreatedAt: nostr.Timestamp(1_700_000_000 + i), Tags: nostr.Tags{{"e", fmt.Sprintf("%064x", i%10)}, {"a", "30617:" + fmt.Sprintf("%064x", 7) + ":repo"}}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func newIndex(t *testing.T) *localindex.Index {
	x, err := localindex.New(localindex.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func newPurgatory(t *testing.T) *purgatory.Purgatory {
	cfg := purgatory.DefaultConfig()
	cfg.GitDir = t.TempDir()
	p, err := purgatory.New(cfg, purgatory.Options{Publisher: nopPublisher{}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func stateEvent(t *testing.T) *nostr.Event {
	ev := &nostr.Event{Kind: purgatory.KindState, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"d", "repo"}, {"refs/heads/main", strings.Repeat("a", 40)}, {"HEAD", "ref: refs/heads/main"}}}
	if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
		t.Fatal(err)
	}
	return ev
}

// A store saved and reopened gives back the local index and the purgatory.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, ownA)
	if s.Outcome() != Fresh {
		t.Fatalf("outcome %s, want fresh", s.Outcome())
	}
	x := newIndex(t)
	x.EnableJournal()
	p := newPurgatory(t)
	evs := events(t, 3000)
	for i, ev := range evs {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := s.Flush(Sources{Local: x, Purgatory: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	x.Remove(evs[5].ID)
	held := stateEvent(t)
	// The repository is hosted: its owner's announcement was accepted.
	ann := &nostr.Event{Kind: purgatory.KindAnnouncement, PubKey: held.PubKey, CreatedAt: 1, Tags: nostr.Tags{{"d", "repo"}}}
	ann.ID = ann.GetID()
	p.AddAnnouncement(ann)
	if err := p.Add(held, false); err != nil {
		t.Fatal(err)
	}
	failing := []persisted.Health{{URL: "wss://down.example", Failures: 3, FailingSince: time.Unix(1_700_000_000, 0).UTC()}}
	rej := ingest.NewRejectedIndex(ingest.DefaultRejectedConfig(), nil)
	refused := events(t, 1)[0]
	rej.Add(refused)
	if err := s.FlushFinal(Sources{Local: x, Purgatory: p, Rejected: rej, Health: func() []persisted.Health { return failing }}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Events != 2999 || st.Bytes == 0 || st.BytesPerEvent == 0 {
		t.Fatalf("stats %+v", st)
	}
	s.Close()

	s2, _ := open(t, dir, ownA)
	if s2.Outcome() != Resumed {
		t.Fatalf("outcome %s, want resumed", s2.Outcome())
	}
	y := newIndex(t)
	loaded, err := s2.LoadLocal(y)
	if err != nil || !loaded {
		t.Fatalf("LoadLocal: %v %v", loaded, err)
	}
	if y.Len() != 2999 || y.Has(evs[5].ID) || !y.Has(evs[6].ID) {
		t.Fatalf("restored %d events (removed one present: %v)", y.Len(), y.Has(evs[5].ID))
	}
	rs, ok, err := s2.LoadRejected()
	if err != nil || !ok {
		t.Fatalf("LoadRejected: %v %v", ok, err)
	}
	rej2 := ingest.NewRejectedIndex(ingest.DefaultRejectedConfig(), nil)
	if err := rej2.RestoreState(rs); err != nil || !rej2.Has(refused.ID) {
		t.Fatalf("rejected index after restore: %v, has %v", err, rej2.Has(refused.ID))
	}
	hs, err := s2.LoadHealth()
	if err != nil || len(hs) != 1 || hs[0].URL != failing[0].URL || hs[0].Failures != 3 || !hs[0].FailingSince.Equal(failing[0].FailingSince) {
		t.Fatalf("LoadHealth: %+v %v", hs, err)
	}
	ps, err := s2.LoadPurgatory()
	if err != nil || len(ps) != 1 || ps[0].Event.ID != held.ID || ps[0].Added.IsZero() {
		t.Fatalf("LoadPurgatory: %+v %v", ps, err)
	}
}

// Compaction replaces a long journal with a snapshot that loads the same.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, ownA)
	x := newIndex(t)
	x.EnableJournal()
	evs := events(t, 4000)
	for i, ev := range evs {
		x.Add(ev)
		if i >= 2000 {
			x.Remove(evs[i-2000].ID)
		}
		if i%10 == 9 {
			if err := s.Flush(Sources{Local: x}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(Sources{Local: x}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, _ := open(t, dir, ownA)
	y := newIndex(t)
	if _, err := s2.LoadLocal(y); err != nil {
		t.Fatal(err)
	}
	if y.Len() != x.Len() || !y.Has(evs[3999].ID) || y.Has(evs[0].ID) {
		t.Fatalf("after compaction: %d events, want %d", y.Len(), x.Len())
	}
}

func setAsideFiles(t *testing.T, dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if IsSetAside(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// oneLine checks that exactly one log line mentions the set-aside store,
// at the level given.
func oneLine(t *testing.T, logs *observer.ObservedLogs, level zapcore.Level, reason string) {
	t.Helper()
	got := logs.FilterMessageSnippet("set aside").All()
	if len(got) != 1 || got[0].Level != level || got[0].ContextMap()["reason"] != reason {
		t.Fatalf("log lines about the set-aside store: %+v, want one at %s with reason %s", got, level, reason)
	}
}

func saved(t *testing.T, dir, own string) {
	s, _ := open(t, dir, own)
	x := newIndex(t)
	x.EnableJournal()
	for _, ev := range events(t, 500) {
		x.Add(ev)
	}
	if err := s.Flush(Sources{Local: x}); err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// A store made for another own relay is set aside with one INFO line and
// a new, empty one is used.
func TestOtherRelaySetAside(t *testing.T) {
	dir := t.TempDir()
	saved(t, dir, ownA)
	s, logs := open(t, dir, ownB)
	if s.Outcome() != OtherRelay {
		t.Fatalf("outcome %s", s.Outcome())
	}
	oneLine(t, logs, zapcore.InfoLevel, "other-relay")
	y := newIndex(t)
	if loaded, _ := s.LoadLocal(y); loaded || y.Len() != 0 {
		t.Fatalf("the other relay's index was loaded: %d events", y.Len())
	}
	if files := setAsideFiles(t, dir); len(files) != 1 || !strings.Contains(files[0], "other-relay") {
		t.Fatalf("set-aside files %v", files)
	}
}

// A store of another format version is set aside with one INFO line.
func TestOldFormatSetAside(t *testing.T) {
	dir := t.TempDir()
	saved(t, dir, ownA)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte{0, 0, 0, 0}) })
	db.Close()
	s, logs := open(t, dir, ownA)
	if s.Outcome() != OldFormat {
		t.Fatalf("outcome %s", s.Outcome())
	}
	oneLine(t, logs, zapcore.InfoLevel, "old-format")
	if y := newIndex(t); func() bool { s.LoadLocal(y); return y.Len() != 0 }() {
		t.Fatal("the old format's index was loaded")
	}
}

// A truncated store file and a file of garbage are moved aside with one
// WARN line each, and a working store replaces them.
func TestCorruptSetAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string)
	}{
		{"truncated", func(path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/3)
		}},
		{"garbage", func(path string) { os.WriteFile(path, []byte(strings.Repeat("not a store ", 2000)), 0o600) }},
		{"empty", func(path string) { os.WriteFile(path, nil, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			saved(t, dir, ownA)
			tc.damage(filepath.Join(dir, FileName))
			s, logs := open(t, dir, ownA)
			if s.Outcome() != Corrupt {
				t.Fatalf("outcome %s", s.Outcome())
			}
			oneLine(t, logs, zapcore.WarnLevel, "corrupt")
			x := newIndex(t)
			if _, err := s.LoadLocal(x); err != nil || x.Len() != 0 {
				t.Fatalf("new store: %v, %d events", err, x.Len())
			}
			x.Add(events(t, 1)[0])
			if err := s.Flush(Sources{Local: x}); err != nil {
				t.Fatalf("the new store does not work: %v", err)
			}
		})
	}
}

// A store held by another process is not set aside: Open says so.
func TestLockedStore(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, ownA)
	_, err := Open(Options{Config: Config{Dir: dir, LockTimeout: 100 * time.Millisecond}, OwnRelay: ownA})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if files := setAsideFiles(t, dir); len(files) != 0 {
		t.Fatalf("a locked store was set aside: %v", files)
	}
}
