// Package historic runs the historic syncs of remote relays: it asks a
// relay for what the own relay lacks, by NIP-77 negentropy (NegSyncer,
// reconciling against a LocalSet: ownset.OwnLocalSet, filled from the
// own relay) or by paged REQs (Pager), and hands every event it fetches on
// through an Emit.
//
// Ownership: the syncers hold no sync index. Each job runs on a goroutine
// of its own that the engine started; the state they share across jobs
// (the fetch claims, the event budget, NIP-77 support, truncation and
// read-auth records) is guarded by its own
// mutex. A relay's SlotLender is set by the engine's Run goroutine (Lend)
// and borrowed from by that relay's jobs.
//
// Files: pager.go (REQ paging, resuming a sweep where the last one of its
// filter on its relay got to: sweepcursor), negsync.go, negsharedfetch.go and negnewestfirst.go
// (NIP-77 reconciliation and fetch by id), fetchclaims.go (one relay
// fetches each missing id at a time), truncation.go (relays that cap
// results), eventbudget.go (the events and bytes held at once),
// readauth.go (NIP-42 for reading), slotlender.go (spare
// subscription slots), msglimits.go (filters and frames within a relay's
// limits), filtermatch.go (matching events against many filters).
package historic
