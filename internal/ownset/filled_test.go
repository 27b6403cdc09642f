package ownset

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestFillMarksIndexedRoots: a root the LocalIndex holds is marked filled
// in its entry (the hash set stays empty), one not indexed yet in the
// hash set; both count as filled, and Reset forgets both.
func TestFillMarksIndexedRoots(t *testing.T) {
	o := fillTestSet(t)
	indexed := &nostr.Event{ID: fmt.Sprintf("%064x", 1), PubKey: fmt.Sprintf("%064x", 9), Kind: 1621, CreatedAt: 1}
	if err := o.idx.Add(indexed); err != nil {
		t.Fatal(err)
	}
	other := fmt.Sprintf("%064x", 2)
	repo := "30617:" + fmt.Sprintf("%064x", 9) + ":repo"
	for _, k := range []string{indexed.ID, other, repo} {
		if o.filled.has(k) {
			t.Fatalf("%s filled before any fill", k)
		}
		o.filled.add(k)
	}
	if len(o.filled.m) != 2 || !o.idx.Filled(indexed.ID) {
		t.Fatalf("hash set holds %d keys (want 2: the root not indexed and the repository), indexed root marked %v",
			len(o.filled.m), o.idx.Filled(indexed.ID))
	}
	for _, k := range []string{indexed.ID, other, repo} {
		if !o.filled.has(k) {
			t.Fatalf("%s not filled after add", k)
		}
	}
	// A root filled before it was indexed: its mark moves into its entry
	// when it is next looked up.
	late := &nostr.Event{ID: other, PubKey: indexed.PubKey, Kind: 1617, CreatedAt: 2}
	if err := o.idx.Add(late); err != nil {
		t.Fatal(err)
	}
	if !o.filled.has(other) || len(o.filled.m) != 1 || !o.idx.Filled(other) || !o.filled.has(other) {
		t.Fatalf("mark of a root indexed after its fill: hash set %d keys, entry marked %v", len(o.filled.m), o.idx.Filled(other))
	}
	o.Reset()
	for _, k := range []string{indexed.ID, other, repo} {
		if o.filled.has(k) {
			t.Fatalf("%s still filled after Reset", k)
		}
	}
	// An event removed and indexed again comes back unmarked.
	o.filled.add(indexed.ID)
	o.idx.Remove(indexed.ID)
	if err := o.idx.Add(indexed); err != nil {
		t.Fatal(err)
	}
	if o.filled.has(indexed.ID) {
		t.Fatal("re-indexed root kept its filled mark")
	}
}
