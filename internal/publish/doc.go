// Package publish sends events into the own relay: EVENTs are pipelined with
// a bounded window of outstanding OKs, OK answers are mapped to outcomes
// (accepted, duplicate, rejected), rate limits and AUTH challenges are handled
// with backoff, pacing and NIP-42, and nothing handed to the publisher is lost
// when the own relay restarts: unacknowledged events are sent again after the
// publisher reconnects.
//
// # Window size
//
// BenchmarkPublish (go test -bench Publish -benchtime=5000x), events/s on the
// shared 2-core development machine at load average 20–24; medians of three
// runs (the 1-CPU row, GOMAXPROCS=1: means of two):
//
//	window                            1      16      64     200     500
//	khatru in-process, 2 CPUs      1173    1082    1040     706     713
//	khatru in-process, 1 CPU       1410    1830    1705    1562    1727
//	fake relay answering in 1ms     578    5274   10882   20761   10211
//
// Into a local khatru relay the relay's signature check (about 200–300
// CPU-µs per event for relay and publisher together) bounds throughput and
// the window hardly matters; the spread between runs (e.g. 1162–3455 for
// window 1) is larger than the differences between windows, and with two
// CPUs on an oversubscribed machine the relay's store lock convoys under
// many concurrent EVENTs. A relay one round trip away (1ms here: a docker
// bridge, another host) needs the window: 200 is the fastest there, 36 times
// window 1. The default is 200; it also bounds what a restart or the first
// rate limit costs (at most one window of EVENTs sent again).
package publish
