package statestore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	bolt "go.etcd.io/bbolt"

	"github.com/grasp-sync/grasp-sync/internal/discovery"
)

// The current announcements and states round-trip with the repository
// index, are rewritten only when their generation moves, and an unreadable
// value gives none (the restart then pages them in full) with a WARN.
func TestHeadsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, ownA)
	state := stateEvent(t)
	seen := time.Unix(1_700_000_000, 0).UTC()
	p := discovery.PersistedRepos{Roots: map[string][]string{"30617:x:repo": {"r1"}}, SelfSeen: seen, Gen: 1, Heads: []discovery.Head{headOf(t, state)}, HeadsGen: 1}
	if err := s.Flush(Sources{Repos: func() discovery.PersistedRepos { return p }}); err != nil {
		t.Fatal(err)
	}
	// Same generation, other heads: not rewritten.
	q := p
	q.Heads = nil
	if err := s.FlushFinal(Sources{Repos: func() discovery.PersistedRepos { return q }}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2, logs := open(t, dir, ownA)
	got, err := s2.LoadRepos()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Heads) != 1 || got.Heads[0].ID != state.ID || !decodeHead(t, got.Heads[0]).CheckID() || !got.SelfSeen.Equal(seen) || len(got.Roots["30617:x:repo"]) != 1 {
		t.Fatalf("LoadRepos: %+v", got)
	}
	if err := s2.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketHeads).Put([]byte("ff"), []byte("{bad")) }); err != nil {
		t.Fatal(err)
	}
	got, err = s2.LoadRepos()
	if err != nil || len(got.Heads) != 1 || len(got.Roots) != 1 {
		t.Fatalf("LoadRepos with an unreadable head: %+v %v", got, err)
	}
	if logs.FilterMessageSnippet("unreadable persisted announcement or state").Len() != 1 {
		t.Fatal("no WARN for an unreadable head")
	}
	// A new generation without the state deletes it (and the unreadable
	// key); another head is added.
	other := stateEvent(t)
	r := discovery.PersistedRepos{Roots: p.Roots, SelfSeen: seen, Gen: 1, Heads: []discovery.Head{headOf(t, other)}, HeadsGen: 2}
	if err := s2.FlushFinal(Sources{Repos: func() discovery.PersistedRepos { return r }}); err != nil {
		t.Fatal(err)
	}
	got, err = s2.LoadRepos()
	if err != nil || len(got.Heads) != 1 || got.Heads[0].ID != other.ID {
		t.Fatalf("LoadRepos after a change: %+v %v", got, err)
	}
}

func headOf(t *testing.T, ev *nostr.Event) discovery.Head {
	t.Helper()
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return discovery.Head{ID: ev.ID, JSON: raw}
}

func decodeHead(t *testing.T, h discovery.Head) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{}
	if err := json.Unmarshal(h.JSON, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}
