package ingest

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// BenchmarkVerifySignature is the cost of one check the sidecar still
// makes (purgatory, RejectedIndex, a second different copy), with this
// build's SignatureBackend: run it plain and with -tags libsecp256k1.
func BenchmarkVerifySignature(b *testing.B) {
	ev := signed(b, nostr.Event{Kind: 1617, CreatedAt: 1700000000, Content: strings.Repeat("+ line of a diff\n", 120),
		Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}}})
	b.Run(strings.Fields(SignatureBackend)[0], func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !verifySig(ev) {
				b.Fatal("does not verify")
			}
		}
	})
}

func TestSignatureBackendVerifies(t *testing.T) {
	ev := signed(t, nostr.Event{Kind: 1, CreatedAt: 1700000000, Content: "x"})
	if !verifySig(ev) {
		t.Fatalf("%s: a signed event does not verify", SignatureBackend)
	}
	bad := *ev
	bad.Sig = strings.Repeat("0", 128)
	if verifySig(&bad) {
		t.Fatalf("%s: a forged signature verifies", SignatureBackend)
	}
}
