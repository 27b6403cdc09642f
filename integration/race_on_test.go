//go:build race

package integration

// raceEnabled: the race detector slows everything down several times.
const raceEnabled = true
