package neg

import (
	"testing"

	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
)

// crafted is the 14-byte message that makes go-nostr's decoder panic: a
// bound whose id length varint decodes to a huge (negative) int.
const crafted = "6101ffffffffffffffffff7f0000"

func TestCraftedMessagePanicsRawEngine(t *testing.T) {
	// Why our engine parses messages itself: the pinned go-nostr engine
	// panics on this one.
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
