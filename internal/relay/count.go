package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/nbd-wtf/go-nostr"
	"github.com/tidwall/gjson"
)

// ErrCountClosed: the relay refused a COUNT (NIP-45) with CLOSED, as a
// relay that does not count does.
var ErrCountClosed = errors.New("relay closed the COUNT")

// ErrCountUnanswered: the context of a COUNT ended after it was sent,
// before its answer (wrapping the context's error).
var ErrCountUnanswered = errors.New("COUNT sent, no answer yet")

// CountResult is a relay's answer to one COUNT (NIP-45).
type CountResult struct {
	Count int
	// Approximate: the relay said the count is an estimate.
	Approximate bool
}

// Count asks the relay how many stored events match f (NIP-45): COUNT
// with the given id, answered by a COUNT frame or refused by CLOSED
// (ErrCountClosed). It waits until ctx ends (the caller bounds it;
// ErrCountUnanswered once the COUNT was sent) or the connection ends
// (ErrClosed or its cause). Options.BeforeRequest, when
// set, runs first, as for a REQ.
func (c *Conn) Count(ctx context.Context, id string, f nostr.Filter) (CountResult, error) {
	if err := c.beforeRequest(ctx); err != nil {
		return CountResult{}, err
	}
	sub := &Subscription{ID: id, counting: true, conn: c, ch: make(chan SubMsg, 1), done: make(chan struct{})}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return CountResult{}, ErrClosed
	}
	if !c.subs.add(sub) {
		c.mu.Unlock()
		return CountResult{}, fmt.Errorf("%w: %s", ErrDuplicateSubscription, id)
	}
	c.mu.Unlock()
	defer sub.unregister(false) // a COUNT ends with its answer: no CLOSE
	msg := []byte(`["COUNT","` + id + `",`)
	msg = append(appendFilter(msg, f), ']')
	if err := c.write(ctx, msg); err != nil {
		return CountResult{}, err
	}
	select {
	case <-ctx.Done():
		return CountResult{}, fmt.Errorf("%w: %w", ErrCountUnanswered, ctx.Err())
	case m, ok := <-sub.ch:
		switch {
		case !ok && c.Err() != nil:
			return CountResult{}, c.Err()
		case !ok:
			return CountResult{}, ErrClosed
		case m.Type == MsgClosed:
			return CountResult{}, fmt.Errorf("%w: %s", ErrCountClosed, m.Reason)
		case m.Type == MsgCount:
			return CountResult{Count: m.Size, Approximate: m.approximate}, nil
		}
		return CountResult{}, fmt.Errorf("relay answered COUNT %s with message type %d", id, m.Type)
	}
}

// handleCount delivers a COUNT frame (["COUNT", id, {"count": n}]) to the
// Count waiting for it; a frame without a whole, non-negative count, or
// naming a REQ's subscription, is dropped (the Count times out).
func (c *Conn) handleCount(msg string) {
	arr := gjson.Parse(msg).Array()
	if len(arr) < 3 || arr[1].Type != gjson.String || !arr[2].IsObject() {
		return
	}
	n := arr[2].Get("count")
	if n.Type != gjson.Number || n.Num < 0 || n.Num != float64(int(n.Num)) {
		return
	}
	c.mu.Lock()
	sub := c.subs[arr[1].Str]
	c.mu.Unlock()
	if sub != nil && sub.counting {
		sub.deliver(SubMsg{Type: MsgCount, Size: int(n.Num), approximate: arr[2].Get("approximate").Bool()})
	}
}
