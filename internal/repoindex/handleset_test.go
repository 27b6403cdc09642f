package repoindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestHandleSetMatchesMap checks the handle set against a map of strings
// through its sparse-to-dense turn and adds from either form.
func TestHandleSetMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := make([]string, 5000)
	for i := range pool {
		pool[i] = fmt.Sprintf("handles-test-%064x", i)
	}
	for _, spread := range []int{1, 10, 200} { // dense, mixed, sparse
		s, want := NewSet(), map[string]bool{}
		other, wantOther := NewSet(), map[string]bool{}
		for i := 0; i < 3000; i++ {
			v := pool[rng.IntN(len(pool)/spread+1)*spread%len(pool)]
			s.Add(v)
			want[v] = true
			if i%3 == 0 {
				w := pool[rng.IntN(len(pool))]
				other.Add(w)
				wantOther[w] = true
			}
		}
		check := func(name string, s Set, want map[string]bool) {
			t.Helper()
			if s.Len() != len(want) {
				t.Fatalf("spread %d %s: len %d, want %d", spread, name, s.Len(), len(want))
			}
			for _, v := range pool {
				if s.Has(v) != want[v] {
					t.Fatalf("spread %d %s: has(%s) = %v", spread, name, v, s.Has(v))
				}
			}
			var keys []string
			for k := range want {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(s.Sorted(), keys) {
				t.Fatalf("spread %d %s: members differ", spread, name)
			}
		}
		check("set", s, want)
		check("other", other, wantOther)
		u := NewSet()
		u.AddAll(s)
		u.AddAll(other)
		for k := range wantOther {
			want[k] = true
		}
		check("union", u, want)
	}
	// Members far apart in the handle space stay a map past maxSmall.
	far, wantFar := NewSet(), map[string]bool{}
	for i := 0; i < 400; i++ {
		v := fmt.Sprintf("handles-test-far-%d", i)
		for k := 0; k < 100; k++ {
			names.intern(fmt.Sprintf("handles-test-filler-%d-%d", i, k))
		}
		far.Add(v)
		wantFar[v] = true
	}
	if far.sparse == nil || far.dense != nil {
		t.Fatal("a set of members far apart is not a map")
	}
	for v := range wantFar {
		if !far.Has(v) {
			t.Fatalf("far set lacks %s", v)
		}
	}
	if far.Len() != 400 || len(far.Sorted()) != 400 {
		t.Fatal("far set has the wrong size")
	}
	if NewSet().Has("never-added-to-any-set") || (*HandleSet)(nil).Len() != 0 {
		t.Fatal("empty sets have members")
	}
}

// TestInterner checks handles are stable and unique through the table's
// growth, and that lookups of strings never added find nothing.
func TestInterner(t *testing.T) {
	in := newInterner()
	const n = 20000
	for i := 0; i < n; i++ {
		if h := in.intern(fmt.Sprintf("interner-%d", i)); h != uint32(i) {
			t.Fatalf("handle %d for the %dth string", h, i)
		}
	}
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("interner-%d", i)
		if h, ok := in.lookup(s); !ok || h != uint32(i) || in.name(h) != s || in.intern(s) != h {
			t.Fatalf("%s: handle %d %v, name %q", s, h, ok, in.name(h))
		}
	}
	if _, ok := in.lookup("interner-never"); ok {
		t.Fatal("a string never added has a handle")
	}
}

// A dense set does not grow its bitset to a member far beyond its span
// (handles only grow: a repository's roots set that turned dense at start
// would otherwise pay every handle issued since for one late root); it
// turns back into a map and keeps every member.
func TestDenseSetStaysBoundedForAFarMember(t *testing.T) {
	s := NewSet()
	for h := uint32(0); h < 400; h++ {
		s.AddH(h)
	}
	if s.dense == nil {
		t.Fatal("400 consecutive handles are not dense")
	}
	s.AddH(8_000_000)
	if len(s.dense) > 100 {
		t.Fatalf("%d words for %d members", len(s.dense), s.Len())
	}
	if s.Len() != 401 || !s.HasH(8_000_000) || !s.HasH(0) || !s.HasH(399) || s.HasH(400) {
		t.Fatalf("len %d, members lost after the turn", s.Len())
	}
	s.AddH(400) // adds after the turn
	if s.Len() != 402 || !s.HasH(400) {
		t.Fatal("add after the turn lost")
	}
}

// Every string comes back from the table's pages as it went in: empty,
// long (a page of its own, between records of the shared page), upper and
// lower case, and many (across pages and chunks of handles), each with
// one handle.
func TestInternerKeepsEveryStringExactly(t *testing.T) {
	in := newInterner()
	id := strings.Repeat("0123456789abcdef", 4)
	all := []string{id, strings.ToUpper(id), "", "30617:" + id + ":repo", strings.Repeat("x", nameLong+1),
		id[:63] + "g", id[:63], strings.Repeat("é", 32), strings.Repeat("y", namePage)}
	for i := range 3 * nameChunk {
		all = append(all, fmt.Sprintf("%064x", i), fmt.Sprintf("wss://relay-%d.example", i))
	}
	handles := map[string]uint32{}
	for _, s := range all {
		h := in.intern(s)
		if prev, ok := handles[s]; ok && prev != h {
			t.Fatalf("%.20q: handle %d, then %d", s, prev, h)
		}
		handles[s] = h
	}
	seen := map[uint32]string{}
	for s, h := range handles {
		if o, dup := seen[h]; dup {
			t.Fatalf("%.20q and %.20q share handle %d", s, o, h)
		}
		seen[h] = s
		if got := in.name(h); got != s {
			t.Fatalf("handle %d: %.20q, want %.20q", h, got, s)
		}
		if g, ok := in.lookup(s); !ok || g != h || in.intern(strings.Clone(s)) != h {
			t.Fatalf("%.20q: lookup %d %v, want %d", s, g, ok, h)
		}
	}
	if _, ok := in.lookup(strings.Repeat("f", 64)); ok {
		t.Fatal("a hex id never added has a handle")
	}
}

// Names are read without the table's lock while other goroutines intern
// (go test -race).
func TestInternerReadsWhileGrowing(t *testing.T) {
	in := newInterner()
	first := in.intern(strings.Repeat("ab", 32))
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 * nameChunk {
				h := in.intern(fmt.Sprintf("%063x%d", i, w))
				if in.name(h) != fmt.Sprintf("%063x%d", i, w) {
					t.Errorf("handle %d lost its name", h)
					return
				}
			}
		}()
	}
	for range 2000 {
		if in.name(first) != strings.Repeat("ab", 32) {
			t.Fatal("the first name changed")
		}
	}
	wg.Wait()
}
