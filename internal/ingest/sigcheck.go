//go:build !libsecp256k1

package ingest

// SignatureBackend names the code that checks the signatures the sidecar
// still verifies: pure Go (btcec) in a plain build; build with
// `-tags libsecp256k1` (cgo) for bitcoin-core's libsecp256k1 through
// go-nostr.
const SignatureBackend = "btcec (pure Go)"
