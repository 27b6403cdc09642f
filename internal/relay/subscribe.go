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
	if !c.subs.add(sub) {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateSubscription, id)
	}
	c.mu.Unlock()
	if err := c.write(ctx, reqJSON(id, filters)); err != nil {
		sub.unregister(false)
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

// subTable is the subscription registry: the open subscriptions by id.
// Conn.mu guards it: every method is called with it held (the read loop
// looks a subscription up by indexing it under the lock). A subscription
// leaves it once (Subscription.unregister); SubscribeBuffered checks the
// connection's context under the lock before adding, so teardown, which
// takes the registered ones after that context is done, misses none.
type subTable map[string]*Subscription

// add registers sub; false when its id is open already.
func (t subTable) add(sub *Subscription) bool {
	if _, ok := t[sub.ID]; ok {
		return false
	}
	t[sub.ID] = sub
	return true
}

// remove unregisters sub, unless its id is another subscription's by now.
func (t subTable) remove(sub *Subscription) {
	if t[sub.ID] == sub {
		delete(t, sub.ID)
	}
}

// all returns the registered subscriptions.
func (t subTable) all() []*Subscription {
	subs := make([]*Subscription, 0, len(t))
	for _, s := range t {
		subs = append(subs, s)
	}
	return subs
}

// unregister removes s from its connection's registry, once, and closes
// Done; sendClose tells whether to send CLOSE.
func (s *Subscription) unregister(sendClose bool) {
	c := s.conn
	s.once.Do(func() {
		c.mu.Lock()
		c.subs.remove(s)
		c.mu.Unlock()
		close(s.done)
		if sendClose && c.ctx.Err() == nil {
			msg, _ := nostr.CloseEnvelope(s.ID).MarshalJSON()
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

// deliver hands msg to s, waiting while its buffer is full. Only the
// reader goroutine sends on or closes a subscription's channel.
func (s *Subscription) deliver(msg SubMsg) {
	select {
	case s.ch <- msg:
		return
	default:
	}
	// A consumer is behind: the whole connection waits for it.
	c := s.conn
	c.stalls.Add(1)
	defer c.stalls.Add(-1)
	select {
	case s.ch <- msg:
	case <-s.done:
	case <-c.ctx.Done():
	}
}

// deliverEvent hands a decoded event to s with its id decoded, here and
// once: the stages after the read loop take it from the message
// (Subscription.Incoming).
func (s *Subscription) deliverEvent(ev *nostr.Event, size int, raw []byte) {
	m := SubMsg{Type: MsgEvent, Event: ev, Size: size, Raw: raw}
	m.id, m.idOK = event.DecodeID(ev.ID)
	s.deliver(m)
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
