//go:build !race

package bench

// raceEnabled is true when the tests run with the race detector.
const raceEnabled = false
