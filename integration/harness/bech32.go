package harness

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// bech32 encoding (BIP-173) for npub strings, so the harness does not need
// go-nostr's nip19 package (whose bech32 dependency is not in go.sum).

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		b := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (b>>uint(i))&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func bech32Encode(hrp string, data []byte) string {
	// regroup 8-bit bytes into 5-bit groups
	var conv []byte
	acc, bits := 0, 0
	for _, b := range data {
		acc = acc<<8 | int(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			conv = append(conv, byte(acc>>uint(bits)&31))
		}
	}
	if bits > 0 {
		conv = append(conv, byte(acc<<uint(5-bits)&31))
	}
	values := make([]byte, 0, 2*len(hrp)+1+len(conv)+6)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, conv...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(values) ^ 1
	var b strings.Builder
	b.WriteString(hrp)
	b.WriteByte('1')
	for _, v := range conv {
		b.WriteByte(bech32Charset[v])
	}
	for i := 0; i < 6; i++ {
		b.WriteByte(bech32Charset[(mod>>uint(5*(5-i)))&31])
	}
	return b.String()
}

// Npub returns the bech32 npub of a hex public key.
func Npub(pubkey string) (string, error) {
	raw, err := hex.DecodeString(pubkey)
	if err != nil || len(raw) != 32 {
		return "", fmt.Errorf("harness: invalid public key %q", pubkey)
	}
	return bech32Encode("npub", raw), nil
}
