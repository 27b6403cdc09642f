package event

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// DecodeID agrees with encoding/hex on lower-case hex and refuses
// everything else: upper case, other bytes at any place, other lengths.
func TestDecodeIDAgreesWithHex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 1000 {
		var want ID
		for i := range want {
			want[i] = byte(r.Uint32())
		}
		s := hex.EncodeToString(want[:])
		if got, ok := DecodeID(s); !ok || got != want {
			t.Fatalf("DecodeID(%s) = %x, %v", s, got, ok)
		}
		if got := want.String(); got != s {
			t.Fatalf("String() = %s, want %s", got, s)
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

// FuzzDecodeID: DecodeID accepts exactly the 64-character strings
// encoding/hex decodes that are lower case, with the same bytes, and
// String gives the string back.
func FuzzDecodeID(f *testing.F) {
	for _, s := range []string{
		"",
		strings.Repeat("0", 64),
		strings.Repeat("f", 64),
		strings.Repeat("F", 64),
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
		strings.Repeat("a", 63),
		strings.Repeat("a", 65),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := DecodeID(s)
		want, err := hex.DecodeString(s)
		valid := err == nil && len(s) == 64 && strings.ToLower(s) == s
		if ok != valid {
			t.Fatalf("DecodeID(%q) ok = %v, want %v", s, ok, valid)
		}
		if !ok {
			return
		}
		if string(got[:]) != string(want) {
			t.Fatalf("DecodeID(%q) = %x, want %x", s, got, want)
		}
		if got.String() != s {
			t.Fatalf("String() = %s, want %s", got.String(), s)
		}
	})
}

// An Incoming carries its id decoded once; one built without WithID still
// answers ID by decoding.
func TestIncomingID(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	want, _ := DecodeID(id)
	in := Incoming{Event: &nostr.Event{ID: id}}
	if got, ok := in.ID(); !ok || got != want {
		t.Fatalf("ID() without WithID = %x, %v", got, ok)
	}
	in = in.WithID()
	in.Event = &nostr.Event{ID: "changed"} // the decoded id stays
	if got, ok := in.ID(); !ok || got != want {
		t.Fatalf("ID() after WithID = %x, %v", got, ok)
	}
	bad := Incoming{Event: &nostr.Event{ID: strings.ToUpper(id)}}.WithID()
	if _, ok := bad.ID(); ok {
		t.Fatal("upper-case id accepted")
	}
	given := Incoming{Event: &nostr.Event{ID: "not decoded again"}}.WithDecodedID(want, true)
	if got, ok := given.ID(); !ok || got != want {
		t.Fatalf("ID() after WithDecodedID = %x, %v", got, ok)
	}
	if given = given.WithID(); given.id != want {
		t.Fatal("WithID decoded an id given already")
	}
	refused := Incoming{Event: &nostr.Event{ID: id}}.WithDecodedID(want, false)
	if _, ok := refused.ID(); ok {
		t.Fatal("an id given as invalid accepted")
	}
	none := Incoming{}.WithID()
	if _, ok := none.ID(); ok {
		t.Fatal("id of no event accepted")
	}
}

// decodeIDBefore is the id decoder as it was in internal/neg before it
// moved here, kept to compare the two in one benchmark run.
func decodeIDBefore(s string) ([32]byte, bool) {
	var k [32]byte
	if len(s) != 64 {
		return k, false
	}
	for i := range k {
		hi, lo := hexNibble[s[2*i]], hexNibble[s[2*i+1]]
		if hi|lo > 0x0f {
			return k, false
		}
		k[i] = hi<<4 | lo
	}
	return k, true
}

var sinkID ID

// BenchmarkDecodeID decodes 64-character ids: "before" is the decoder as
// internal/neg had it, "after" this package's.
func BenchmarkDecodeID(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 1024)
	for i := range ids {
		var k [32]byte
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		ids[i] = hex.EncodeToString(k[:])
	}
	b.Run("before", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sinkID, _ = decodeIDBefore(ids[i&1023])
		}
	})
	b.Run("after", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sinkID, _ = DecodeID(ids[i&1023])
		}
	})
}
