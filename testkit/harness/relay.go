package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/fiatjaf/eventstore"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip11"
)

// Defaults of RelayOptions.
const (
	// DefaultMaxMessageSize is khatru's limit on one client message.
	DefaultMaxMessageSize = 512000
	// DefaultLogLimit bounds each message log (received and sent).
	DefaultLogLimit = 200000
)

// ErrNotRunning is returned by Stop on a relay that is already stopped.
var ErrNotRunning = errors.New("harness: relay not running")

// RelayOptions configures a test relay. The zero value is an uncapped relay
// without NIP-77 that accepts every valid event.
type RelayOptions struct {
	// Name is announced in NIP-11.
	Name string
	// Addr is the listen address; default "127.0.0.1:0" (a free port).
	Addr string
	// Negentropy turns NIP-77 on (served in order per connection on the
	// uncapped store, see negentropy.go). When off, NEG-OPEN is answered with
	// khatru's NOTICE "failed to parse envelope: unknown label".
	Negentropy bool
	// NegIdleTimeout drops a negentropy session idle this long; default
	// DefaultNegIdleTimeout (khatru's 7 s).
	NegIdleTimeout time.Duration
	// ReqCap, when positive, silently truncates every REQ filter to the
	// newest ReqCap matching events (like strfry's maxFilterLimit 500); a
	// smaller filter limit still applies. Negentropy sets are not capped by it.
	// It is announced in NIP-11 as max_limit.
	ReqCap int
	// NegMaxEvents, when positive, answers a NEG-OPEN whose filter matches
	// more events with ["NEG-ERR", id, "blocked: too many query results"]
	// (strfry's maxSyncEvents).
	NegMaxEvents int
	// SilentReqCap, when positive, truncates every REQ filter to the newest
	// SilentReqCap matching events like ReqCap but announces nothing (khatru
	// on its default slicestore: 500).
	SilentReqCap int
	// NegCap, when positive, builds every negentropy set from the newest
	// NegCap matching events only, while NIP-77 is advertised (khatru on its
	// slicestore caps negentropy sessions at 500 too).
	NegCap int
	// DefaultLimit, when positive, is how many events a REQ filter without
	// limit gets; with MaxHonouredLimit, a limit above MaxHonouredLimit also
	// falls back to it, silently (ngit-relay: 250 and 1000). Not announced.
	DefaultLimit     int
	MaxHonouredLimit int
	// IgnoreLimit serves REQ filters as if they had no limit (the caps above
	// still apply).
	IgnoreLimit bool
	// IgnoreUntil serves REQ filters as if they had no until (a broken
	// relay: paging with until cannot get past its newest page).
	IgnoreUntil bool
	// NegNotice, when set, advertises NIP-77 in NIP-11 but answers every
	// NEG-OPEN with a NOTICE carrying it (e.g. "negentropy disabled", as
	// strfry with negentropy off does).
	NegNotice string
	// MaxFilters, when positive, answers a REQ with more filters with
	// CLOSED "invalid: too many filters" (strfry's maxReqFilterSize 200).
	// NIP-11 does not announce it.
	MaxFilters int
	// MaxTagValues, when positive, answers a REQ with a filter carrying
	// more values for one tag with CLOSED ReasonTooManyTagValues
	// (eventstore's SQL backends limit tag values per query).
	MaxTagValues int
	// HoldPurgatory, when set, answers a published event it returns true
	// for with OK true ReasonPurgatory and keeps it out of the store (a
	// GRASP-01 relay waiting for the event's git data): ReleaseHeld stores
	// the held events (without live delivery), DiscardHeld drops them.
	HoldPurgatory func(ev *nostr.Event) bool
	// Policy decides which published events are accepted; nil accepts all.
	// It is not applied to Inject.
	Policy Policy
	// Hide, when set, keeps the stored events it returns true for out of
	// every REQ answer and live delivery: a relay whose read rules hide
	// what it accepted (it answered OK true). NIP-77 sessions, Query and
	// Has still see them.
	Hide func(ev *nostr.Event) bool
	// MaxSubscriptions is announced in NIP-11 (limitation.max_subscriptions).
	MaxSubscriptions int
	// EnforceMaxSubscriptions makes the relay answer a REQ that would open
	// more than MaxSubscriptions subscriptions on one connection with NOTICE
	// "ERROR: too many concurrent REQs" and ignore it, as strfry does.
	EnforceMaxSubscriptions bool
	// AuthWrites answers EVENTs on connections that have not completed
	// NIP-42 AUTH with an AUTH challenge and OK false ReasonAuthRequired.
	AuthWrites bool
	// AuthReads answers REQs on connections that have not completed NIP-42
	// AUTH with an AUTH challenge and CLOSED ReasonAuthRequired.
	AuthReads bool
	// AuthChallengeOnConnect sends a NIP-42 AUTH challenge as soon as a
	// connection opens (as many relays do), whether or not AUTH is needed.
	AuthChallengeOnConnect bool
	// NIP11Extra adds fields to the NIP-11 document, e.g.
	// {"supported_grasps": ["GRASP-01"]}.
	NIP11Extra map[string]any
	// MaxMessageSize limits one client message; default DefaultMaxMessageSize.
	// A larger message closes the connection with status 1009 (khatru).
	MaxMessageSize int64
	// AnnounceMaxMessage is the max_message_length NIP-11 announces: 0
	// announces MaxMessageSize, a negative value none, a positive value
	// that one (a relay announcing more than it enforces).
	AnnounceMaxMessage int64
	// Faults are the initial fault settings; change them with SetFaults.
	Faults Faults
	// Store is the event store; default a new empty Store. Several relays
	// may share one.
	Store *Store
	// LogLimit bounds each message log; default DefaultLogLimit. Older
	// entries are discarded first.
	LogLimit int
	// KhatruLog receives khatru's own log lines; default discarded.
	KhatruLog io.Writer
}

// Relay is a khatru relay on 127.0.0.1 behind an observing, fault-injecting
// WebSocket proxy. The proxy owns the public port, which stays the same across
// Stop and Restart.
type Relay struct {
	opts    RelayOptions
	store   *Store
	khatru  *khatru.Relay
	addr    string // public host:port
	faults  atomic.Pointer[Faults]
	backend *http.Server
	backURL string

	mu        sync.Mutex // lifecycle
	running   bool
	closed    bool
	srv       *http.Server
	runCancel context.CancelFunc
	conns     map[*proxyConn]struct{}
	handlers  sync.WaitGroup

	obs observer

	heldMu sync.Mutex
	held   map[string]*nostr.Event
}

// StartRelay starts a relay with opts and returns it running.
func StartRelay(opts RelayOptions) (*Relay, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.LogLimit == 0 {
		opts.LogLimit = DefaultLogLimit
	}
	if opts.NegIdleTimeout == 0 {
		opts.NegIdleTimeout = DefaultNegIdleTimeout
	}
	r := &Relay{opts: opts, store: opts.Store, conns: make(map[*proxyConn]struct{})}
	if r.store == nil {
		r.store = NewStore()
	}
	r.obs.init(opts.LogLimit)
	f := opts.Faults
	r.faults.Store(&f)

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("harness: listen %s: %w", opts.Addr, err)
	}
	r.addr = ln.Addr().String()

	r.khatru = r.newKhatru()
	backLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("harness: listen backend: %w", err)
	}
	r.backURL = "ws://" + backLn.Addr().String()
	r.backend = &http.Server{Handler: r.khatru, ErrorLog: log.New(io.Discard, "", 0)}
	go r.backend.Serve(backLn)

	r.serve(ln)
	return r, nil
}

// announcedMaxMessage is the max_message_length of the NIP-11 document
// (0: none).
func (r *Relay) announcedMaxMessage() int {
	switch a := r.opts.AnnounceMaxMessage; {
	case a < 0:
		return 0
	case a > 0:
		return int(a)
	}
	return int(r.opts.MaxMessageSize)
}

func (r *Relay) newKhatru() *khatru.Relay {
	k := khatru.NewRelay()
	out := r.opts.KhatruLog
	if out == nil {
		out = io.Discard
	}
	k.Log = log.New(out, "[khatru "+r.addr+"] ", log.LstdFlags)
	k.ServiceURL = "http://" + r.addr
	k.MaxMessageSize = r.opts.MaxMessageSize
	k.Info.Name = r.opts.Name
	k.Info.URL = r.URL()
	k.Info.AddSupportedNIP(34)
	if r.opts.Negentropy || r.opts.NegNotice != "" {
		k.Info.AddSupportedNIP(77)
	}
	k.Info.Limitation = &nip11.RelayLimitationDocument{
		MaxMessageLength: r.announcedMaxMessage(),
		MaxSubscriptions: r.opts.MaxSubscriptions,
		MaxLimit:         r.opts.ReqCap,
		RestrictedWrites: r.opts.Policy != nil,
	}
	k.StoreEvent = append(k.StoreEvent, r.storeAndBroadcast)
	k.ReplaceEvent = append(k.ReplaceEvent, r.storeAndBroadcast)
	k.DeleteEvent = append(k.DeleteEvent, r.store.DeleteEvent)
	k.CountEvents = append(k.CountEvents, r.store.CountEvents)
	k.QueryEvents = append(k.QueryEvents, func(ctx context.Context, f nostr.Filter) (chan *nostr.Event, error) {
		f.Limit = r.queryLimit(f.Limit)
		if r.opts.IgnoreUntil {
			f.Until = nil
		}
		evs := r.store.Match(f, r.reqCap())
		if r.opts.Hide != nil {
			evs = slices.DeleteFunc(slices.Clone(evs), r.opts.Hide)
		}
		return streamEvents(ctx, evs), nil
	})
	if r.opts.Policy != nil {
		k.RejectEvent = append(k.RejectEvent, func(_ context.Context, ev *nostr.Event) (bool, string) {
			if r.store.Get(ev.ID) != nil {
				return false, "" // khatru reports the duplicate itself
			}
			ok, reason := r.opts.Policy(r, ev)
			return !ok, reason
		})
	}
	return k
}

// queryLimit is the limit a REQ filter asking for limit is served with
// (0: no limit), after IgnoreLimit, DefaultLimit and MaxHonouredLimit.
func (r *Relay) queryLimit(limit int) int {
	o := r.opts
	if o.IgnoreLimit {
		limit = 0
	}
	if o.DefaultLimit > 0 && (limit <= 0 || o.MaxHonouredLimit > 0 && limit > o.MaxHonouredLimit) {
		limit = o.DefaultLimit
	}
	return limit
}

// reqCap is the smaller positive of ReqCap and SilentReqCap (0: none).
func (r *Relay) reqCap() int {
	c, s := r.opts.ReqCap, r.opts.SilentReqCap
	if c <= 0 || s > 0 && s < c {
		return s
	}
	return c
}

// serve starts the public front door on ln.
func (r *Relay) serve(ln net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.handle(ctx, w, req) }),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	r.mu.Lock()
	r.srv, r.runCancel, r.running = srv, cancel, true
	r.mu.Unlock()
	go srv.Serve(ln)
}

// URL returns the relay's WebSocket URL, ws://127.0.0.1:port.
func (r *Relay) URL() string { return "ws://" + r.addr }

// HTTPURL returns the relay's HTTP URL (for NIP-11), http://127.0.0.1:port.
func (r *Relay) HTTPURL() string { return "http://" + r.addr }

// Addr returns the relay's host:port.
func (r *Relay) Addr() string { return r.addr }

// Store returns the relay's event store.
func (r *Relay) Store() *Store { return r.store }

// Options returns the options the relay was started with (with defaults).
func (r *Relay) Options() RelayOptions { return r.opts }

// Running reports whether the relay accepts connections.
func (r *Relay) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// Stop closes the listener and every client connection, keeping the store
// and the port number for Restart. Connecting to a stopped relay fails with
// "connection refused".
func (r *Relay) Stop() error {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return ErrNotRunning
	}
	r.running = false
	srv, cancel := r.srv, r.runCancel
	r.mu.Unlock()
	conns := r.connections()

	cancel()
	err := srv.Close()
	for _, c := range conns {
		c.kill()
	}
	r.handlers.Wait()
	if err != nil {
		return fmt.Errorf("harness: stop %s: %w", r.addr, err)
	}
	return nil
}

// Restart starts a stopped relay again on the same port with the same store.
// A running relay is stopped first. Subscriptions do not survive.
func (r *Relay) Restart() error {
	r.mu.Lock()
	running, closed := r.running, r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("harness: restart %s: relay closed", r.addr)
	}
	if running {
		if err := r.Stop(); err != nil {
			return err
		}
	}
	// the listener sets SO_REUSEADDR, so the port is free again at once
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("harness: restart %s: %w", r.addr, err)
	}
	r.serve(ln)
	return nil
}

// DropConnections abruptly closes every open client connection; the relay
// keeps listening.
func (r *Relay) DropConnections() {
	for _, c := range r.connections() {
		c.kill()
	}
}

// connections returns the open client connections.
func (r *Relay) connections() []*proxyConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	conns := make([]*proxyConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	return conns
}

// Close stops the relay for good and releases its port.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	err := r.Stop()
	if errors.Is(err, ErrNotRunning) {
		err = nil
	}
	if berr := r.backend.Close(); berr != nil && err == nil {
		err = fmt.Errorf("harness: close backend: %w", berr)
	}
	return err
}

// SetFaults replaces the fault settings; they apply to messages handled from
// now on, on existing and new connections.
func (r *Relay) SetFaults(f Faults) { r.faults.Store(&f) }

// Faults returns the current fault settings.
func (r *Relay) Faults() Faults { return *r.faults.Load() }

// Inject stores events directly, bypassing policy and subscriptions (live
// subscribers do not see them: "the subscription missed it"). It returns how
// many were stored.
func (r *Relay) Inject(evs ...*nostr.Event) int { return r.store.Put(evs...) }

// Delete removes events from the store behind the clients' back and returns
// how many existed.
func (r *Relay) Delete(ids ...string) int { return r.store.Remove(ids...) }

// Query returns the stored events matching filter, newest first, ignoring
// ReqCap (filter.Limit applies when positive).
func (r *Relay) Query(filter nostr.Filter) []*nostr.Event { return r.store.Match(filter, 0) }

// Count returns how many stored events match filter (its limit ignored).
func (r *Relay) Count(filter nostr.Filter) int {
	filter.Limit = 0
	return len(r.store.Match(filter, 0))
}

// Has reports whether the store holds the event with id.
func (r *Relay) Has(id string) bool { return r.store.Get(id) != nil }

// IDs returns the ids of all stored events, newest first.
func (r *Relay) IDs() []string { return r.store.IDs() }

// Len returns the number of stored events.
func (r *Relay) Len() int { return r.store.Len() }

// handle serves one HTTP request on the front door.
func (r *Relay) handle(ctx context.Context, w http.ResponseWriter, req *http.Request) {
	f := r.Faults()
	if f.Refuse {
		r.obs.refused()
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if f.PlainHTTP {
		r.obs.refused()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>not a relay</body></html>\n")
		return
	}
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		if len(r.opts.NIP11Extra) > 0 && strings.Contains(req.Header.Get("Accept"), "application/nostr+json") {
			r.serveNIP11(w, req)
			return
		}
		r.khatru.ServeHTTP(w, req)
		return
	}

	r.mu.Lock()
	if !r.running || ctx.Err() != nil {
		r.mu.Unlock()
		http.Error(w, "stopping", http.StatusServiceUnavailable)
		return
	}
	r.handlers.Add(1)
	r.mu.Unlock()
	defer r.handlers.Done()

	client, err := websocket.Accept(w, req, &websocket.AcceptOptions{
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return
	}
	client.SetReadLimit(r.opts.MaxMessageSize)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	upstream, _, err := websocket.Dial(cctx, r.backURL, &websocket.DialOptions{
		CompressionMode: websocket.CompressionDisabled,
		HTTPHeader:      http.Header{"X-Forwarded-For": {req.RemoteAddr}},
	})
	if err != nil {
		client.Close(websocket.StatusInternalError, "backend unavailable")
		return
	}
	upstream.SetReadLimit(-1)

	c := &proxyConn{r: r, client: client, upstream: upstream, cancel: cancel, subs: make(map[string]struct{}), challenge: newChallenge()}
	c.id = r.obs.connect()
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		c.kill()
		r.obs.disconnect(c)
	}()

	if f := r.Faults(); f.CutAfter > 0 {
		cut := time.AfterFunc(f.cutDuration(), c.kill)
		defer cut.Stop()
	}
	read := c.client.Read
	if d := r.Faults().Latency; d > 0 {
		read = c.startLatency(cctx, d)
	}
	if r.opts.AuthChallengeOnConnect {
		c.sendJSON(cctx, []any{"AUTH", c.challenge})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.pumpDown(cctx)
	}()
	c.pumpUp(cctx, read)
	c.kill()
	<-done
}

// serveNIP11 serves khatru's NIP-11 document with NIP11Extra merged in.
func (r *Relay) serveNIP11(w http.ResponseWriter, req *http.Request) {
	rec := httptest.NewRecorder()
	r.khatru.ServeHTTP(rec, req)
	doc := map[string]any{}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		http.Error(w, "bad NIP-11 document", http.StatusInternalServerError)
		return
	}
	for k, v := range r.opts.NIP11Extra {
		doc[k] = v
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	json.NewEncoder(w).Encode(doc)
}

func newChallenge() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Publish publishes evs to this relay through its front door (see Publish).
func (r *Relay) Publish(ctx context.Context, evs ...*nostr.Event) error {
	return Publish(ctx, r.URL(), evs...)
}

// storeAndBroadcast stores ev and delivers it to the live subscriptions the
// proxy tracks. khatru's own broadcast is switched off (ErrDupEvent makes
// khatru skip it and still answer OK true): khatru v0.19.1's
// notifyListeners reads its listener slice and their filters without the
// lock its REQ, CLOSE and disconnect paths write them under, a data race
// that -race reports in any test with concurrent clients.
func (r *Relay) storeAndBroadcast(_ context.Context, ev *nostr.Event) error {
	stored, err := r.store.saveReport(ev)
	if err != nil {
		return err
	}
	if stored && (r.opts.Hide == nil || !r.opts.Hide(ev)) {
		for _, c := range r.connections() {
			c.deliverLive(ev)
		}
	}
	return eventstore.ErrDupEvent
}
