package relay

import (
	"context"

	"github.com/nbd-wtf/go-nostr"
)

// OKReply is the answer to one EVENT sent with Send: the relay's OK, or
// why none will come (Err: the connection ended), with the id and the tag
// it was sent with.
type OKReply struct {
	ID  string
	Tag uint64
	OKResult
}

// okWaiter is one wait for an OK: on a channel of its own (ch, Publish
// and Authenticate), or on a caller's shared channel (to, Send).
type okWaiter struct {
	ch  chan OKResult
	to  chan<- OKReply
	tag uint64
}

// okWaiters are the waiters for one id's OK: almost always one, kept
// without a slice.
type okWaiters struct {
	id    string // the event id they wait for, as registered
	first okWaiter
	more  []okWaiter
}

func (ws *okWaiters) each(f func(okWaiter)) {
	f(ws.first)
	for _, w := range ws.more {
		f(w)
	}
}

// addOK registers w for id's OK; c.mu is held.
func (c *Conn) addOK(id string, w okWaiter) {
	ws, ok := c.oks[id]
	if !ok {
		c.oks[id] = okWaiters{id: id, first: w}
		return
	}
	ws.more = append(ws.more, w)
	c.oks[id] = ws
}

// removeOK unregisters w; false when it was not registered (its answer
// is delivered or on its way). c.mu is held.
func (c *Conn) removeOK(id string, w okWaiter) bool {
	ws, ok := c.oks[id]
	if !ok {
		return false
	}
	switch {
	case ws.first == w && len(ws.more) == 0:
		delete(c.oks, id)
		return true
	case ws.first == w:
		ws.first, ws.more = ws.more[0], ws.more[1:]
	default:
		i := 0
		for i < len(ws.more) && ws.more[i] != w {
			i++
		}
		if i == len(ws.more) {
			return false
		}
		ws.more = append(ws.more[:i], ws.more[i+1:]...)
	}
	if len(ws.more) == 0 {
		ws.more = nil
	}
	c.oks[id] = ws
	return true
}

// handleOK takes the relay's OK for id: Options.OnOK first, then every
// waiter registered for it. The id string is the waiters' own (no copy of
// the frame's).
func (c *Conn) handleOK(id []byte, ok bool, reason string) {
	c.mu.Lock()
	ws, waited := c.oks[string(id)]
	if waited {
		delete(c.oks, ws.id)
	}
	c.mu.Unlock()
	if c.opts.OnOK != nil {
		sid := ws.id
		if !waited {
			sid = string(id)
		}
		c.opts.OnOK(sid, ok, reason)
	}
	if waited {
		r := OKResult{OK: ok, Reason: reason}
		ws.each(func(w okWaiter) { c.deliverOK(ws.id, w, r) })
	}
}

// deliverOK hands r to w. A shared channel has room for every EVENT its
// owner has in flight (Send's contract), so the reader does not wait on
// it; if it is full all the same, the reader waits while the connection
// is up, and after that the answer (an error) is dropped: the owner's
// own OK timeout covers it.
func (c *Conn) deliverOK(id string, w okWaiter, r OKResult) {
	if w.ch != nil {
		w.ch <- r
		return
	}
	rep := OKReply{ID: id, Tag: w.tag, OKResult: r}
	select {
	case w.to <- rep:
		return
	default:
	}
	select {
	case w.to <- rep:
	case <-c.ctx.Done():
	}
}

// Send is Publish for a caller with many EVENTs in flight: raw is the
// event as it arrived from another relay (SubMsg.Raw), sent as is, or nil
// to encode ev; the relay's OK, or why none came, arrives on to as an
// OKReply with tag, so no goroutine waits per EVENT. to must have room
// for one reply per EVENT the caller has in flight. A write that fails
// returns its error and nothing arrives on to. CancelOK withdraws the
// wait.
func (c *Conn) Send(ctx context.Context, ev *nostr.Event, raw []byte, tag uint64, to chan<- OKReply) error {
	w := okWaiter{to: to, tag: tag}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.addOK(ev.ID, w)
	c.mu.Unlock()
	var err error
	if raw != nil {
		err = c.writeEvent(ctx, raw)
	} else {
		var msg []byte
		if msg, err = (nostr.EventEnvelope{Event: *ev}).MarshalJSON(); err == nil {
			err = c.write(ctx, msg)
		}
	}
	if err != nil {
		c.CancelOK(ev.ID, tag, to)
	}
	return err
}

// CancelOK stops waiting for the OK of the EVENT sent as id with tag and
// to; false when its answer is already delivered or on its way.
func (c *Conn) CancelOK(id string, tag uint64, to chan<- OKReply) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removeOK(id, okWaiter{to: to, tag: tag})
}
