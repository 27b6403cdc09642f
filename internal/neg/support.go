package neg

import "errors"

// SupportState is what a session's outcome says about a relay's NIP-77
// support.
type SupportState int

// Support states.
const (
	// SupportUnknown: the session ended before the relay showed either way
	// (cancelled, connection lost before any answer, invalid options).
	SupportUnknown SupportState = iota
	// Supported: the relay answered with NEG-MSG or NEG-ERR.
	Supported
	// NotSupported: the relay answered NEG-OPEN with a NOTICE or not at all.
	NotSupported
)

func (s SupportState) String() string {
	switch s {
	case Supported:
		return "supported"
	case NotSupported:
		return "unsupported"
	default:
		return "unknown"
	}
}

// Support classifies the error of Reconcile or ReconcileSplit so the caller
// can cache NIP-77 support per relay.
func Support(err error) SupportState {
	switch {
	case err == nil:
		return Supported
	case errors.Is(err, ErrUnsupported):
		return NotSupported
	case errors.Is(err, ErrBlocked), errors.Is(err, ErrRelay), errors.Is(err, ErrInvalidMessage),
		errors.Is(err, ErrLimit), errors.Is(err, ErrTimeout):
		// A timeout that is not ErrUnsupported came after the first answer.
		return Supported
	default:
		return SupportUnknown
	}
}
