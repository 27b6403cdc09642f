package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ws "github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	"go.uber.org/zap"
)

// Sentinel errors callers branch on.
var (
	// ErrClosed is returned by operations on a connection that has ended.
	ErrClosed = errors.New("relay connection closed")
	// ErrDuplicateSubscription is returned when a subscription id is reused
	// while the first one is still open.
	ErrDuplicateSubscription = errors.New("subscription id already in use")
	// ErrNoChallenge is returned by Authenticate before the relay sent an
	// AUTH challenge.
	ErrNoChallenge = errors.New("relay sent no AUTH challenge")
	// ErrAuthRefused is returned by Authenticate, wrapped in an
	// AuthRefusedError, when the relay answered the AUTH event with OK false.
	ErrAuthRefused = errors.New("relay refused AUTH")
	// ErrNotWebsocket marks a dial that reached an HTTP server which did not
	// upgrade to a websocket: a hard failure, not worth quick retries.
	ErrNotWebsocket = errors.New("not a websocket endpoint")
)

// HandshakeError is returned by Dial when the relay answered the websocket
// handshake with an HTTP status other than 101 Switching Protocols.
// errors.Is(err, ErrNotWebsocket) holds for it. Its HandshakeStatus method
// lets the health tracker tell a rate limit (429) and a relay that is
// restarting (5xx) from an endpoint that is not a relay at all.
type HandshakeError struct {
	// URL is the relay dialled.
	URL string
	// StatusCode is the HTTP status of the handshake response.
	StatusCode int
	// Err is the websocket library's error, when it gave one.
	Err error
}

// Error describes the refused handshake.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("dial %s: %v (HTTP %d)", e.URL, ErrNotWebsocket, e.StatusCode)
}

// HandshakeStatus returns the HTTP status code of the handshake response.
func (e *HandshakeError) HandshakeStatus() int { return e.StatusCode }

// Is reports ErrNotWebsocket as matching.
func (e *HandshakeError) Is(target error) bool { return target == ErrNotWebsocket }

// Unwrap returns the websocket library's error.
func (e *HandshakeError) Unwrap() error { return e.Err }

// Options configure a connection. The zero value is not useful; start from
// DefaultOptions.
type Options struct {
	// MaxMessageBytes bounds one inbound frame. strfry sends NEG-MSG frames
	// near 1 MiB, so keep it at least that.
	MaxMessageBytes int64
	// WriteTimeout bounds every write.
	WriteTimeout time.Duration
	// PingInterval is how often a ping is sent; PongTimeout is how long the
	// relay has to answer it (a relay that stalls mid-frame cannot answer, so
	// this is also the slow-loris defence).
	PingInterval time.Duration
	PongTimeout  time.Duration
	// SubscriptionBuffer is the per-subscription queue length. When it is
	// full the reader waits: a slow consumer slows its relay, never grows
	// memory.
	SubscriptionBuffer int
	// HTTPClient, when set, is used for the websocket handshake; the dial
	// policy (allowed addresses) lives in its transport.
	HTTPClient *http.Client
	// Header is sent with the handshake (User-Agent).
	Header http.Header
	// OnNotice, when set, is called for every NOTICE from the reader
	// goroutine; it must not block.
	OnNotice func(text string)
	// OnClosed, when set, is called from the reader goroutine with the id
	// and reason of every CLOSED for an open subscription, before the
	// subscription sees it, so a rate limit can be recorded before anyone
	// reacts to the refusal. It must return quickly.
	OnClosed func(subID, reason string)
	// OnFrame, when set, is called from the reader goroutine with every
	// inbound frame's label and size; it must not block.
	OnFrame func(label string, size int)
	// Logger receives debug-level protocol oddities.
	Logger *zap.Logger
	// BeforeRequest, when set, is called by Subscribe and NegOpen before
	// anything is registered or sent; an error aborts the call with it. It
	// may block, e.g. while the relay's rate-limit cooldown runs, and must
	// return when ctx is done.
	BeforeRequest func(ctx context.Context) error
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		MaxMessageBytes:    4 << 20,
		WriteTimeout:       10 * time.Second,
		PingInterval:       30 * time.Second,
		PongTimeout:        60 * time.Second,
		SubscriptionBuffer: 256,
		Header:             http.Header{"User-Agent": {"grasp-sync"}},
	}
}

// MsgType tells what a SubMsg carries.
type MsgType uint8

// Subscription message types.
const (
	MsgEvent MsgType = iota + 1
	MsgEOSE
	MsgClosed
)

// SubMsg is one item of a subscription's ordered stream: an event, the EOSE
// marker, or the relay's CLOSED with its reason. Events before EOSE are
// stored events; events after it are live.
type SubMsg struct {
	Type   MsgType
	Event  *nostr.Event
	Size   int    // bytes of the EVENT frame
	Reason string // CLOSED reason
}

// Subscription is an open REQ.
type Subscription struct {
	ID      string
	Filters nostr.Filters
	conn    *Conn
	ch      chan SubMsg
	done    chan struct{}
	once    sync.Once
}

// Messages is the ordered stream. The relay ending the subscription
// (CLOSED) or the connection ending closes it; after Close it simply stops
// receiving, so select on Done as well.
func (s *Subscription) Messages() <-chan SubMsg { return s.ch }

// Done is closed once the subscription is no longer registered: after Close,
// after CLOSED, or when the connection ends.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close sends CLOSE (unless the relay already closed it) and unregisters the
// subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.conn.unsubscribe(s, true)
}

// OKResult is the relay's answer to one EVENT.
type OKResult struct {
	OK     bool
	Reason string
	// Err is set when no OK arrived: the connection ended or ctx expired.
	Err error
}

// Stats are cumulative counters of one connection.
type Stats struct {
	BytesIn, BytesOut   uint64
	FramesIn, FramesOut uint64
}

// Conn is one websocket connection to a relay. All methods are safe for
// concurrent use. Reconnecting is the caller's decision: a Conn that ended
// stays ended.
type Conn struct {
	url  string
	opts Options
	ws   *ws.Conn
	log  *zap.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	subs      map[string]*Subscription
	negs      map[string]chan NegReply
	oks       map[string][]chan OKResult
	challenge string

	bytesIn, bytesOut, framesIn, framesOut atomic.Uint64
	stalls                                 atomic.Int32
}

// Dial connects to url. ctx bounds the handshake only.
func Dial(ctx context.Context, url string, opts Options) (*Conn, error) {
	def := DefaultOptions()
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = def.MaxMessageBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = def.WriteTimeout
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = def.PingInterval
	}
	if opts.PongTimeout <= 0 {
		opts.PongTimeout = def.PongTimeout
	}
	if opts.SubscriptionBuffer <= 0 {
		opts.SubscriptionBuffer = def.SubscriptionBuffer
	}
	if opts.Header == nil {
		opts.Header = def.Header
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	c, resp, err := ws.Dial(ctx, url, &ws.DialOptions{
		HTTPClient:      opts.HTTPClient,
		HTTPHeader:      opts.Header,
		CompressionMode: ws.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HandshakeError{URL: url, StatusCode: resp.StatusCode, Err: err}
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(opts.MaxMessageBytes)
	cctx, cancel := context.WithCancelCause(context.Background())
	conn := &Conn{
		url:    url,
		opts:   opts,
		ws:     c,
		log:    log,
		ctx:    cctx,
		cancel: cancel,
		subs:   make(map[string]*Subscription),
		negs:   make(map[string]chan NegReply),
		oks:    make(map[string][]chan OKResult),
	}
	conn.wg.Add(2)
	go conn.readLoop()
	go conn.pingLoop()
	return conn, nil
}

// URL is the relay URL this connection was dialled with.
func (c *Conn) URL() string { return c.url }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Err tells why the connection ended (nil while it is up).
func (c *Conn) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{
		BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(),
		FramesIn: c.framesIn.Load(), FramesOut: c.framesOut.Load(),
	}
}

// Close ends the connection and waits for its goroutines.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	c.wg.Wait()
	return nil
}

func (c *Conn) shutdown(cause error) {
	if c.ctx.Err() != nil {
		return
	}
	c.cancel(cause)
	_ = c.ws.Close(ws.StatusNormalClosure, "")
}

func (c *Conn) write(ctx context.Context, msg []byte) error {
	if err := c.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrClosed, context.Cause(c.ctx))
	}
	wctx, cancel := context.WithTimeout(ctx, c.opts.WriteTimeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	if err := c.ws.Write(wctx, ws.MessageText, msg); err != nil {
		if c.ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrClosed, context.Cause(c.ctx))
		}
		if ctx.Err() == nil {
			// A failed write leaves the websocket unusable.
			c.shutdown(fmt.Errorf("write: %w", err))
		}
		return fmt.Errorf("write to %s: %w", c.url, err)
	}
	c.bytesOut.Add(uint64(len(msg)))
	c.framesOut.Add(1)
	return nil
}

// beforeRequest runs Options.BeforeRequest, bounded by ctx and by the
// connection's life.
func (c *Conn) beforeRequest(ctx context.Context) error {
	if c.opts.BeforeRequest == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	if err := c.opts.BeforeRequest(ctx); err != nil {
		if c.ctx.Err() != nil {
			return ErrClosed
		}
		return err
	}
	return nil
}

// Subscribe sends REQ with the given id and filters. Options.BeforeRequest,
// when set, runs first.
func (c *Conn) Subscribe(ctx context.Context, id string, filters nostr.Filters) (*Subscription, error) {
	if err := c.beforeRequest(ctx); err != nil {
		return nil, err
	}
	sub := &Subscription{
		ID: id, Filters: filters, conn: c,
		ch:   make(chan SubMsg, c.opts.SubscriptionBuffer),
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
	msg, err := nostr.ReqEnvelope{SubscriptionID: id, Filters: filters}.MarshalJSON()
	if err == nil {
		err = c.write(ctx, msg)
	}
	if err != nil {
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

// Publish sends an EVENT and returns a channel that receives its OK (or the
// reason none arrived). The channel has room for the result, so a caller may
// stop reading.
func (c *Conn) Publish(ctx context.Context, ev *nostr.Event) <-chan OKResult {
	return c.publish(ctx, ev)
}

func (c *Conn) publish(ctx context.Context, ev *nostr.Event) chan OKResult {
	ch := make(chan OKResult, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		ch <- OKResult{Err: ErrClosed}
		return ch
	}
	c.oks[ev.ID] = append(c.oks[ev.ID], ch)
	c.mu.Unlock()
	msg, err := nostr.EventEnvelope{Event: *ev}.MarshalJSON()
	if err == nil {
		err = c.write(ctx, msg)
	}
	if err != nil {
		c.resolveOK(ev.ID, ch, OKResult{Err: err})
	}
	return ch
}

// PublishWait publishes ev and waits for its OK.
func (c *Conn) PublishWait(ctx context.Context, ev *nostr.Event) OKResult {
	ch := c.publish(ctx, ev)
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		c.resolveOK(ev.ID, ch, OKResult{Err: ctx.Err()})
		return <-ch
	}
}

// resolveOK delivers r to one waiter (only) and unregisters it.
func (c *Conn) resolveOK(id string, ch chan OKResult, r OKResult) {
	c.mu.Lock()
	list := c.oks[id]
	for i, w := range list {
		if w == ch {
			list = append(list[:i], list[i+1:]...)
			if len(list) == 0 {
				delete(c.oks, id)
			} else {
				c.oks[id] = list
			}
			c.mu.Unlock()
			ch <- r
			return
		}
	}
	c.mu.Unlock()
}

// Challenge is the last AUTH challenge the relay sent ("" if none).
func (c *Conn) Challenge() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.challenge
}

// Authenticate answers the relay's AUTH challenge (NIP-42) with an event
// signed by sign, and waits for the relay's OK.
func (c *Conn) Authenticate(ctx context.Context, sign func(*nostr.Event) error) error {
	challenge := c.Challenge()
	if challenge == "" {
		return ErrNoChallenge
	}
	ev := nostr.Event{
		Kind:      nostr.KindClientAuthentication,
		CreatedAt: nostr.Now(),
		Tags:      nostr.Tags{{"relay", c.url}, {"challenge", challenge}},
	}
	if err := sign(&ev); err != nil {
		return fmt.Errorf("sign AUTH event: %w", err)
	}
	ch := make(chan OKResult, 1)
	c.mu.Lock()
	c.oks[ev.ID] = append(c.oks[ev.ID], ch)
	c.mu.Unlock()
	msg, err := nostr.AuthEnvelope{Event: ev}.MarshalJSON()
	if err == nil {
		err = c.write(ctx, msg)
	}
	if err != nil {
		c.resolveOK(ev.ID, ch, OKResult{Err: err})
	}
	var r OKResult
	select {
	case r = <-ch:
	case <-ctx.Done():
		c.resolveOK(ev.ID, ch, OKResult{Err: ctx.Err()})
		r = <-ch
	}
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
	msg, err := nip77.OpenEnvelope{SubscriptionID: subID, Filter: filter, Message: msgHex}.MarshalJSON()
	if err == nil {
		err = c.write(ctx, msg)
	}
	if err != nil {
		c.dropNeg(subID)
		return nil, err
	}
	return ch, nil
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

func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer c.teardown()
	for {
		data, err := c.readMessage()
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
// then gives it PongTimeout to arrive whole: a relay that trickles a
// message (in fragments, while still answering pings) is dropped.
func (c *Conn) readMessage() ([]byte, error) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	_, r, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	t := time.AfterFunc(c.opts.PongTimeout, func() {
		cancel(fmt.Errorf("message not complete within %s", c.opts.PongTimeout))
	})
	defer t.Stop()
	data, err := io.ReadAll(r)
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return data, err
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
	msg := string(data)
	label := frameLabel(msg)
	if c.opts.OnFrame != nil {
		c.opts.OnFrame(label, len(data))
	}
	switch label {
	case "EVENT":
		var env nostr.EventEnvelope
		if err := env.FromJSON(msg); err != nil || env.SubscriptionID == nil {
			return
		}
		c.mu.Lock()
		sub := c.subs[*env.SubscriptionID]
		c.mu.Unlock()
		if sub == nil {
			return
		}
		ev := env.Event
		c.deliver(sub, SubMsg{Type: MsgEvent, Event: &ev, Size: len(data)})
	case "EOSE":
		var env nostr.EOSEEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.mu.Lock()
		sub := c.subs[string(env)]
		c.mu.Unlock()
		if sub != nil {
			c.deliver(sub, SubMsg{Type: MsgEOSE})
		}
	case "CLOSED":
		var env nostr.ClosedEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.mu.Lock()
		sub := c.subs[env.SubscriptionID]
		c.mu.Unlock()
		if sub != nil {
			if c.opts.OnClosed != nil {
				c.opts.OnClosed(env.SubscriptionID, env.Reason)
			}
			c.deliver(sub, SubMsg{Type: MsgClosed, Reason: env.Reason})
			c.unsubscribe(sub, false)
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
		c.mu.Lock()
		ids := make([]string, 0, len(c.negs))
		for id := range c.negs {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			c.deliverNeg(id, NegReply{Notice: string(env)})
		}
	case "OK":
		var env nostr.OKEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.mu.Lock()
		list := c.oks[env.EventID]
		delete(c.oks, env.EventID)
		c.mu.Unlock()
		for _, ch := range list {
			ch <- OKResult{OK: env.OK, Reason: env.Reason}
		}
	case "AUTH":
		var env nostr.AuthEnvelope
		if env.FromJSON(msg) != nil || env.Challenge == nil {
			return
		}
		c.mu.Lock()
		c.challenge = *env.Challenge
		c.mu.Unlock()
	case "NEG-MSG":
		var env nip77.MessageEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		c.deliverNeg(env.SubscriptionID, NegReply{Msg: env.Message})
	case "NEG-ERR", "NEG-ERROR":
		var env nip77.ErrorEnvelope
		if env.FromJSON(msg) != nil {
			return
		}
		reason := env.Reason
		if reason == "" {
			reason = "unspecified"
		}
		c.deliverNeg(env.SubscriptionID, NegReply{Err: reason})
	}
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

// teardown ends every waiter when the connection ends.
func (c *Conn) teardown() {
	c.mu.Lock()
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	oks := c.oks
	c.oks = make(map[string][]chan OKResult)
	for id, ch := range c.negs {
		close(ch)
		delete(c.negs, id)
	}
	c.mu.Unlock()
	for _, s := range subs {
		c.unsubscribe(s, false)
		close(s.ch)
	}
	err := fmt.Errorf("%w: %v", ErrClosed, context.Cause(c.ctx))
	for _, list := range oks {
		for _, ch := range list {
			ch <- OKResult{Err: err}
		}
	}
}

// IsHardDialError reports failures that quick retries will not fix: DNS
// failures and endpoints that are not websockets. A handshake answered 408,
// 429 or 5xx is not hard: the relay is busy or restarting.
func IsHardDialError(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && !dnsErr.IsTemporary && !dnsErr.IsTimeout {
		return true
	}
	var hs *HandshakeError
	if errors.As(err, &hs) {
		code := hs.StatusCode
		return code != http.StatusRequestTimeout && code != http.StatusTooManyRequests && code < 500
	}
	return errors.Is(err, ErrNotWebsocket)
}
