package ingest

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// randomText mixes plain text (runs of it too, longer than a machine
// word), every control character, quotes, backslashes, multi-byte UTF-8
// and bytes that are not UTF-8.
func randomText(rng *rand.Rand) string {
	alphabet := []string{"a", "Z", " ", "\"", "\\", "/", "é", "🌍", "\xff", "\u2028", "<", "0", "+ a line of a diff", "éé🌍\x80\x7f~"}
	var b []byte
	for range rng.IntN(40) {
		if rng.IntN(4) == 0 {
			b = append(b, byte(rng.IntN(0x20)))
		} else {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
	}
	return string(b)
}

func randomEvent(rng *rand.Rand) *nostr.Event {
	ev := &nostr.Event{PubKey: randomText(rng), CreatedAt: nostr.Timestamp(rng.Int64N(1 << 40)), Kind: rng.IntN(40000), Content: randomText(rng)}
	if rng.IntN(5) == 0 {
		ev.CreatedAt = -ev.CreatedAt
	}
	for range rng.IntN(5) {
		tag := nostr.Tag{}
		for range rng.IntN(4) {
			tag = append(tag, randomText(rng))
		}
		ev.Tags = append(ev.Tags, tag)
	}
	return ev
}

// TestCheckIDAgreesWithGoNostr: the serialization is go-nostr's byte for
// byte, and checkID accepts exactly what CheckID accepts: the right id, a
// wrong one, uppercase hex, a short one.
func TestCheckIDAgreesWithGoNostr(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	for range 20000 {
		ev := randomEvent(rng)
		if got, want := serializeEvent(nil, ev), ev.Serialize(); !bytes.Equal(got, want) {
			t.Fatalf("event %#v\nserialized %q\ngo-nostr   %q", ev, got, want)
		}
		ev.ID = ev.GetID()
		switch rng.IntN(5) {
		case 0:
			ev.ID = ev.ID[:63] + "0"
		case 1:
			ev.ID = ev.ID[:rng.IntN(64)]
		case 2:
			b := []byte(ev.ID)
			b[rng.IntN(64)] ^= 0x20 // upper case, or not hex
			ev.ID = string(b)
		}
		if got, want := checkID(ev), ev.CheckID(); got != want {
			t.Fatalf("event %#v: checkID %v, CheckID %v", ev, got, want)
		}
	}
}

// FuzzCheckID compares the serialization with go-nostr's on fuzzed text.
func FuzzCheckID(f *testing.F) {
	f.Add("pk", "content \"x\" \\ \n\t\x01\x1f", "e", "\x7f\xff")
	f.Fuzz(func(t *testing.T, pk, content, tag, value string) {
		ev := &nostr.Event{PubKey: pk, CreatedAt: 1700000000, Kind: 1, Content: content, Tags: nostr.Tags{{tag, value}, {value}}}
		if got, want := serializeEvent(nil, ev), ev.Serialize(); !bytes.Equal(got, want) {
			t.Fatalf("serialized %q\ngo-nostr   %q", got, want)
		}
		ev.ID = ev.GetID()
		if !checkID(ev) {
			t.Fatal("the right id refused")
		}
	})
}

// BenchmarkCheckID: the id check of NIP-34-shaped signed events (a third
// patches with a 2 kB diff, the rest short comments), go-nostr's CheckID
// against checkID.
func BenchmarkCheckID(b *testing.B) {
	evs := benchEvents(b, 300)
	run := func(check func(*nostr.Event) bool) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !check(evs[i%len(evs)]) {
					b.Fatal("id refused")
				}
				i++
			}
		}
	}
	b.Run("go-nostr", run((*nostr.Event).CheckID))
	b.Run("pooled", run(checkID))
}
