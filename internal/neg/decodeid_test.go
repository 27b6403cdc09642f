package neg

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
)

// DecodeID agrees with encoding/hex on lower-case hex and refuses
// everything else: upper case, other bytes at any place, other lengths.
func TestDecodeIDAgreesWithHex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 1000 {
		var want [32]byte
		for i := range want {
			want[i] = byte(r.Uint32())
		}
		s := hex.EncodeToString(want[:])
		if got, ok := DecodeID(s); !ok || got != want {
			t.Fatalf("DecodeID(%s) = %x, %v", s, got, ok)
		}
		b := []byte(s)
		b[r.IntN(64)] = "Agz-/:`G\x00\xff"[r.IntN(10)]
		if _, ok := DecodeID(string(b)); ok {
			t.Fatalf("DecodeID(%q) accepted", b)
		}
	}
	for _, s := range []string{"", "ab", strings.Repeat("a", 63), strings.Repeat("a", 65)} {
		if _, ok := DecodeID(s); ok {
			t.Errorf("DecodeID of %d characters accepted", len(s))
		}
	}
}
