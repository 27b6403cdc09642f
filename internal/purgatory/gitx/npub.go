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

// PubKeyFromNpub decodes the directory name of an owner, "npub1…", to its
// 64-char hex public key. Only the form Npub writes is accepted (lower
// case, valid checksum), so a repository has one path and one URL.
func PubKeyFromNpub(npub string) (string, error) {
	if len(npub) != 63 {
		return "", fmt.Errorf("%w: npub %q: length %d", ErrInvalid, npub, len(npub))
	}
	prefix, v, err := nip19.Decode(npub)
	if err != nil || prefix != "npub" {
		return "", fmt.Errorf("%w: npub %q", ErrInvalid, npub)
	}
	pub, ok := v.(string)
	if !ok || !ValidPubKey(pub) {
		return "", fmt.Errorf("%w: npub %q", ErrInvalid, npub)
	}
	if again, err := Npub(pub); err != nil || again != npub {
		return "", fmt.Errorf("%w: npub %q is not in canonical form", ErrInvalid, npub)
	}
	return pub, nil
}
