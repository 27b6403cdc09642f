// Package publish sends events into the own relay: EVENTs are pipelined with
// a bounded window of outstanding OKs, OK answers are mapped to outcomes
// (accepted, duplicate, rejected), rate limits and AUTH challenges are handled
// with backoff, pacing and NIP-42, and nothing handed to the publisher is lost
// when the own relay restarts: unacknowledged events are sent again after the
// publisher reconnects.
//
// # Window size
//
// BenchmarkPublish measures events/s into an in-process relay and into a
// fake relay answering one round trip later, for windows from 1 to 500
// (figures in BENCHMARKS.md, "Publisher window"). Into a local relay its
// signature check bounds throughput and the window hardly matters: the
// spread between runs is larger than the differences between windows. A
// relay one round trip away (a container bridge, another host) needs the
// window: 200 measured fastest there, far ahead of window 1. The default is
// 200; it also bounds what a restart or the first rate limit costs (at most
// one window of EVENTs sent again).
package publish
