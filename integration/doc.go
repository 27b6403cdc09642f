// Package integration holds end-to-end scenarios that run the sidecar's
// engine against real khatru relays and real git servers on 127.0.0.1.
package integration
