package statestore

import (
	"errors"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
)

// The engines' values are what the sidecar hands the store.
var (
	_ LocalIndex    = (*localindex.Index)(nil)
	_ Purgatory     = (*purgatory.Purgatory)(nil)
	_ RejectedIndex = (*ingest.RejectedIndex)(nil)
)

// A local index too small for what was saved loads what fits: a full
// index is not a damaged store.
func TestLoadLocalIntoFullIndex(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, ownA)
	x := newIndex(t)
	x.EnableJournal()
	for _, ev := range events(t, 20) {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FlushFinal(Sources{Local: x}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2, logs := open(t, dir, ownA)
	opt := localindex.DefaultOptions()
	opt.MaxEvents = 10
	y, err := localindex.New(opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := s2.LoadLocal(y)
	if err != nil || !loaded || y.Len() != 10 {
		t.Fatalf("loaded %v, err %v, %d events; want loaded, 10 events", loaded, err, y.Len())
	}
	if n := logs.FilterMessageSnippet("damaged").Len(); n != 0 {
		t.Fatalf("%d damage warnings for a full index", n)
	}
}

func TestIndexFull(t *testing.T) {
	if !indexFull(localindex.ErrFull) || !indexFull(errors.Join(errors.New("x"), localindex.ErrFull)) {
		t.Error("the local index's ErrFull is not told as full")
	}
	if indexFull(localindex.ErrBadChunk) || indexFull(errors.New("localindex: index full")) {
		t.Error("another error is told as full")
	}
}
