package relay

import (
	"errors"
	"fmt"
	"io"
	"testing"

	ws "github.com/coder/websocket"
)

// TestClosedInOrder: a close frame the relay sent while it goes on
// serving (normal closure, an internal error after a quota) is an
// orderly end, as a Conn's Err wraps it; a relay going away, refusing by
// policy, a message too big, "try again later", a cut connection and no
// error are not.
func TestClosedInOrder(t *testing.T) {
	closed := func(code ws.StatusCode) error {
		return fmt.Errorf("read: failed to get reader: %w", ws.CloseError{Code: code, Reason: "closing"})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{closed(ws.StatusNormalClosure), true},
		{closed(ws.StatusInternalError), true},
		{closed(ws.StatusGoingAway), false},
		{closed(ws.StatusPolicyViolation), false},
		{closed(ws.StatusMessageTooBig), false},
		{closed(ws.StatusTryAgainLater), false},
		{fmt.Errorf("read: failed to read frame header: %w", io.EOF), false},
		{errors.New("read: connection reset by peer"), false},
		{nil, false},
	} {
		if got := ClosedInOrder(tc.err); got != tc.want {
			t.Errorf("ClosedInOrder(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
