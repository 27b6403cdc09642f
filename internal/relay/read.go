package relay

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

func (c *Conn) pingLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.PongTimeout)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.shutdown(fmt.Errorf("no pong within %s: %w", c.opts.PongTimeout, err))
				return
			}
		}
	}
}

// maxKeptReadBuffer is the largest encode/decode buffer kept for reuse.
const maxKeptReadBuffer = 1 << 20

// maxKeptFrameBuffer is the largest read buffer a connection keeps between
// messages: events are a few kB, and a connection that once read a large
// NEG-MSG or REQ answer does not pin up to 1 MiB for its life (with many
// remote relays those buffers were a visible part of the heap's peak). A
// larger message is read into a buffer of its own, handed on and dropped.
const maxKeptFrameBuffer = 64 << 10

func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer c.teardown()
	defer close(c.readDone)
	// One buffer for every message: what outlives handle (an event's raw
	// bytes) is copied out of it at its exact size. One context and one
	// timer for every message too: the timer only fires to end the
	// connection, so nothing is made per message.
	var buf bytes.Buffer
	rctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(time.Hour, func() {
		// The connection ends with this cause: ending the read closes the
		// socket, and a ping failing on it must not be taken for the cause.
		cause := fmt.Errorf("message not complete within %s", c.opts.PongTimeout)
		c.shutdown(cause)
		cancel(cause)
	})
	deadline.Stop()
	defer deadline.Stop()
	// The websocket reads under a context that is never done: under any
	// other, coder/websocket registers a callback on it for every frame
	// header and payload it reads (two allocations, and on rctx a lock and
	// a map entry); under one never done, since v1.8.15, nothing. rctx
	// ending (the connection ending, the deadline) closes the socket once
	// instead, which ends a read that is waiting; between reads (handle)
	// closing is shutdown's, with the websocket's close handshake, as it
	// was. It closes the socket itself, below the websocket: the
	// websocket's CloseNow only waits when shutdown's Close got there
	// first, and Close waits for the relay's answer to the close frame (5 s
	// from a relay that does not read) while this read holds the
	// websocket's reader. Without a socket of ours (a transport the cork
	// cannot wrap) the websocket reads under rctx and ends the read itself.
	wsctx := context.WithoutCancel(rctx)
	if c.cork == nil {
		wsctx = rctx
	}
	var reading atomic.Bool
	stopClose := context.AfterFunc(rctx, func() {
		if reading.Load() && c.cork != nil {
			_ = c.cork.Conn.Close()
		}
	})
	defer stopClose()
	for {
		reading.Store(true)
		data, err := c.readMessage(rctx, wsctx, deadline, &buf)
		reading.Store(false)
		if err != nil {
			if c.ctx.Err() == nil {
				c.shutdown(fmt.Errorf("read: %w", err))
			}
			return
		}
		c.bytesIn.Add(uint64(len(data)))
		c.framesIn.Add(1)
		c.handle(data)
	}
}

// readMessage waits as long as it takes for the next message to start,
// then gives it PongTimeout (deadline, which cancels ctx) to arrive whole:
// a relay that trickles a message (in fragments, while still answering
// pings) is dropped. The websocket reads under wsctx (see readLoop).
func (c *Conn) readMessage(ctx, wsctx context.Context, deadline *time.Timer, buf *bytes.Buffer) ([]byte, error) {
	if ctx.Err() != nil {
		// Ended while the last message was handled (readLoop).
		return nil, context.Cause(ctx)
	}
	_, r, err := c.ws.Reader(wsctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	deadline.Reset(c.opts.PongTimeout)
	buf.Reset()
	_, err = buf.ReadFrom(r)
	deadline.Stop()
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if buf.Cap() > maxKeptFrameBuffer {
		// One large message does not pin its buffer for the connection's life.
		data := bytes.Clone(buf.Bytes())
		*buf = bytes.Buffer{}
		return data, err
	}
	return buf.Bytes(), err
}

// handle parses one frame; a frame that cannot be parsed is ignored (and
// reported to OnFrame as "INVALID"), it never stops the connection.
func (c *Conn) handle(data []byte) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Debug("panic while parsing relay message", zap.String("relay", c.url), zap.Any("panic", r))
			if c.opts.OnFrame != nil {
				c.opts.OnFrame("INVALID", len(data))
			}
		}
	}()
	label := frameLabelBytes(data)
	if c.opts.OnFrame != nil {
		c.opts.OnFrame(label, len(data))
	}
	switch label {
	case "EVENT":
		c.handleEvent(data)
		return
	case "OK":
		if id, ok, reason, fine := okFrame(data); fine {
			c.handleOK(id, ok, string(reason))
			return
		}
	case "NEG-MSG":
		if sub, msg, fine := negMsgFrame(data); fine {
			locked(&c.mu, func() { c.negs.deliverMsg(sub, msg) })
			return
		}
	}
	// The other frames are small; go-nostr's decoders keep substrings of
	// msg, so it is a copy of the reused read buffer.
	msg := string(data)
	switch label {
	case "COUNT":
		c.handleCount(msg)
	case "EOSE":
		var env nostr.EOSEEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.mu.Lock()
		sub := c.subs[string(env)]
		c.mu.Unlock()
		if sub != nil {
			sub.deliver(SubMsg{Type: MsgEOSE})
		}
	case "CLOSED":
		// go-nostr refuses a CLOSED with fields after the reason; relays
		// add them (as relay.damus.io does to NEG-ERR), and a lost CLOSED
		// would leave the subscription waiting for its EOSE timeout.
		arr := gjson.Parse(msg).Array()
		if len(arr) < 3 || arr[1].Type != gjson.String || arr[2].Type != gjson.String {
			return
		}
		env := nostr.ClosedEnvelope{SubscriptionID: arr[1].Str, Reason: arr[2].Str}
		c.mu.Lock()
		sub := c.subs[env.SubscriptionID]
		c.mu.Unlock()
		if sub != nil && c.opts.OnClosedTagValues != nil {
			c.opts.OnClosedTagValues(env.Reason, sub.tagValues)
		}
		if sub != nil {
			if c.opts.OnClosed != nil {
				c.opts.OnClosed(env.SubscriptionID, env.Reason)
			}
			sub.deliver(SubMsg{Type: MsgClosed, Reason: env.Reason})
			sub.unregister(false)
			close(sub.ch)
		}
	case "NOTICE":
		var env nostr.NoticeEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		if c.opts.OnNotice != nil {
			c.opts.OnNotice(string(env))
		}
		locked(&c.mu, func() { c.negs.deliverNotice(string(env)) })
	case "OK":
		var env nostr.OKEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.handleOK([]byte(env.EventID), env.OK, env.Reason)
	case "AUTH":
		var env nostr.AuthEnvelope
		if env.FromJSON(msg) != nil || env.Challenge == nil {
			return
		}
		c.mu.Lock()
		c.challenge = *env.Challenge
		c.mu.Unlock()
		if c.opts.OnChallenge != nil {
			c.opts.OnChallenge(*env.Challenge)
		}
	case "NEG-MSG":
		var env nip77.MessageEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		locked(&c.mu, func() { c.negs.deliver(env.SubscriptionID, NegReply{Msg: env.Message}) })
	case "NEG-ERR", "NEG-ERROR":
		var env nip77.ErrorEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		reason := env.Reason
		if reason == "" {
			reason = "unspecified"
		}
		if c.opts.OnNegErr != nil {
			c.opts.OnNegErr(env.SubscriptionID, reason)
		}
		locked(&c.mu, func() { c.negs.deliver(env.SubscriptionID, NegReply{Err: reason}) })
	}
}

// handleEvent delivers an EVENT frame's event to its subscription. The
// frame is split without decoding (eventFrame), the event object decoded
// once, straight from the read buffer (eventDecoder, else go-nostr's
// decoder; both copy the strings they keep), and copied once, at its exact
// size, as SubMsg.Raw.
func (c *Conn) handleEvent(data []byte) {
	subID, obj, ok := eventFrame(data)
	if !ok {
		c.handleEventSlow(data)
		return
	}
	c.mu.Lock()
	sub := c.subs[string(subID)]
	c.mu.Unlock()
	if sub == nil {
		c.opts.dropped(DropClosedSubscription)
		return
	}
	ev := new(nostr.Event)
	if !c.dec.decode(obj, ev) {
		// Not the usual shape: go-nostr's decoder judges it.
		*ev = nostr.Event{}
		if ev.UnmarshalJSON(obj) != nil {
			c.opts.dropped(DropMalformed)
			return
		}
	}
	// The own relay answers OK by the id it reads, and the publisher
	// waits for ours: an object naming "id" twice is re-encoded.
	var raw []byte
	if !c.opts.NoRaw && countKey(obj, `"id"`) == 1 {
		raw = bytes.Clone(obj)
	}
	sub.deliverEvent(ev, len(data), raw)
}

// Reasons given to Options.OnDropped.
const (
	DropClosedSubscription = "closed_subscription"
	DropMalformed          = "malformed"
)

// dropped reports an EVENT that reaches no subscription to OnDropped.
func (o *Options) dropped(reason string) {
	if o.OnDropped != nil {
		o.OnDropped(reason)
	}
}

// handleEventSlow is handleEvent for the frames eventFrame leaves out (a
// subscription id with escapes, for one): go-nostr's envelope decoder.
func (c *Conn) handleEventSlow(data []byte) {
	var env nostr.EventEnvelope
	if err := env.FromJSON(string(data)); err != nil || env.SubscriptionID == nil {
		c.opts.dropped(DropMalformed)
		return
	}
	c.mu.Lock()
	sub := c.subs[*env.SubscriptionID]
	c.mu.Unlock()
	if sub == nil {
		c.opts.dropped(DropClosedSubscription)
		return
	}
	ev := env.Event
	var raw []byte
	if !c.opts.NoRaw {
		raw = bytes.Clone(eventJSON(data, *env.SubscriptionID))
	}
	sub.deliverEvent(&ev, len(data), raw)
}

// frameLabel extracts the first JSON string of a relay message cheaply.
func frameLabel(msg string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 || i > 8 {
		return "INVALID"
	}
	j := strings.IndexByte(msg[i+1:], '"')
	if j < 0 || j > 16 {
		return "INVALID"
	}
	return msg[i+1 : i+1+j]
}

// frameLabelBytes is frameLabel of a frame in the read buffer: the labels
// relays send are constants, anything else a copy.
func frameLabelBytes(data []byte) string {
	i := bytes.IndexByte(data[:min(len(data), 9)], '"')
	if i < 0 {
		return "INVALID"
	}
	rest := data[i+1:]
	j := bytes.IndexByte(rest[:min(len(rest), 17)], '"')
	if j < 0 {
		return "INVALID"
	}
	switch l := rest[:j]; string(l) {
	case "EVENT":
		return "EVENT"
	case "EOSE":
		return "EOSE"
	case "OK":
		return "OK"
	case "CLOSED":
		return "CLOSED"
	case "NOTICE":
		return "NOTICE"
	case "AUTH":
		return "AUTH"
	case "NEG-MSG":
		return "NEG-MSG"
	case "NEG-ERR":
		return "NEG-ERR"
	default:
		return string(l)
	}
}
