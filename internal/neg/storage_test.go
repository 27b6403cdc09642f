package neg

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
)

// bigFingerprint computes a NIP-77 fingerprint independently of Storage:
// the ids as little-endian integers summed with math/big modulo 2^256.
func bigFingerprint(items []Item) string {
	mod := new(big.Int).Lsh(big.NewInt(1), 256)
	sum := new(big.Int)
	for _, it := range items {
		be := slices.Clone(it.ID[:])
		slices.Reverse(be) // little-endian -> big-endian for SetBytes
		sum.Add(sum, new(big.Int).SetBytes(be))
	}
	sum.Mod(sum, mod)
	le := make([]byte, 32)
	sum.FillBytes(le)
	slices.Reverse(le)
	h := sha256.Sum256(append(le, negentropy.EncodeVarInt(len(items))...))
	return hex.EncodeToString(h[:negentropy.FingerprintSize])
}

// CarrySet is a crafted set whose sum needs a carry out of a 32-bit word
// where both operands are 0xFFFFFFFF and a carry comes in: go-nostr's
// accumulator drops that carry.
func carrySet() []Item {
	var a, b Item
	a.CreatedAt, b.CreatedAt = 1000, 1001
	for i := range 8 {
		a.ID[i] = 0xff // words 0 and 1 all ones
	}
	b.ID[0] = 0x01 // word 0 = 1: carries into word 1
	for i := 4; i < 8; i++ {
		b.ID[i] = 0xff // word 1 all ones
	}
	return []Item{a, b}
}

func TestFingerprintMatchesBigInt(t *testing.T) {
	d := makeDataset(1, 3000, 0)
	s := ourStorage(d.client)
	sorted := make([]Item, s.Size())
	for i := range sorted {
		sorted[i] = s.Item(i)
	}
	r := rand.New(rand.NewPCG(2, 3))
	ranges := [][2]int{{0, 0}, {0, s.Size()}, {0, 1}, {s.Size() - 1, s.Size()}}
	for range 200 {
		a, b := r.IntN(s.Size()+1), r.IntN(s.Size()+1)
		ranges = append(ranges, [2]int{min(a, b), max(a, b)})
	}
	for _, rg := range ranges {
		got, want := s.Fingerprint(rg[0], rg[1]), bigFingerprint(sorted[rg[0]:rg[1]])
		if got != want {
			t.Fatalf("Fingerprint(%d,%d) = %s, want %s", rg[0], rg[1], got, want)
		}
	}
}

func TestFingerprintCarry(t *testing.T) {
	set := carrySet()
	want := bigFingerprint(set)
	if got := ourStorage(set).Fingerprint(0, 2); got != want {
		t.Errorf("our fingerprint = %s, want %s", got, want)
	}
	// go-nostr's vector drops the carry; this is why we have our own storage.
	if v := vectorStorage(set).Fingerprint(0, 2); v == want {
		t.Errorf("vector fingerprint %s equals the correct one: the carry bug this set shows is gone", v)
	}
	// All-ones ids wrap around 2^256 many times.
	var ones []Item
	for i := range 300 {
		it := Item{CreatedAt: nostr.Timestamp(i)}
		for j := range it.ID {
			it.ID[j] = 0xff
		}
		it.ID[31] = byte(i) // distinct ids
		ones = append(ones, it)
	}
	if got, want := ourStorage(ones).Fingerprint(0, len(ones)), bigFingerprint(ones); got != want {
		t.Errorf("all-ones fingerprint = %s, want %s", got, want)
	}
}

func TestStorageDedupesAndSorts(t *testing.T) {
	d := makeDataset(4, 100, 0)
	items := append(slices.Clone(d.client), d.client[:10]...)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	s := NewStorage(items)
	if got, want := s.Size(), len(d.client); got != want {
		t.Fatalf("Size() = %d, want %d", got, want)
	}
	for i := 1; i < s.Size(); i++ {
		if s.Item(i-1).Compare(s.Item(i)) >= 0 {
			t.Fatalf("items %d and %d out of order", i-1, i)
		}
	}
}

func TestFindLowerBoundMatchesVector(t *testing.T) {
	d := makeDataset(7, 2000, 0)
	ours, vec := ourStorage(d.client), vectorStorage(d.client)
	r := rand.New(rand.NewPCG(8, 9))
	for range 2000 {
		i := r.IntN(ours.Size())
		it := ours.Item(i)
		id := hex.EncodeToString(it.ID[:])
		ts := it.CreatedAt + nostr.Timestamp(r.IntN(3)-1)
		prefix := id[:2*r.IntN(33)]
		b := negentropy.Bound{Item: negentropy.Item{Timestamp: ts, ID: prefix}}
		lo := r.IntN(i + 1)
		if got, want := ours.FindLowerBound(lo, ours.Size(), b), vec.FindLowerBound(lo, vec.Size(), b); got != want {
			t.Fatalf("FindLowerBound(%d, %v) = %d, want %d", lo, b, got, want)
		}
	}
	if got := ours.FindLowerBound(0, ours.Size(), negentropy.InfiniteBound); got != ours.Size() {
		t.Errorf("infinite bound = %d, want %d", got, ours.Size())
	}
	if got, want := ours.GetBound(3), vec.GetBound(3); got != want {
		t.Errorf("GetBound(3) = %v, want %v", got, want)
	}
	if got := ours.GetBound(ours.Size()); got != negentropy.InfiniteBound {
		t.Errorf("GetBound(size) = %v, want infinite", got)
	}
}

// TestMessagesMatchVector runs the same reconciliation with our engine and
// storage, with go-nostr's engine on our storage, and with go-nostr's engine
// on its vector, and requires byte-identical messages and the right results.
func TestMessagesMatchVector(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 1000, 3000} {
		for _, diff := range []float64{0, 0.001, 0.5, 1} {
			for _, limit := range []int{0, 4096, 60_000} {
				t.Run(fmt.Sprintf("n=%d/diff=%g/limit=%d", n, diff, limit), func(t *testing.T) {
					d := makeDataset(uint64(n)+uint64(diff*1000), n, diff)
					vec := lockstep(t, implGoNostr, vectorStorage(d.client), vectorStorage(d.server), limit, limit)
					for _, run := range []struct {
						name string
						r    lockstepResult
					}{
						{"our engine and storage", lockstep(t, implOurs, ourStorage(d.client), ourStorage(d.server), limit, limit)},
						{"go-nostr's engine on our storage", lockstep(t, implGoNostr, ourStorage(d.client), ourStorage(d.server), limit, limit)},
					} {
						ours := run.r
						if !slices.Equal(ours.need, d.need) || !slices.Equal(ours.have, d.have) {
							t.Fatalf("%s: need/have: got %d/%d, want %d/%d", run.name, len(ours.need), len(ours.have), len(d.need), len(d.have))
						}
						if len(ours.msgs) != len(vec.msgs) {
							t.Fatalf("%s: %d messages, %d with go-nostr's vector", run.name, len(ours.msgs), len(vec.msgs))
						}
						for i := range ours.msgs {
							if ours.msgs[i] != vec.msgs[i] {
								t.Fatalf("%s: message %d differs:\nours   %.200s\nvector %.200s", run.name, i, ours.msgs[i], vec.msgs[i])
							}
							if limit > 0 && len(ours.msgs[i])/2 > limit {
								t.Fatalf("%s: message %d is %d bytes, over the %d limit", run.name, i, len(ours.msgs[i])/2, limit)
							}
						}
					}
				})
			}
		}
	}
}

func TestItemFromHex(t *testing.T) {
	id := strings.Repeat("0a", 32)
	it, err := ItemFromHex(5, id)
	if err != nil || it.CreatedAt != 5 || it.ID[0] != 0x0a || it.ID[31] != 0x0a {
		t.Fatalf("ItemFromHex = %v, %v", it, err)
	}
	for _, bad := range []string{"", id[:62], id + "00", strings.Repeat("zz", 32)} {
		if _, err := ItemFromHex(1, bad); !errors.Is(err, ErrInvalidItem) {
			t.Errorf("ItemFromHex(%q): err = %v, want ErrInvalidItem", bad, err)
		}
	}
}
