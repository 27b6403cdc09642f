// Package signed builds signed NIP-34 events for tests and benchmarks:
// keys, every kind the sidecar syncs, and deterministic universes of
// repositories spread over relays.
//
// Key builds signed events of every NIP-34 kind (Announcement, State, Patch,
// PatchReply, PR, PRUpdate, Issue, Status, CIRun), NIP-22 comments, kind 1 replies
// and quotes, with Options for created_at, tags and content size.
// NewUniverse generates a deterministic set of repositories spread over
// relays. Signing costs about 1.5 ms per event under -race (20× more than
// without): keep test corpora to hundreds of events, sign batches with
// SignAll, or use Corpus, 1200 pre-signed notes embedded in the package.
package signed
