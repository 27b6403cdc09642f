package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ws "github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/setting"
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

// Settings are the user settings of every connection: the
// configuration's relay section. Each carries its YAML key and help text
// (flag, environment variable and documentation are derived from them).
type Settings struct {
	// MaxMessageBytes bounds one inbound frame. strfry sends NEG-MSG frames
	// near 1 MiB, so keep it at least that.
	MaxMessageBytes int `yaml:"max_message_bytes" help:"Largest inbound WebSocket message in bytes (at least 1 MiB: strfry sends ~1 MB NEG-MSG frames)."`
	// WriteTimeout bounds every write.
	WriteTimeout time.Duration `yaml:"write_timeout" help:"Deadline for writing one message."`
	// PingInterval is how often a ping is sent; PongTimeout is how long the
	// relay has to answer it (a relay that stalls mid-frame cannot answer, so
	// this is also the slow-loris defence).
	PingInterval time.Duration `yaml:"ping_interval" help:"Interval between WebSocket pings."`
	PongTimeout  time.Duration `yaml:"pong_timeout" help:"Read deadline: a connection silent (no message, no pong) this long is dropped. Must exceed ping_interval."`
	// WriteFailedGrace bounds how long a failed write waits for the read
	// loop to end with the relay's reason for closing the connection
	// (status 1009 for a message too big), so the write reports that
	// reason rather than the reset it ran into. 0: it does not wait.
	WriteFailedGrace time.Duration `yaml:"write_failed_grace" help:"How long a failed write waits for the relay's reason for closing the connection (status 1009: message too big, from which a smaller limit is learned) before reporting the failure as it is; 0: no wait."`
	// ReadPause is how long a read waits after one that emptied the
	// socket, so that a relay streaming events, OKs or echoes has its
	// messages read many per system call rather than each with its own
	// wake-up and read.
	// Every message is read at most this much later (the handshake is not
	// paced). On Linux the socket's receive low-water mark is raised for
	// the pause, so what arrives meanwhile wakes no thread unless 32 kB
	// wait (less on a small receive buffer) or the connection ends. 0: at
	// once; at most MaxReadPause. It needs what CoalesceWrites needs of
	// HTTPClient's transport.
	ReadPause time.Duration `yaml:"read_pause" help:"How long a read waits after one that emptied the socket, so a relay streaming messages has them read many per system call, not each with its own wake-up and read (BENCHMARKS.md, \"Decisions the numbers justified\"); every message is read at most this much later. 0: at once; at most 100ms."`
	// ConnectTimeout bounds establishing one connection; Dial does not
	// apply it: callers bound the context they give Dial with it (health
	// may use a shorter one, its current backoff).
	ConnectTimeout time.Duration `yaml:"connect_timeout" help:"Upper bound for establishing a connection (health may use a shorter one, its current backoff)."`
}

// MinMessageBytes is the least Settings.MaxMessageBytes: strfry sends
// NEG-MSG frames near 1 MiB.
const MinMessageBytes = 1 << 20

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (s Settings) Validate() error {
	v := setting.Checks{}
	if s.MaxMessageBytes < MinMessageBytes {
		v.Fail("max_message_bytes", "must be >= "+strconv.Itoa(MinMessageBytes), s.MaxMessageBytes)
	}
	v.Positive("write_timeout", s.WriteTimeout)
	v.Positive("ping_interval", s.PingInterval)
	v.Positive("pong_timeout", s.PongTimeout)
	v.NonNegative("write_failed_grace", s.WriteFailedGrace)
	v.NonNegative("read_pause", s.ReadPause)
	if s.ReadPause > MaxReadPause {
		v.Fail("read_pause", "must be <= "+setting.FormatDuration(MaxReadPause), s.ReadPause)
	}
	if s.PongTimeout > 0 && s.PingInterval > 0 {
		v.Compare("pong_timeout", s.PongTimeout, ">", "ping_interval", s.PingInterval)
	}
	v.Positive("connect_timeout", s.ConnectTimeout)
	return v.Err()
}

// Options configure a connection. Dial requires every bound (it applies
// no defaults of its own); start from DefaultOptions.
type Options struct {
	Settings
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
	// OnClosedTagValues, when set, is called like OnClosed for a CLOSED of
	// an open subscription, with the most values one tag of one of the
	// filters the relay refused or ended carried (what a "too many tag
	// values" refusal teaches; the filters themselves are not kept once the
	// REQ is sent).
	OnClosedTagValues func(reason string, most int)
	// OnNegErr, when set, is called from the reader goroutine with the id
	// and reason of every NEG-ERR before the session sees it, and OnOK
	// with every OK before the publisher does, so a rate limit they signal
	// is recorded before anyone retries. They must return quickly.
	OnNegErr func(subID, reason string)
	OnOK     func(eventID string, ok bool, reason string)
	// OnChallenge, when set, is called from the reader goroutine for every
	// NIP-42 AUTH challenge the relay sends; it must not block.
	OnChallenge func(challenge string)
	// OnFrame, when set, is called from the reader goroutine with every
	// inbound frame's label and size; it must not block.
	OnFrame func(label string, size int)
	// OnDropped, when set, is called from the reader goroutine for every
	// EVENT that reaches no subscription: reason DropClosedSubscription
	// (a subscription id not open, e.g. closed by us before the relay
	// stopped sending) or DropMalformed (an event object that does not
	// decode). It must not block.
	OnDropped func(reason string)
	// NoRaw leaves SubMsg.Raw nil: for a connection whose events are
	// never forwarded (the own relay's), the copy is saved.
	NoRaw bool
	// CoalesceWrites lets Cork and Uncork put a burst of messages into
	// one write to the socket (the own relay's publisher connection). It
	// needs HTTPClient's transport to be an *http.Transport without Dial,
	// DialTLS or DialTLSContext functions of its own (or none).
	CoalesceWrites bool
	// Logger receives debug-level protocol oddities.
	Logger *zap.Logger
	// BeforeRequest, when set, is called by Subscribe and NegOpen before
	// anything is registered or sent; an error aborts the call with it. It
	// may block, e.g. while the relay's rate-limit cooldown runs, and must
	// return when ctx is done.
	BeforeRequest func(ctx context.Context) error
}

// DefaultConnectTimeout bounds establishing one connection
// (Settings.ConnectTimeout); callers apply it to the context they give
// Dial.
const DefaultConnectTimeout = 5 * time.Second

// MaxReadPause bounds Options.ReadPause: a pause is meant to be a few
// milliseconds, and a unit slip (2s for 2ms) would delay every pong and
// close handshake by it.
const MaxReadPause = 100 * time.Millisecond

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Settings:           DefaultSettings(),
		SubscriptionBuffer: 256,
		Header:             http.Header{"User-Agent": {"grasp-sync"}},
	}
}

// DefaultSettings returns the defaults of every connection's settings.
func DefaultSettings() Settings {
	return Settings{
		MaxMessageBytes:  4 << 20,
		WriteTimeout:     10 * time.Second,
		PingInterval:     30 * time.Second,
		PongTimeout:      60 * time.Second,
		WriteFailedGrace: time.Second,
		ReadPause:        2 * time.Millisecond,
		ConnectTimeout:   DefaultConnectTimeout,
	}
}

// validate requires every bound of the connection: Dial applies no
// defaults of its own (start from DefaultOptions). A nil Header sends none.
func (o Options) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxMessageBytes", int64(o.MaxMessageBytes)},
		{"WriteTimeout", int64(o.WriteTimeout)},
		{"PingInterval", int64(o.PingInterval)},
		{"PongTimeout", int64(o.PongTimeout)},
		{"SubscriptionBuffer", int64(o.SubscriptionBuffer)},
	} {
		if f.v <= 0 {
			return fmt.Errorf("relay: Options.%s must be positive, got %d", f.name, f.v)
		}
	}
	if o.ReadPause < 0 || o.ReadPause > MaxReadPause {
		return fmt.Errorf("relay: Options.ReadPause must be within 0–%v, got %v", MaxReadPause, o.ReadPause)
	}
	return nil
}

// MsgType tells what a SubMsg carries.
type MsgType uint8

// Subscription message types.
const (
	MsgEvent MsgType = iota + 1
	MsgEOSE
	MsgClosed
	// MsgCount is the answer to a COUNT (Conn.Count), its count in Size.
	MsgCount
)

// SubMsg is one item of a subscription's ordered stream: an event, the EOSE
// marker, or the relay's CLOSED with its reason. Events before EOSE are
// stored events; events after it are live.
type SubMsg struct {
	Type MsgType
	// idOK: id holds Event's id, decoded by the read loop.
	idOK bool
	// approximate: a MsgCount's count is an estimate.
	approximate bool
	Event       *nostr.Event
	Size        int    // bytes of the EVENT frame; a MsgCount's count
	Reason      string // CLOSED reason
	// Raw is the event as it arrived: the JSON object of the EVENT frame,
	// byte for byte (nil when it could not be delimited safely, and on a
	// connection dialled with Options.NoRaw). It is
	// forwarded as is (Conn.Send with raw) instead of re-encoding Event.
	Raw []byte
	// id is Event's id as the read loop decoded it (Subscription.Incoming
	// hands it on). A message stays this small, with no relay URL or
	// subscription id of its own, as every subscription's queue is
	// allocated whole.
	id event.ID
}

// Subscription is an open REQ.
type Subscription struct {
	ID string
	// tagValues is the most values one tag of one filter of the REQ
	// carried (Options.OnClosedTagValues).
	tagValues int
	// counting: a COUNT's (Conn.Count), the only kind a COUNT frame
	// reaches.
	counting bool
	conn     *Conn
	ch       chan SubMsg
	done     chan struct{}
	once     sync.Once
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
	s.unregister(true)
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
	// MaxFrameOut is the size of the largest message sent, or tried: a
	// message whose write failed counts (a relay closing the connection
	// for a message too big may do so while it is still being written).
	MaxFrameOut uint64
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
	// readDone is closed when the read loop has ended (and recorded why).
	readDone chan struct{}

	// mu guards the subscription registry, the open NIP-77 sessions, the
	// EVENTs awaiting their OK and the NIP-42 challenge. Registering in
	// any of them checks ctx under it; teardown ends them all under it.
	mu sync.Mutex
	// subs are the open subscriptions (subscribe.go).
	subs subTable
	// negs are the open NIP-77 sessions (neg.go).
	negs negSessions
	// oks are the EVENTs awaiting their OK (ok.go).
	oks okTable
	// challenge is the last NIP-42 AUTH challenge the relay sent.
	challenge string

	// cork is the socket when writes are coalesced (Options.CoalesceWrites).
	cork *corkConn
	// dec decodes events; the read loop's alone.
	dec eventDecoder

	bytesIn, bytesOut, framesIn, framesOut atomic.Uint64
	maxFrameOut                            atomic.Uint64
	stalls                                 atomic.Int32
}

// Dial connects to url. ctx bounds the handshake only.
func Dial(ctx context.Context, url string, opts Options) (*Conn, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	hc := opts.HTTPClient
	var cork *corkConn
	hc, _ = corkingClient(hc, opts, &cork)
	c, resp, err := ws.Dial(ctx, url, &ws.DialOptions{
		HTTPClient:      hc,
		HTTPHeader:      opts.Header,
		CompressionMode: ws.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HandshakeError{URL: url, StatusCode: resp.StatusCode, Err: err}
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(int64(opts.MaxMessageBytes))
	if cork != nil {
		// Not during the handshake; nothing reads the socket until the
		// read loop starts below.
		cork.pause = opts.ReadPause
	}
	cctx, cancel := context.WithCancelCause(context.Background())
	conn := &Conn{
		url:    url,
		opts:   opts,
		ws:     c,
		log:    log,
		ctx:    cctx,
		cancel: cancel,
		subs:   subTable{},
		negs:   negSessions{},
		oks:    okTable{},
		cork:   cork,

		readDone: make(chan struct{}),
	}
	conn.wg.Add(2)
	// CPU profiles tell each relay's reading apart (go tool pprof
	// -tagfocus relay=...).
	go pprof.Do(context.Background(), pprof.Labels("relay", url), func(context.Context) { conn.readLoop() })
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
		MaxFrameOut: c.maxFrameOut.Load(),
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
	// Corked, the message only goes into a buffer: Uncork writes it out
	// within the write timeout, and a connection that ends meanwhile
	// fails that write. Nothing in it waits on ctx, and a context that is
	// never done spares the websocket registering a callback on ctx for
	// every message.
	var wctx context.Context
	held := c.cork != nil && c.cork.held.Load()
	if held {
		wctx = context.WithoutCancel(ctx)
	} else {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, c.opts.WriteTimeout)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
	}
	for n := uint64(len(msg)); ; {
		old := c.maxFrameOut.Load()
		if n <= old || c.maxFrameOut.CompareAndSwap(old, n) {
			break
		}
	}
	if c.cork != nil && !held {
		// The message's frames go out in one write.
		c.cork.beginMsg()
	}
	err := c.ws.Write(wctx, ws.MessageText, msg)
	if c.cork != nil && !held {
		if ferr := c.cork.endMsg(); err == nil {
			err = ferr
		}
	}
	if err != nil {
		if c.ctx.Err() == nil && ctx.Err() == nil && wctx.Err() == nil {
			// The socket failed under the write: the relay may have
			// closed the connection with a reason (status 1009 for a
			// message too big) that the read loop is about to read.
			// That reason, not the reset the write ran into, is why
			// the connection ended.
			if g := c.opts.WriteFailedGrace; g > 0 {
				t := time.NewTimer(g)
				select {
				case <-c.readDone:
				case <-t.C:
				}
				t.Stop()
			}
		}
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

// MessageTooBig tells whether err (a Conn's Err) is the relay closing the
// connection with status 1009 because a message we sent was over its limit
// (khatru's and strfry's answer to a message above their maximum).
func MessageTooBig(err error) bool {
	return ws.CloseStatus(err) == ws.StatusMessageTooBig
}

// ClosedInOrder tells whether err (a Conn's Err) is the relay ending the
// connection with a close frame while it goes on serving: any status but
// going away (1001), policy violation (1008), message too big (1009) and
// try again later (1013). A connection cut without a close frame (EOF, a
// reset) is not: the relay or a proxy before it may be in trouble.
func ClosedInOrder(err error) bool {
	switch ws.CloseStatus(err) {
	case -1, ws.StatusGoingAway, ws.StatusPolicyViolation, ws.StatusMessageTooBig, ws.StatusTryAgainLater:
		return false
	}
	return true
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

// teardown ends every waiter when the connection ends.
func (c *Conn) teardown() {
	c.mu.Lock()
	subs := c.subs.all()
	oks := c.oks
	c.oks = okTable{}
	c.negs.dropAll()
	c.mu.Unlock()
	for _, s := range subs {
		s.unregister(false)
		close(s.ch)
	}
	err := fmt.Errorf("%w: %v", ErrClosed, context.Cause(c.ctx))
	for id, ws := range oks {
		ws.each(func(w okWaiter) { w.deliver(id, OKResult{Err: err}, c.ctx.Done()) })
	}
}

// locked runs f with mu held, released however f ends: the read loop
// recovers from a frame that panics (handle), and the connection's lock
// must not stay held then.
func locked(mu *sync.Mutex, f func()) {
	mu.Lock()
	defer mu.Unlock()
	f()
}
