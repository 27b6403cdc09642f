// Package persisted holds the records of the sync state a state store keeps
// across restarts: a remote relay's progress (Relay), the repository index
// (Repos, Head), a remote relay's health (Health), an event held in
// purgatory (Held) and the rejected index (Rejected). The engines produce
// and consume them; the store only writes and reads them, so it needs none
// of the engines.
//
// They are plain data importing nothing of grasp-sync. Their JSON is the
// store's on-disk format: a field's tag never changes, or stores written
// before no longer load.
package persisted
