package relay

import (
	"context"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// Subscribe sends REQ with the given id and filters. Options.BeforeRequest,
// when set, runs first.
func (c *Conn) Subscribe(ctx context.Context, id string, filters nostr.Filters) (*Subscription, error) {
	return c.SubscribeBuffered(ctx, id, filters, c.opts.SubscriptionBuffer)
}

// SubscribeBuffered is Subscribe with a queue of buffer messages instead
// of Options.SubscriptionBuffer: a sidecar keeps thousands of mostly idle
// live subscriptions open, and each queue is allocated whole.
func (c *Conn) SubscribeBuffered(ctx context.Context, id string, filters nostr.Filters, buffer int) (*Subscription, error) {
	if err := c.beforeRequest(ctx); err != nil {
		return nil, err
	}
	sub := &Subscription{
		ID: id, tagValues: MostTagValues(filters), conn: c,
		ch:   make(chan SubMsg, max(buffer, 1)),
		done: make(chan struct{}),
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := c.subs[id]; ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateSubscription, id)
	}
	c.subs[id] = sub
	c.mu.Unlock()
	if err := c.write(ctx, reqJSON(id, filters)); err != nil {
		c.unsubscribe(sub, false)
		return nil, err
	}
	return sub, nil
}

// Unsubscribe closes the subscription with the given id, if it is open.
func (c *Conn) Unsubscribe(id string) {
	c.mu.Lock()
	sub := c.subs[id]
	c.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

// OpenSubscriptions is the number of subscriptions currently registered.
func (c *Conn) OpenSubscriptions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs)
}

// unsubscribe removes sub; sendClose tells whether to send CLOSE.
func (c *Conn) unsubscribe(sub *Subscription, sendClose bool) {
	sub.once.Do(func() {
		c.mu.Lock()
		if c.subs[sub.ID] == sub {
			delete(c.subs, sub.ID)
		}
		c.mu.Unlock()
		close(sub.done)
		if sendClose && c.ctx.Err() == nil {
			msg, _ := nostr.CloseEnvelope(sub.ID).MarshalJSON()
			_ = c.write(context.Background(), msg)
		}
	})
}

// Incoming returns m, a MsgEvent of s, as the event.Incoming the stages
// after the read loop take: the event with the id the read loop decoded,
// the bytes it arrived in, the relay's URL and the subscription's id.
func (s *Subscription) Incoming(m SubMsg) event.Incoming {
	in := event.Incoming{Event: m.Event, Size: m.Size, Relay: s.conn.url, Sub: s.ID, Raw: m.Raw}
	if m.Event == nil || m.Type != MsgEvent {
		return in
	}
	return in.WithDecodedID(m.id, m.idOK)
}

// deliver hands msg to sub, waiting while its buffer is full. Only the
// reader goroutine sends on or closes a subscription's channel.
func (c *Conn) deliver(sub *Subscription, msg SubMsg) {
	select {
	case sub.ch <- msg:
		return
	default:
	}
	// A consumer is behind: the whole connection waits for it.
	c.stalls.Add(1)
	defer c.stalls.Add(-1)
	select {
	case sub.ch <- msg:
	case <-sub.done:
	case <-c.ctx.Done():
	}
}

// Stalled tells whether the reader is waiting for a slow consumer right
// now. While it is, no subscription on the connection receives anything,
// so silence is ours, not the relay's.
func (c *Conn) Stalled() bool { return c.stalls.Load() > 0 }

// MostTagValues is the most values one tag of one of fs carries.
func MostTagValues(fs nostr.Filters) int {
	most := 0
	for _, f := range fs {
		for _, vs := range f.Tags {
			most = max(most, len(vs))
		}
	}
	return most
}
