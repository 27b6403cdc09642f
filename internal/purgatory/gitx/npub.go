package gitx

import (
	"fmt"

	"github.com/nbd-wtf/go-nostr/nip19"
)

// Npub encodes a 64-char hex public key as NIP-19 "npub1…" (bech32).
func Npub(pubHex string) (string, error) {
	if !ValidPubKey(pubHex) {
		return "", fmt.Errorf("%w: pubkey %q", ErrInvalid, pubHex)
	}
	return nip19.EncodePublicKey(pubHex)
}
