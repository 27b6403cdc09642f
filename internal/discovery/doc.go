// Package discovery is the own relay's side of sync and the single owner
// of which repositories are hosted: the self-subscription reads the own
// relay's announcements and root events into the repository index, with
// the orphan roots, the current announcements and states (heads), the
// roots not applied yet and the restart's catch-up with the own relay.
//
// Ownership: the engine's Run goroutine owns the index (Discovery.Repos)
// and every plain field; the self-subscriber, the initial fill and the
// catch-up run on discovery's goroutines and hand each batch to the Run
// goroutine as a message (Deps.Post), where ApplyBatch applies it. What
// those goroutines share is atomic or behind a mutex.
//
// Files: discovery.go (Discovery, Settings, Deps), selfsubscription.go,
// selfbatch.go (a batch applied to the index), repoheads.go,
// unappliedroots.go, owncatchup.go, persistrepos.go.
package discovery
