// Package reposync keeps the hosted repositories' events in sync: it reads
// from the own relay which repositories and root events it holds, tracks
// the relays they list, and runs live subscriptions and historic syncs
// (NIP-77 negentropy or paged REQ) against each, handing every event it
// receives to the ingest handler.
//
// One goroutine (Engine.Run) owns the indexes (RepoSyncIndex, per-relay
// state, pending batches) and receives every input as a message, so "is
// anything pending?" is a plain read. The files follow the engine's
// sections: discovery (the self-subscription's batches widen the
// RepoSyncIndex), lifecycle (connect, reconnect, teardown), live (live
// subscriptions, consolidation), historic (batches of Layer 2/3 filters),
// timers, status; negsync, ownset and pager are the historic syncers.
package reposync
