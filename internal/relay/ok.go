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

// okTable is the table of EVENTs (and AUTH events) awaiting their OK:
// the waiters by event id. Conn.mu guards it: every method is called with
// it held. Teardown takes the whole table (and leaves an empty one) under
// it, after the connection's context is done; registering checks that
// context under it, so no waiter is added that teardown would miss.
type okTable map[string]okWaiters

// add registers w for id's OK.
func (t okTable) add(id string, w okWaiter) {
	ws, ok := t[id]
	if !ok {
		t[id] = okWaiters{id: id, first: w}
		return
	}
	ws.more = append(ws.more, w)
	t[id] = ws
}

// remove unregisters w; false when it was not registered (its answer
// is delivered or on its way).
func (t okTable) remove(id string, w okWaiter) bool {
	ws, ok := t[id]
	if !ok {
		return false
	}
	switch {
	case ws.first == w && len(ws.more) == 0:
		delete(t, id)
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
	t[id] = ws
	return true
}

// take unregisters and returns every waiter for id's OK (id as the frame
// carries it; the waiters keep the id string they registered).
func (t okTable) take(id []byte) (okWaiters, bool) {
	ws, ok := t[string(id)]
	if ok {
		delete(t, ws.id)
	}
	return ws, ok
}

// handleOK takes the relay's OK for id: Options.OnOK first, then every
// waiter registered for it. The id string is the waiters' own (no copy of
// the frame's).
func (c *Conn) handleOK(id []byte, ok bool, reason string) {
	c.mu.Lock()
	ws, waited := c.oks.take(id)
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
		ws.each(func(w okWaiter) { w.deliver(ws.id, r, c.ctx.Done()) })
	}
}

// deliver hands r, the answer for id, to w. A shared channel has room for
// every EVENT its owner has in flight (Send's contract), so the reader
// does not wait on it; if it is full all the same, the reader waits while
// the connection is up (until connDone, the connection's Done), and after
// that the answer (an error) is dropped: the owner's own OK timeout
// covers it.
func (w okWaiter) deliver(id string, r OKResult, connDone <-chan struct{}) {
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
	case <-connDone:
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
	c.oks.add(ev.ID, w)
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
	return c.oks.remove(id, okWaiter{to: to, tag: tag})
}
