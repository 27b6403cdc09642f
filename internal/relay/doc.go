// Package relay is the sidecar's own WebSocket client for one Nostr relay:
// concurrent subscriptions, publishing with OK results, NIP-42 AUTH and NIP-77
// passthrough, with bounded frames, read deadlines and a clean Close.
package relay
