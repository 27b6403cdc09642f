package health

import "fmt"

// State is a relay's health. The numeric values are the ones exported by
// the ngit_sync_relay_status gauge.
type State int

// Health states; see the package documentation for their meaning.
const (
	Healthy      State = 1
	Disconnected State = 2
	Degraded     State = 3
	Dead         State = 4
	RateLimited  State = 5
)

// String returns the state's lower-case name as shown in /status.
func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Disconnected:
		return "disconnected"
	case Degraded:
		return "degraded"
	case Dead:
		return "dead"
	case RateLimited:
		return "rate_limited"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// MessageSource says which relay message a text passed to Observe came
// from.
type MessageSource int

// Sources of relay messages.
const (
	// SourceNotice is a ["NOTICE", text] message.
	SourceNotice MessageSource = iota + 1
	// SourceClosed is the reason of a ["CLOSED", subid, reason] message.
	SourceClosed
	// SourceOK is the reason of an ["OK", id, false, reason] message.
	SourceOK
	// SourceNegErr is the reason of a ["NEG-ERR", subid, reason] message.
	SourceNegErr
)

// String returns the message type as it appears on the wire.
func (s MessageSource) String() string {
	switch s {
	case SourceNotice:
		return "NOTICE"
	case SourceClosed:
		return "CLOSED"
	case SourceOK:
		return "OK"
	case SourceNegErr:
		return "NEG-ERR"
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Signal is what a relay message says about the relay's limits.
type Signal int

// Signals recognised in relay messages.
const (
	// SignalNone: nothing the Tracker acts on.
	SignalNone Signal = iota
	// SignalRateLimited: the relay asks us to slow down. Observe starts a
	// RateLimitCooldown; the caller should re-queue whatever was refused.
	SignalRateLimited
	// SignalTooManySubscriptions: the relay refused a subscription because
	// too many are open on this connection (e.g. strfry's "ERROR: too many
	// concurrent REQs"). Not a rate limit: Observe lowers the relay's
	// subscription budget and the caller should re-queue the REQ for when a
	// subscription closes.
	SignalTooManySubscriptions
	// SignalTooManyFilters: a REQ carried more filters than the relay
	// accepts. The caller should split it; the Tracker does not change state.
	SignalTooManyFilters
	// SignalTooManyTagValues: a filter carried more tag values than the
	// relay accepts (eventstore's "too many tag values", strfry's "too many
	// tags in filter"); the caller learns a smaller bound.
	SignalTooManyTagValues
)

// String names the signal.
func (s Signal) String() string {
	switch s {
	case SignalNone:
		return "none"
	case SignalRateLimited:
		return "rate_limited"
	case SignalTooManySubscriptions:
		return "too_many_subscriptions"
	case SignalTooManyFilters:
		return "too_many_filters"
	case SignalTooManyTagValues:
		return "too_many_tag_values"
	}
	return fmt.Sprintf("signal(%d)", int(s))
}
