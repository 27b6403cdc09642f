// Package repoindex holds the sync's indexes and the decision between
// them: the repository index (which repositories are hosted, the relays
// their announcements list and the root events that reference them:
// RepoSyncIndex), each relay's confirmed and pending items (RelayState,
// PendingBatch), compute_actions (what each relay is asked next), and the
// interned handle sets every index keeps its items in.
//
// Ownership: the index and its sets are plain values, not safe for
// concurrent use; the sync engine's Run goroutine owns every one of them
// and is the only one to read or change them. The interner behind the
// sets (Intern, NameOf, Lookup) is the one exception: it is shared by the
// process and safe on any goroutine.
//
// Files: index.go (RepoSyncIndex, Items, relay targets), relays.go (relay
// states, pending batches, compute_actions), announcement.go
// (what sync reads from a kind 30617 announcement), handleset.go (the
// handle sets), interner.go (the string table behind them).
package repoindex
