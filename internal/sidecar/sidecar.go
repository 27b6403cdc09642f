// Package sidecar assembles the engine packages (relay connections, sync,
// health, purgatory, publisher) into one running process.
package sidecar
