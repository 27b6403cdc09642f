package neg

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMessagesMatchVectorOneSided covers the server's id-list answers cut
// by the frame limit: a client with nothing (or everything) against a
// server with everything (or nothing).
func TestMessagesMatchVectorOneSided(t *testing.T) {
	for _, n := range []int{31, 32, 3000, 10_000} {
		for _, limit := range []int{0, 4096, 60_000} {
			for _, empty := range []string{"client", "server"} {
				t.Run(fmt.Sprintf("n=%d/limit=%d/empty=%s", n, limit, empty), func(t *testing.T) {
					d := makeDataset(uint64(n), n, 0)
					client, server := []Item(nil), d.server
					if empty == "server" {
						client, server = d.client, nil
					}
					ours := lockstep(t, implOurs, ourStorage(client), ourStorage(server), limit, limit)
					vec := lockstep(t, implGoNostr, vectorStorage(client), vectorStorage(server), limit, limit)
					if !slices.Equal(ours.msgs, vec.msgs) {
						t.Fatalf("%d messages from our engine, %d from go-nostr's, or their contents differ", len(ours.msgs), len(vec.msgs))
					}
					if !slices.Equal(ours.need, vec.need) || !slices.Equal(ours.have, vec.have) {
						t.Fatalf("need/have %d/%d, go-nostr %d/%d", len(ours.need), len(ours.have), len(vec.need), len(vec.have))
					}
					if got := len(ours.need) + len(ours.have); got != n {
						t.Fatalf("%d ids found, want %d", got, n)
					}
				})
			}
		}
	}
}

func TestEngineOptions(t *testing.T) {
	if _, err := NewClient(nil, 100, 0); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("frame limit 100: err = %v, want ErrInvalidOptions", err)
	}
	e, err := NewClient(nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Initiate(); got != "6100000200" {
		t.Errorf("empty client's first message = %s, want 6100000200", got)
	}
}

func TestEngineMaxIDs(t *testing.T) {
	d := makeDataset(3, 2000, 1)
	c, _ := NewClient(ourStorage(d.client), 0, 100)
	s, _ := NewServer(ourStorage(d.server), 0)
	msg := c.Initiate()
	for range 20 {
		reply, err := s.Reconcile(msg)
		if err != nil {
			t.Fatal(err)
		}
		msg, err = c.Reconcile(reply)
		if errors.Is(err, ErrLimit) {
			return
		}
		if err != nil || msg == "" {
			t.Fatalf("err = %v, done = %t; want ErrLimit", err, msg == "")
		}
	}
	t.Fatal("no ErrLimit after 20 rounds")
}

// TestEngineServerOtherVersion: a server answers another protocol version
// with its own version byte; a client refuses it.
func TestEngineServerOtherVersion(t *testing.T) {
	s, _ := NewServer(nil, 0)
	if out, err := s.Reconcile("62"); err != nil || out != "61" {
		t.Errorf("server: %q, %v; want \"61\"", out, err)
	}
	c, _ := NewClient(nil, 0, 0)
	if _, err := c.Reconcile("62"); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("client: err = %v, want ErrInvalidMessage", err)
	}
}

func TestHexRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 70 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		enc := encodeHex(b)
		if want := hex.EncodeToString(b); enc != want {
			t.Fatalf("encodeHex(%x) = %s", b, enc)
		}
		if dec, err := decodeHex(strings.ToUpper(enc)); err != nil || !slices.Equal(dec, b) {
			t.Fatalf("decodeHex(upper %s) = %x, %v", enc, dec, err)
		}
		// Every non-hex byte value, at every position, is refused.
		for pos := 0; pos < len(enc); pos += 1 + pos/3 {
			for c := range 256 {
				if _, ok := hexDigit(byte(c)); ok {
					continue
				}
				bad := []byte(enc)
				bad[pos] = byte(c)
				if _, err := decodeHex(string(bad)); err == nil {
					t.Fatalf("decodeHex accepted byte 0x%02x at %d of %q", c, pos, bad)
				}
			}
		}
	}
}

func TestDecodeHex(t *testing.T) {
	for _, s := range []string{"", "00", "0aFf", strings.Repeat("0123456789abcdefABCDEF", 9)} {
		got, err := decodeHex(s)
		want, _ := hex.DecodeString(s)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("decodeHex(%q) = %x, %v; want %x", s, got, err, want)
		}
		if enc := encodeHex(want); enc != strings.ToLower(s) {
			t.Errorf("encodeHex(%x) = %q, want %q", want, enc, strings.ToLower(s))
		}
	}
	for _, bad := range []string{"0", "0g", "g0", strings.Repeat("00", 20) + "0x", strings.Repeat("00", 7) + " 0"} {
		if _, err := decodeHex(bad); err == nil {
			t.Errorf("decodeHex(%q) accepted", bad)
		}
	}
}

// FuzzEngine feeds arbitrary bytes to both roles of the engine: it must
// answer or fail with ErrInvalidMessage (or ErrLimit), never panic, and a
// server's answer must itself be a well-formed message.
func FuzzEngine(f *testing.F) {
	d := makeDataset(12, 300, 0.2)
	c, _ := NewClient(ourStorage(d.client), 0, 0)
	start := c.Initiate()
	s, _ := NewServer(ourStorage(d.server), 0)
	reply, _ := s.Reconcile(start)
	for _, m := range []string{start, reply, "6101ffffffffffffffffff7f0000", "61", "6100000000", "61010202", strings.ToUpper(reply), "61zz"} {
		f.Add(m)
	}
	small := makeDataset(13, 100, 0.3)
	f.Fuzz(func(t *testing.T, msg string) {
		for _, client := range []bool{true, false} {
			var e *Engine
			if client {
				e, _ = NewClient(ourStorage(small.client), 4096, 10_000)
				e.Initiate()
			} else {
				e, _ = NewServer(ourStorage(small.server), 4096)
			}
			out, err := e.Reconcile(msg)
			if err != nil {
				if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrLimit) {
					t.Fatalf("client=%t: error %v wraps neither ErrInvalidMessage nor ErrLimit", client, err)
				}
				continue
			}
			if out == "" {
				continue
			}
			if len(out)/2 > 4096 {
				t.Fatalf("client=%t: answer of %d bytes over the 4096 limit", client, len(out)/2)
			}
			// A fresh server reads the whole message: it must not find
			// our answer malformed.
			fresh, _ := NewServer(NewStorage(nil), 0)
			if _, err := fresh.Reconcile(out); errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("client=%t: our answer %s is not well-formed: %v", client, out, err)
			}
		}
	})
}

func TestDedupIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var ids [][idSize]byte
	for range 1000 {
		var id [idSize]byte
		for j := range id {
			id[j] = byte(r.Uint32())
		}
		ids = append(ids, id)
	}
	// Same first 8 bytes, different rest: distinct ids.
	twin := ids[0]
	twin[31] ^= 1
	in := append(slices.Clone(ids), ids[3], ids[999], twin, ids[0], twin)
	got := dedupIDs(in)
	want := append(slices.Clone(ids), twin)
	if !slices.Equal(got, want) {
		t.Fatalf("dedupIDs: %d ids, want %d (first occurrences in order)", len(got), len(want))
	}
}

// TestDedupIDsCollidingPrefixes: ids a hostile relay crafts to share their
// first 8 bytes are deduplicated in linear time (a fixed hash of those bytes
// made this quadratic: 80,000 such ids took 10 s).
func TestDedupIDsCollidingPrefixes(t *testing.T) {
	ids := make([][idSize]byte, 200_000)
	for i := range ids {
		ids[i][8], ids[i][9], ids[i][10] = byte(i), byte(i>>8), byte(i>>16)
	}
	start := time.Now()
	got := dedupIDs(append(ids, ids[:1000]...))
	if len(got) != len(ids) {
		t.Fatalf("%d ids after dedup, want %d", len(got), len(ids))
	}
	t.Logf("200,000 colliding-prefix ids deduplicated in %s", time.Since(start))
}

// TestNegativeTimestampsConverge: items with a negative created_at are left
// out of the storage (NIP-77 timestamps are unsigned); reconciliation of the
// rest converges.
func TestNegativeTimestampsConverge(t *testing.T) {
	d := makeDataset(8, 2000, 0.2)
	shift := func(items []Item) []Item {
		out := slices.Clone(items)
		for i := range out {
			out[i].CreatedAt -= 1_700_000_000 + 250 // a quarter of them negative
		}
		return out
	}
	c, s := NewStorage(shift(d.client)), NewStorage(shift(d.server))
	for _, st := range []*Storage{c, s} {
		if st.Size() == 0 || st.Item(0).CreatedAt < 0 {
			t.Fatalf("storage keeps negative timestamps (size %d)", st.Size())
		}
	}
	r := lockstep(t, implOurs, c, s, 4096, 4096)
	if len(r.msgs) > 200 {
		t.Fatalf("%d messages: no convergence", len(r.msgs))
	}
}
