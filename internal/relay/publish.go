package relay

import (
	"context"
	"fmt"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// Publish sends an EVENT and returns a channel that receives its OK (or the
// reason none arrived). The channel has room for the result, so a caller may
// stop reading.
func (c *Conn) Publish(ctx context.Context, ev *nostr.Event) <-chan OKResult {
	msg, err := eventMsg(ev)
	return c.sendAwaitingOK(ctx, ev.ID, msg, err)
}

// eventMsg is ev's EVENT message.
func eventMsg(ev *nostr.Event) ([]byte, error) {
	return nostr.EventEnvelope{Event: *ev}.MarshalJSON()
}

// eventMsgs are the buffers EVENT messages are built in: the websocket
// copies a message into its own buffer while writing it.
var eventMsgs = sync.Pool{New: func() any { return new([]byte) }}

// writeEvent writes ["EVENT",raw].
func (c *Conn) writeEvent(ctx context.Context, raw []byte) error {
	bp := eventMsgs.Get().(*[]byte)
	msg := append(append(append((*bp)[:0], `["EVENT",`...), raw...), ']')
	err := c.write(ctx, msg)
	if cap(msg) <= maxKeptReadBuffer {
		*bp = msg
		eventMsgs.Put(bp)
	}
	return err
}

// sendAwaitingOK registers a waiter for the OK of id, then writes msg (the
// EVENT or AUTH message; encErr its encoding error). The returned channel
// receives the OK, or why none will come.
func (c *Conn) sendAwaitingOK(ctx context.Context, id string, msg []byte, encErr error) chan OKResult {
	ch := make(chan OKResult, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		ch <- OKResult{Err: ErrClosed}
		return ch
	}
	c.oks.add(id, okWaiter{ch: ch})
	c.mu.Unlock()
	err := encErr
	if err == nil {
		err = c.write(ctx, msg)
	}
	if err != nil {
		c.resolveOK(id, ch, OKResult{Err: err})
	}
	return ch
}

// awaitOK waits for ch's result, or gives up on ctx (the waiter is then
// unregistered).
func (c *Conn) awaitOK(ctx context.Context, id string, ch chan OKResult) OKResult {
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		c.resolveOK(id, ch, OKResult{Err: ctx.Err()})
		return <-ch
	}
}

// PublishWait publishes ev and waits for its OK.
func (c *Conn) PublishWait(ctx context.Context, ev *nostr.Event) OKResult {
	msg, err := eventMsg(ev)
	return c.awaitOK(ctx, ev.ID, c.sendAwaitingOK(ctx, ev.ID, msg, err))
}

// resolveOK delivers r to one waiter (only) and unregisters it.
func (c *Conn) resolveOK(id string, ch chan OKResult, r OKResult) {
	c.mu.Lock()
	removed := c.oks.remove(id, okWaiter{ch: ch})
	c.mu.Unlock()
	if removed {
		ch <- r
	}
}

// Challenge is the last AUTH challenge the relay sent ("" if none).
func (c *Conn) Challenge() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.challenge
}

// Authenticate answers the relay's AUTH challenge (NIP-42) with an event
// signed by sign, and waits for the relay's OK. Options.BeforeRequest,
// when set, runs first.
func (c *Conn) Authenticate(ctx context.Context, sign func(*nostr.Event) error) error {
	challenge := c.Challenge()
	if challenge == "" {
		return ErrNoChallenge
	}
	if err := c.beforeRequest(ctx); err != nil {
		return err
	}
	ev := nostr.Event{
		Kind:      nostr.KindClientAuthentication,
		CreatedAt: nostr.Now(),
		Tags:      nostr.Tags{{"relay", c.url}, {"challenge", challenge}},
	}
	if err := sign(&ev); err != nil {
		return fmt.Errorf("sign AUTH event: %w", err)
	}
	msg, err := nostr.AuthEnvelope{Event: ev}.MarshalJSON()
	r := c.awaitOK(ctx, ev.ID, c.sendAwaitingOK(ctx, ev.ID, msg, err))
	if r.Err != nil {
		return r.Err
	}
	if !r.OK {
		return &AuthRefusedError{Reason: r.Reason}
	}
	return nil
}

// AuthRefusedError is Authenticate's error when the relay refused the AUTH
// event; errors.Is(err, ErrAuthRefused) holds for it.
type AuthRefusedError struct {
	// Reason is the message of the relay's OK false.
	Reason string
}

// Error is "relay refused AUTH: <reason>".
func (e *AuthRefusedError) Error() string { return ErrAuthRefused.Error() + ": " + e.Reason }

// Unwrap returns ErrAuthRefused.
func (e *AuthRefusedError) Unwrap() error { return ErrAuthRefused }
