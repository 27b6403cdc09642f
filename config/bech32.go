package config

import (
	"errors"
	"strings"
)

// A minimal BIP-173 bech32 decoder, enough for nsec1… keys. (go-nostr's
// nip19 pulls in a module this repository does not otherwise need.)

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var errBech32 = errors.New("invalid bech32 string")

func bech32Polymod(values []byte) uint32 {
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

func bech32HRPExpand(hrp string) []byte {
	out := make([]byte, 0, len(hrp)*2+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

// decodeBech32 decodes s, checks its human-readable part is hrp and its
// checksum, and returns the 8-bit payload.
func decodeBech32(hrp, s string) ([]byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return nil, errBech32
	}
	s = strings.ToLower(s)
	pos := strings.LastIndexByte(s, '1')
	if pos < 1 || pos+7 > len(s) || s[:pos] != hrp {
		return nil, errBech32
	}
	data := make([]byte, 0, len(s)-pos-1)
	for i := pos + 1; i < len(s); i++ {
		c := strings.IndexByte(bech32Charset, s[i])
		if c < 0 {
			return nil, errBech32
		}
		data = append(data, byte(c))
	}
	if bech32Polymod(append(bech32HRPExpand(hrp), data...)) != 1 {
		return nil, errBech32
	}
	data = data[:len(data)-6]
	// Regroup 5-bit words into bytes.
	var acc uint32
	var bits uint
	out := make([]byte, 0, len(data)*5/8)
	for _, v := range data {
		acc = acc<<5 | uint32(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&((1<<bits)-1) != 0 {
		return nil, errBech32
	}
	return out, nil
}
