//go:build libsecp256k1

package ingest

// SignatureBackend names the code that checks the signatures the sidecar
// still verifies: bitcoin-core's libsecp256k1 (cgo, go-nostr's
// libsecp256k1 build tag).
const SignatureBackend = "libsecp256k1 (cgo)"
