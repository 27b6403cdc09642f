package publish

import (
	"errors"
	"fmt"
)

// Outcome is what became of a submitted event.
type Outcome uint8

// Outcomes. Accepted and Duplicate mean the own relay has the event.
const (
	// Accepted: the relay answered OK true.
	Accepted Outcome = iota + 1
	// Duplicate: the relay already had the event (OK with a "duplicate:"
	// reason, true or false). It counts as present.
	Duplicate
	// Rejected: the relay answered OK false for a reason other than
	// duplicate, rate limiting or (with a signer) authentication.
	Rejected
	// Dropped: the publisher stopped before the relay acknowledged the
	// event; Result.Err says why. It happens only on shutdown.
	Dropped
	// Held: the relay answered OK true with a "purgatory:" reason (a
	// GRASP-01 relay): accepted but not served until the event's git data
	// arrives, and discarded after 30 minutes without it. It is not
	// present.
	Held
)

// String returns the outcome's name as used in metric labels.
func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case Rejected:
		return "rejected"
	case Dropped:
		return "dropped"
	case Held:
		return "held"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is the outcome of one submitted event.
type Result struct {
	// ID is the event id.
	ID      string
	Outcome Outcome
	// Reason is the relay's OK message (always set for Rejected).
	Reason string
	// Err is set for Dropped.
	Err error
	// Attempts is how many EVENT frames were sent for the event.
	Attempts int
}

// Present reports whether the own relay has the event.
func (r Result) Present() bool { return r.Outcome == Accepted || r.Outcome == Duplicate }

// ErrRejected is wrapped by Result.AsError for events the relay refused.
var ErrRejected = errors.New("rejected by the own relay")

// AsError suits callers that want an error: nil when the relay has the
// event, an error wrapping ErrRejected (with the relay's reason) when it
// refused it, and the error of a Dropped event.
func (r Result) AsError() error {
	switch r.Outcome {
	case Accepted, Duplicate, Held:
		return nil
	case Rejected:
		return fmt.Errorf("event %s: %w: %s", r.ID, ErrRejected, r.Reason)
	case Dropped:
		if r.Err != nil {
			return r.Err
		}
		return ErrStopped
	}
	return fmt.Errorf("event %s: unknown %s", r.ID, r.Outcome)
}
