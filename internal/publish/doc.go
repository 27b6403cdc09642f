// Package publish sends events into the own relay: EVENTs are pipelined with
// a bounded window of outstanding OKs, OK answers are mapped to outcomes
// (accepted, duplicate, rejected), rate limits and AUTH challenges are handled
// with backoff and NIP-42, and nothing handed to the publisher is lost when
// the own relay restarts: unacknowledged events are sent again after the
// publisher reconnects.
package publish
