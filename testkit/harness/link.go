package harness

import (
	"context"
	"encoding/json"
	"time"

	"github.com/coder/websocket"
)

// latencyQueue bounds the frames in flight in each direction of a delayed
// connection: the link's bandwidth-delay product, beyond which the sender
// waits (TCP backpressure).
const latencyQueue = 8192

// timedFrame is a WebSocket message on its way across a delayed link.
type timedFrame struct {
	due        time.Time
	typ        websocket.MessageType
	data       []byte
	err        error
	label, sub string
	n          int // the relay's sent count when recorded (DropAfterSend)
	events     int // the connection's EVENTs sent when recorded, 0 for other messages (CloseAfterEvents)
}

// wait sleeps until f is due.
func (f timedFrame) wait(ctx context.Context) bool {
	d := time.Until(f.due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// startLatency makes the connection a link of one-way latency d (Faults.
// Latency when it was opened): every client message reaches the relay d
// after it was sent, every message to the client arrives d after the
// relay sent it, in order, without limiting throughput. It returns the
// read function pumpUp uses.
func (c *proxyConn) startLatency(ctx context.Context, d time.Duration) func(context.Context) (websocket.MessageType, []byte, error) {
	up := make(chan timedFrame, latencyQueue)
	go func() {
		defer close(up)
		for {
			typ, data, err := c.client.Read(ctx)
			select {
			case up <- timedFrame{due: time.Now().Add(d), typ: typ, data: data, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	c.down = make(chan timedFrame, latencyQueue)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-c.down:
				if !f.wait(ctx) || !c.write(ctx, f.typ, f.data, f.n, f.events) {
					c.kill()
					return
				}
			}
		}
	}()
	return func(ctx context.Context) (websocket.MessageType, []byte, error) {
		f, ok := <-up
		if !ok {
			return 0, nil, ctx.Err()
		}
		if f.err != nil {
			return 0, nil, f.err
		}
		if !f.wait(ctx) {
			return 0, nil, ctx.Err()
		}
		return f.typ, f.data, nil
	}
}

// send writes a message to the client, records it and applies
// DropAfterSend and CloseAfterEvents.
func (c *proxyConn) send(ctx context.Context, typ websocket.MessageType, data []byte, label, sub string) bool {
	// record first, so a client that reacts to the message sees it counted
	n := c.r.obs.sent(c, label, sub, data)
	events := 0
	if label == "EVENT" {
		events = int(c.sentEvents.Add(1))
	}
	if c.down != nil {
		select {
		case c.down <- timedFrame{due: time.Now().Add(c.r.Faults().Latency), typ: typ, data: data, n: n, events: events}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	return c.write(ctx, typ, data, n, events)
}

// write writes a message to the client and applies DropAfterSend and
// CloseAfterEvents; n is the relay's sent count when it was recorded,
// events the connection's EVENT count (0 for other messages).
func (c *proxyConn) write(ctx context.Context, typ websocket.MessageType, data []byte, n, events int) bool {
	if err := c.client.Write(ctx, typ, data); err != nil {
		return false
	}
	f := c.r.Faults()
	if f.DropAfterSend > 0 && n >= f.DropAfterSend {
		c.kill()
		return false
	}
	if f.CloseAfterEvents > 0 && events >= f.CloseAfterEvents {
		// The close handshake completes while pumpUp reads the client's
		// answer; kill ends whatever is left.
		c.client.Close(f.closeCode(), "closing after serving events")
		c.kill()
		return false
	}
	return true
}

func (c *proxyConn) sendJSON(ctx context.Context, v []any) {
	data, _ := json.Marshal(v)
	label, _ := v[0].(string)
	sub, _ := v[1].(string)
	if label == "AUTH" {
		sub = ""
	}
	c.send(ctx, websocket.MessageText, data, label, sub)
}
