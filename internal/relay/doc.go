// Package relay is the sidecar's own WebSocket client for one Nostr relay:
// concurrent subscriptions, publishing with OK results, NIP-42 AUTH, NIP-45
// COUNT and NIP-77 passthrough, with bounded frames, read deadlines and a
// clean Close.
package relay
