package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"
	"github.com/tidwall/gjson"
)

// ErrRejected is wrapped by the errors Publish returns for events the relay
// answered with OK false.
var ErrRejected = errors.New("harness: event rejected")

// RejectedError is one event a relay refused.
type RejectedError struct {
	ID     string
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("event %s rejected: %s", e.ID, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRejected) hold.
func (e *RejectedError) Unwrap() error { return ErrRejected }

// Publish sends evs in order to the relay at url over one plain WebSocket
// connection, waiting for each OK before sending the next (so an event's
// dependencies published before it are stored first). It returns nil when
// all were accepted (duplicates count as accepted), otherwise an errors.Join
// of *RejectedError values (and the connection error, if any).
func Publish(ctx context.Context, url string, evs ...*nostr.Event) error {
	return PublishWindow(ctx, url, 1, evs...)
}

// PublishOKTimeout is how long Publish and PublishWindow wait for the next
// OK before giving up with context.DeadlineExceeded.
const PublishOKTimeout = 10 * time.Second

// PublishWindow is Publish with up to window EVENTs in flight, for
// throughput. khatru handles a connection's messages concurrently, so events
// in one window may be stored in any order.
func PublishWindow(ctx context.Context, url string, window int, evs ...*nostr.Event) error {
	if window < 1 {
		window = 1
	}
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return fmt.Errorf("harness: publish: dial %s: %w", url, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)

	pending := make(map[string]bool, window)
	var errs []error
	readOne := func() error {
		rctx, cancel := context.WithTimeout(ctx, PublishOKTimeout)
		defer cancel()
		_, data, err := conn.Read(rctx)
		if err != nil {
			return fmt.Errorf("harness: publish to %s: %w", url, err)
		}
		res := gjson.GetManyBytes(data, "0", "1", "2", "3")
		if res[0].String() != "OK" {
			return nil
		}
		id := res[1].String()
		if !pending[id] {
			return nil
		}
		delete(pending, id)
		if !res[2].Bool() {
			errs = append(errs, &RejectedError{ID: id, Reason: res[3].String()})
		}
		return nil
	}
	for _, ev := range evs {
		for len(pending) >= window {
			if err := readOne(); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		msg, err := json.Marshal([]any{"EVENT", ev})
		if err != nil {
			return fmt.Errorf("harness: publish: %w", err)
		}
		if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
			return errors.Join(append(errs, fmt.Errorf("harness: publish to %s: %w", url, err))...)
		}
		pending[ev.ID] = true
	}
	for len(pending) > 0 {
		if err := readOne(); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "")
	return errors.Join(errs...)
}

// Client is a minimal Nostr WebSocket client for tests: it sends raw
// messages and hands back every relay message in order. It exists because
// go-nostr v0.52.3's Relay has a data race in Close (relay.go:175 vs :576)
// that fails tests under -race. A background goroutine reads the connection
// so that waiting for a message never closes it.
type Client struct {
	conn   *websocket.Conn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	queue   []string
	notify  chan struct{} // closed and replaced when queue grows
	readErr error
}

// Dial connects a Client to url.
func Dial(ctx context.Context, url string) (*Client, error) {
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("harness: dial %s: %w", url, err)
	}
	conn.SetReadLimit(-1)
	rctx, cancel := context.WithCancel(context.Background())
	c := &Client{conn: conn, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{})}
	go c.readLoop(rctx)
	return c, nil
}

func (c *Client) readLoop(ctx context.Context) {
	defer close(c.done)
	for {
		_, data, err := c.conn.Read(ctx)
		c.mu.Lock()
		if err != nil {
			c.readErr = err
		} else {
			c.queue = append(c.queue, string(data))
		}
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Close closes the connection and stops the reader.
func (c *Client) Close() error {
	c.cancel()
	err := c.conn.Close(websocket.StatusNormalClosure, "")
	<-c.done
	return err
}

// Send writes one message; v is marshalled to JSON unless it is a string or
// []byte (sent as is). go-nostr envelopes marshal to the wire format.
func (c *Client) Send(ctx context.Context, v any) error {
	var data []byte
	switch m := v.(type) {
	case string:
		data = []byte(m)
	case []byte:
		data = m
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return fmt.Errorf("harness: client send: %w", err)
		}
	}
	if err := c.conn.Write(ctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("harness: client send: %w", err)
	}
	return nil
}

// Next returns the next relay message (raw JSON). It returns an error when
// ctx ends first or the connection is closed and every message was read.
func (c *Client) Next(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return m, nil
		}
		if c.readErr != nil {
			err := c.readErr
			c.mu.Unlock()
			return "", fmt.Errorf("harness: client read: %w", err)
		}
		wait := c.notify
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Closed reports whether the connection is gone (after its queued messages
// were all read, Next fails).
func (c *Client) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr != nil
}

// Label returns a message's label ("EVENT", "EOSE", "NOTICE", …).
func Label(msg string) string { return gjson.Get(msg, "0").String() }

// ReqResult is what a REQ returned up to EOSE or CLOSED.
type ReqResult struct {
	Events []*nostr.Event
	// EOSE is true when the stored events ended with EOSE.
	EOSE bool
	// Closed is the CLOSED reason, if the relay closed the subscription.
	Closed string
	// Notices are NOTICEs received meanwhile.
	Notices []string
}

// unread puts messages back at the front of the queue, in order.
func (c *Client) unread(msgs []string) {
	if len(msgs) == 0 {
		return
	}
	c.mu.Lock()
	c.queue = append(msgs, c.queue...)
	c.mu.Unlock()
}

// Req sends ["REQ", subID, filters...] and collects events until EOSE or
// CLOSED for subID, or until ctx ends (then it returns what it has and
// ctx's error). The subscription stays open after EOSE. NOTICEs are
// collected; messages for other subscriptions stay queued for Next.
func (c *Client) Req(ctx context.Context, subID string, filters ...nostr.Filter) (ReqResult, error) {
	msg := []any{"REQ", subID}
	for _, f := range filters {
		msg = append(msg, f)
	}
	var res ReqResult
	if err := c.Send(ctx, msg); err != nil {
		return res, err
	}
	var others []string
	defer func() { c.unread(others) }()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			return res, err
		}
		parts := gjson.GetMany(m, "0", "1", "2")
		switch parts[0].String() {
		case "EVENT":
			if parts[1].String() != subID {
				others = append(others, m)
				continue
			}
			ev := &nostr.Event{}
			if err := json.Unmarshal([]byte(parts[2].Raw), ev); err != nil {
				return res, fmt.Errorf("harness: bad EVENT: %w", err)
			}
			res.Events = append(res.Events, ev)
		case "EOSE":
			if parts[1].String() == subID {
				res.EOSE = true
				return res, nil
			}
			others = append(others, m)
		case "CLOSED":
			if parts[1].String() == subID {
				res.Closed = parts[2].String()
				return res, nil
			}
			others = append(others, m)
		case "NOTICE":
			res.Notices = append(res.Notices, parts[1].String())
		default:
			others = append(others, m)
		}
	}
}

// CloseSub sends ["CLOSE", subID].
func (c *Client) CloseSub(ctx context.Context, subID string) error {
	return c.Send(ctx, []any{"CLOSE", subID})
}

// ErrNegentropy is wrapped by Client.Negentropy errors that come from the
// relay's answer (NEG-ERR, khatru's NEG-ERROR, or a NOTICE).
var ErrNegentropy = errors.New("harness: negentropy refused")

// Negentropy runs one NIP-77 reconciliation (go-nostr's negentropy protocol
// code) on subscription subID for filter, with have as the client's set. It
// returns the ids only the relay has (need) and the ids only the client has
// (extra), then sends NEG-CLOSE. A NEG-ERR, NEG-ERROR or NOTICE answer
// returns an error wrapping ErrNegentropy with the relay's text.
func (c *Client) Negentropy(ctx context.Context, subID string, filter nostr.Filter, have []*nostr.Event) ([]string, []string, error) {
	var need, extra []string
	vec := vector.New()
	for _, ev := range have {
		vec.Insert(ev.CreatedAt, ev.ID)
	}
	vec.Seal()
	neg := negentropy.New(vec, 1<<20)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for id := range neg.HaveNots {
			need = append(need, id)
		}
	}()
	extraDone := make(chan struct{})
	go func() {
		defer close(extraDone)
		for id := range neg.Haves {
			extra = append(extra, id)
		}
	}()
	finished := false
	defer func() {
		if !finished {
			// unblock the collectors; the session failed
			close(neg.Haves)
			close(neg.HaveNots)
		}
		<-collected
		<-extraDone
	}()

	if err := c.Send(ctx, []any{"NEG-OPEN", subID, filter, neg.Start()}); err != nil {
		return nil, nil, err
	}
	var others []string
	defer func() { c.unread(others) }()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			return nil, nil, err
		}
		parts := gjson.GetMany(m, "0", "1", "2")
		switch parts[0].String() {
		case "NEG-MSG":
			if parts[1].String() != subID {
				others = append(others, m)
				continue
			}
			out, err := neg.Reconcile(parts[2].String())
			if err != nil {
				return nil, nil, fmt.Errorf("harness: reconcile: %w", err)
			}
			if out == "" {
				finished = true // Reconcile closed the channels
				c.Send(ctx, []any{"NEG-CLOSE", subID})
				<-collected
				<-extraDone
				return need, extra, nil
			}
			if err := c.Send(ctx, []any{"NEG-MSG", subID, out}); err != nil {
				return nil, nil, err
			}
		case "NEG-ERR", "NEG-ERROR":
			if parts[1].String() == subID {
				return nil, nil, fmt.Errorf("%w: %s %s", ErrNegentropy, parts[0].String(), parts[2].String())
			}
			others = append(others, m)
		case "NOTICE":
			return nil, nil, fmt.Errorf("%w: NOTICE %s", ErrNegentropy, parts[1].String())
		default:
			others = append(others, m)
		}
	}
}

// Publish sends ["EVENT", ev] on this connection and waits for its OK,
// returning whether it was accepted and the reason. Other messages stay
// queued for Next.
func (c *Client) Publish(ctx context.Context, ev *nostr.Event) (bool, string, error) {
	if err := c.Send(ctx, []any{"EVENT", ev}); err != nil {
		return false, "", err
	}
	var others []string
	defer func() { c.unread(others) }()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			return false, "", err
		}
		parts := gjson.GetMany(m, "0", "1", "2", "3")
		if parts[0].String() == "OK" && parts[1].String() == ev.ID {
			return parts[2].Bool(), parts[3].String(), nil
		}
		others = append(others, m)
	}
}
