package gitx

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Npub encodes a 64-char hex public key as NIP-19 "npub1…" (bech32). It is
// implemented here because go-nostr's nip19 pulls in a module the build does
// not otherwise need.
func Npub(pubHex string) (string, error) {
	if !ValidPubKey(pubHex) {
		return "", fmt.Errorf("%w: pubkey %q", ErrInvalid, pubHex)
	}
	raw, _ := hex.DecodeString(pubHex)
	// Regroup 8-bit bytes into 5-bit groups, padding the tail.
	data := make([]byte, 0, (len(raw)*8+4)/5)
	acc, bits := 0, 0
	for _, b := range raw {
		acc = acc<<8 | int(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			data = append(data, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		data = append(data, byte(acc<<(5-bits))&31)
	}
	const hrp = "npub"
	values := make([]byte, 0, 2*len(hrp)+1+len(data)+6)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, data...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	pm := polymod(values) ^ 1
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	var sb strings.Builder
	sb.WriteString(hrp)
	sb.WriteByte('1')
	for _, d := range data {
		sb.WriteByte(charset[d])
	}
	for i := 0; i < 6; i++ {
		sb.WriteByte(charset[(pm>>uint(5*(5-i)))&31])
	}
	return sb.String(), nil
}

func polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>uint(i))&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}
