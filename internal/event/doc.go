// Package event owns the project's event identity and the incoming event
// as a relay's read loop decodes it: the 32-byte id (ID) with its hex
// decoding and encoding, and Incoming, which carries an event with its
// decoded id, the bytes it arrived in and where it came from, so that the
// later stages (ingest, purgatory, the local index, negentropy) take the
// id decoded once instead of decoding the hex again. It also holds the
// queue through which the purgatory hands the events it releases back to
// ingest (Releases).
//
// It is a leaf: it imports go-nostr and nothing of this project.
package event
