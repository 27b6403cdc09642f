package event

import (
	"context"
	"errors"

	"github.com/nbd-wtf/go-nostr"
)

// Errors a holder of events (the purgatory, which holds states and PRs
// until their git data is here) refuses an event with, for the stage that
// handed it the event (ingest) to act on. The holder wraps them.
var (
	// ErrNotHosted: no accepted announcement of a repository the event
	// belongs to lists this service (GRASP-01); the event is not held.
	ErrNotHosted = errors.New("purgatory: repository not hosted")
	// ErrFull: the holder holds as many events as it may.
	ErrFull = errors.New("purgatory: full")
)

// Release is an event a holder released, waiting to be published to the
// own relay; Done answers the holder.
type Release struct {
	Event *nostr.Event
	ctx   context.Context
	done  chan error
}

// Context is the holder's context for the publish: when it ends the
// holder stops waiting for the answer.
func (r Release) Context() context.Context { return r.ctx }

// Done answers the holder: nil when the own relay has the event (accepted
// or a duplicate), else why not. It is called exactly once.
func (r Release) Done(err error) { r.done <- err }

// Releases is the queue through which a holder hands the events it
// releases to the stage that publishes them (ingest reads it): the holder
// never calls up into that stage. The wiring makes one and gives it to
// both.
type Releases struct {
	ch chan Release
}

// NewReleases returns an empty queue: a release waits until the reading
// stage takes it.
func NewReleases() *Releases { return &Releases{ch: make(chan Release)} }

// Publish queues ev and waits for the reading stage's answer (Release.Done):
// nil when the own relay has the event, else why not. It returns ctx's
// error when ctx ends before the stage took the event; after that, the
// stage publishes under ctx and answers when the publish ends.
func (q *Releases) Publish(ctx context.Context, ev *nostr.Event) error {
	done := make(chan error, 1)
	select {
	case q.ch <- Release{Event: ev, ctx: ctx, done: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-done
}

// C is the receiving end, for the stage that publishes the releases.
func (q *Releases) C() <-chan Release { return q.ch }
