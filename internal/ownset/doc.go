// Package ownset is our side of every NIP-77 reconciliation: OwnLocalSet,
// the negentropy local set backed by the LocalIndex and filled from the
// own relay, and its catch-up with the own relay after a restart.
//
// Ownership: fills and the catch-up are serialised by the set's mutex and
// run on the goroutines of the historic jobs (and the engine's catch-up
// goroutine) that ask for them; the LocalIndex guards itself. The hooks
// (Note, Fetched, Forget) are set when the engine is built and called on
// those goroutines.
//
// Files: localset.go (the set and its fills), catchup.go (CatchUp).
package ownset
