package ingest

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// The own relay broadcasts every regular event it stores to its live
// subscriptions, the sidecar's self-subscription among them: each root the
// sidecar publishes comes back to it whole (a patch with its diff) while
// the OK that settles it is on its way. Such an echo need not be decoded:
// the copy it carries is the one in flight, which the handler holds. It is
// skipped (SkipEcho), and Settle handles it, with the copy in flight, as
// the echo would have been handled, before the OK's own outcome: the
// events were identical, and the echo came first.

// SkipEcho tells whether obj, an event object the own relay's live
// self-subscription delivers (relay.Conn.SubscribeSkipping), is the copy
// of a regular event the handler has in flight to the own relay (the same
// id and signature) and its outcome is not being settled: Settle will
// then handle it as OnOwnRelayLive would, and pass it to the function
// OnEcho set. Called from a relay's reader goroutine.
func (h *Handler) SkipEcho(obj []byte) bool {
	idHex, sig, kind, ok := relay.EventKeys(obj)
	if !ok || !nostr.IsRegularKind(kind) {
		return false
	}
	id, ok := neg.DecodeID(string(idHex))
	if !ok || !h.flying.echo(id, sig) {
		return false
	}
	h.m.echoesSkipped.Inc()
	return true
}

// OnEcho sets what receives the events whose echo SkipEcho skipped, once
// their flight settles (after the handler has recorded them as
// OnOwnRelayLive does): the self-subscription's consumer, which would have
// read them from the echo. fn is called from the publisher's goroutine and
// must not block. Call it once, before Run.
func (h *Handler) OnEcho(fn func(*nostr.Event)) { h.echoed = fn }

// replayEcho handles ev, whose echo was skipped, as its echo.
func (h *Handler) replayEcho(ev *nostr.Event) {
	h.onOwnRelay(ev, true)
	if h.echoed != nil {
		h.echoed(ev)
	}
}
