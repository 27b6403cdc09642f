package neg

import (
	"errors"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
)

// crafted is the 14-byte message that makes go-nostr's decoder panic: a
// bound whose id length varint decodes to a huge (negative) int.
const crafted = "6101ffffffffffffffffff7f0000"

func TestCraftedMessagePanicsRawEngine(t *testing.T) {
	// Why ValidateMessage exists: the pinned engine alone panics.
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		n := negentropy.New(NewStorage(nil), 0)
		n.Start()
		_, _ = n.Reconcile(crafted)
		return false
	}()
	if !panicked {
		// The hostile-relay tests rely on this message being dangerous.
		t.Fatal("go-nostr's engine no longer panics on the crafted message: pick a new hostile vector for the tests")
	}
}

func TestValidateMessage(t *testing.T) {
	d := makeDataset(11, 500, 0.1)
	client := negentropy.New(ourStorage(d.client), 0)
	start := client.Start()
	server := negentropy.New(ourStorage(d.server), 0)
	reply, err := server.Reconcile(start)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msg  string
		max  int
		ok   bool
	}{
		{"initial message", start, 0, true},
		{"server reply", reply, 0, true},
		{"upper case accepted", strings.ToUpper(reply), 0, true},
		{"version only", "61", 0, true},
		{"empty", "", 0, false},
		{"crafted 14 bytes", crafted, 0, false},
		{"odd length", "610", 0, false},
		{"non-hex", "61zz", 0, false},
		{"non-ascii", "61\u00e9", 0, false},
		{"wrong version", "62", 0, false},
		{"over the size bound", reply, len(reply) - 2, false},
		{"truncated fingerprint", "6100" + "00" + "01" + "abcd", 0, false},
		{"unknown mode 3", "6100" + "00" + "03", 0, false},
		{"mode 256 wraps to skip in a uint8", "6100" + "00" + "8200", 0, false},
		{"bound id longer than 32 bytes", "6101" + "21" + strings.Repeat("00", 33) + "00", 0, false},
		{"id list longer than the message", "6100" + "00" + "02" + "02" + strings.Repeat("ab", 32), 0, false},
		{"varint longer than 9 bytes", "61" + strings.Repeat("ff", 9) + "7f" + "0000", 0, false},
		{"timestamp overflow after infinity", "6100" + "00" + "00" + "02" + "00" + "00", 0, false},
		{"skip to infinity", "6100" + "00" + "00", 0, true},
		{"id list of one", "6100" + "00" + "02" + "01" + strings.Repeat("ab", 32), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ValidateMessage(tt.msg, tt.max)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateMessage: %v", err)
				}
				if got != strings.ToLower(tt.msg) {
					t.Errorf("normalized message differs from the lower-case input")
				}
				return
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("err = %v, want ErrInvalidMessage", err)
			}
		})
	}
}

// FuzzValidateMessage checks that every message ValidateMessage accepts can
// be fed to go-nostr's engine, as client and as server, without a panic.
func FuzzValidateMessage(f *testing.F) {
	d := makeDataset(12, 300, 0.2)
	client := negentropy.New(ourStorage(d.client), 0)
	start := client.Start()
	server := negentropy.New(ourStorage(d.server), 0)
	reply, _ := server.Reconcile(start)
	for _, s := range []string{start, reply, crafted, "61", "6100000000", "610102" + strings.Repeat("00", 40)} {
		f.Add(s)
	}
	small := makeDataset(13, 100, 0)
	f.Fuzz(func(t *testing.T, msg string) {
		norm, err := ValidateMessage(msg, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error %v does not wrap ErrInvalidMessage", err)
			}
			return
		}
		for _, asClient := range []bool{true, false} {
			n := negentropy.New(ourStorage(small.client), 4096)
			if asClient {
				n.Start()
				go func() { // the client engine writes to these synchronously
					for range n.Haves {
					}
				}()
				go func() {
					for range n.HaveNots {
					}
				}()
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("engine (client=%v) panicked on a validated message %q: %v", asClient, norm, p)
					}
				}()
				out, err := n.Reconcile(norm)
				if asClient && err == nil && out == "" {
					return // the engine closed its channels
				}
				if asClient {
					close(n.Haves)
					close(n.HaveNots)
				}
			}()
		}
	})
}
