package relay

import (
	"context"
	"fmt"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
)

// NegReply is one message a relay sent for a negentropy session (NIP-77).
// Exactly one field is set.
type NegReply struct {
	// Msg is the hex payload of a NEG-MSG.
	Msg string
	// Err is the reason of a NEG-ERR (or khatru's non-standard NEG-ERROR).
	Err string
	// Notice is a NOTICE the relay sent while the session was open; relays
	// that do not speak NIP-77 answer NEG-OPEN with a NOTICE.
	Notice string
}

// NegOpen registers a negentropy session and sends NEG-OPEN. The returned
// channel receives the relay's NEG-MSG / NEG-ERR for subID and any NOTICE it
// sends meanwhile; it is closed by NegClose or when the connection ends.
// Options.BeforeRequest, when set, runs first.
func (c *Conn) NegOpen(ctx context.Context, subID string, filter nostr.Filter, msgHex string) (<-chan NegReply, error) {
	if err := c.beforeRequest(ctx); err != nil {
		return nil, err
	}
	ch := make(chan NegReply, 8)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if !c.negs.add(subID, ch) {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateSubscription, subID)
	}
	c.mu.Unlock()
	if err := c.write(ctx, negOpenJSON(subID, filter, msgHex)); err != nil {
		locked(&c.mu, func() { c.negs.drop(subID) })
		return nil, err
	}
	return ch, nil
}

// negOpenJSON is nip77.OpenEnvelope's JSON, in one slice of its size: the
// envelope guesses 500 bytes for the filter and regrows, and a Layer 3
// filter of 100 ids is 7 kB (NEG-OPEN is a large share of what a first
// sync sends, so the regrowth was a large share of what it allocated).
func negOpenJSON(subID string, filter nostr.Filter, msgHex string) []byte {
	a := make([]byte, 0, len(`["NEG-OPEN","",,""]`)+len(subID)+FilterJSONSize(filter)+len(msgHex))
	a = append(append(append(a, `["NEG-OPEN","`...), subID...), `",`...)
	a = appendFilter(a, filter)
	return append(append(append(a, `,"`...), msgHex...), `"]`...)
}

// NegMsg sends a NEG-MSG for an open session.
func (c *Conn) NegMsg(ctx context.Context, subID string, msgHex string) error {
	msg, err := nip77.MessageEnvelope{SubscriptionID: subID, Message: msgHex}.MarshalJSON()
	if err != nil {
		return err
	}
	return c.write(ctx, msg)
}

// NegClose sends NEG-CLOSE (best effort) and unregisters the session.
func (c *Conn) NegClose(subID string) {
	var open bool
	locked(&c.mu, func() { open = c.negs.drop(subID) })
	if open && c.ctx.Err() == nil {
		msg, _ := nip77.CloseEnvelope{SubscriptionID: subID}.MarshalJSON()
		_ = c.write(context.Background(), msg)
	}
}

// negSessions are the open NIP-77 sessions: each session's reply channel
// by its subscription id. Conn.mu guards it: every method is called with
// it held. Only its methods close a session's channel (dropped, flooded,
// or every one at teardown), each once, as they delete it; NegOpen
// checks the connection's context under the lock before adding, so no
// session is added after teardown ended them all.
type negSessions map[string]chan NegReply

// add registers a session; false when subID is open already.
func (n negSessions) add(subID string, ch chan NegReply) bool {
	if _, ok := n[subID]; ok {
		return false
	}
	n[subID] = ch
	return true
}

// drop unregisters a session and closes its channel; false when it was
// not open.
func (n negSessions) drop(subID string) bool {
	ch, ok := n[subID]
	if ok {
		delete(n, subID)
		close(ch)
	}
	return ok
}

// dropAll ends every session (the connection ended).
func (n negSessions) dropAll() {
	for id := range n {
		n.drop(id)
	}
}

// deliverMsg is deliver of a NEG-MSG split from the read buffer
// (negMsgFrame): the message is copied only for an open session.
func (n negSessions) deliverMsg(subID, msg []byte) {
	if _, open := n[string(subID)]; open {
		n.deliver(string(subID), NegReply{Msg: string(msg)})
	}
}

// deliverNotice hands a NOTICE to every open session.
func (n negSessions) deliverNotice(text string) {
	for id := range n {
		n.deliver(id, NegReply{Notice: text})
	}
}

// deliver hands r to the session subID, if it is open; it never waits.
func (n negSessions) deliver(subID string, r NegReply) {
	ch, ok := n[subID]
	if !ok {
		return
	}
	select {
	case ch <- r:
	default:
		// A session reads one reply per message it sends; a relay that
		// floods replies has broken the protocol. End that session.
		delete(n, subID)
		close(ch)
	}
}
