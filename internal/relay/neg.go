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
	if _, ok := c.negs[subID]; ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateSubscription, subID)
	}
	c.negs[subID] = ch
	c.mu.Unlock()
	if err := c.write(ctx, negOpenJSON(subID, filter, msgHex)); err != nil {
		c.dropNeg(subID)
		return nil, err
	}
	return ch, nil
}

// negOpenJSON is nip77.OpenEnvelope's JSON, in one slice of its size: the
// envelope guesses 500 bytes for the filter and regrows, and a Layer 3
// filter of 100 ids is 7 kB (NEG-OPEN was 233 MB of the large profile's
// messages; building them allocated 480 MB).
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
	if c.dropNeg(subID) && c.ctx.Err() == nil {
		msg, _ := nip77.CloseEnvelope{SubscriptionID: subID}.MarshalJSON()
		_ = c.write(context.Background(), msg)
	}
}

func (c *Conn) dropNeg(subID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.negs[subID]
	if ok {
		delete(c.negs, subID)
		close(ch)
	}
	return ok
}

// deliverNegMsg is deliverNeg of a NEG-MSG split from the read buffer
// (negMsgFrame): the message is copied only for an open session.
func (c *Conn) deliverNegMsg(subID, msg []byte) {
	c.mu.Lock()
	_, open := c.negs[string(subID)]
	c.mu.Unlock()
	if open {
		c.deliverNeg(string(subID), NegReply{Msg: string(msg)})
	}
}

func (c *Conn) deliverNeg(subID string, r NegReply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.negs[subID]
	if !ok {
		return
	}
	select {
	case ch <- r:
	default:
		// A session reads one reply per message it sends; a relay that
		// floods replies has broken the protocol. End that session.
		delete(c.negs, subID)
		close(ch)
	}
}
