package historic

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Results of ngit_sync_read_auth_total.
const (
	authOK     = "authenticated"
	authNoKey  = "no_key"
	authFailed = "failed"
)

// ReadAuth answers remote relays that want to know who reads (NIP-42): the
// first "auth-required:" on a connection authenticates it with the
// configured key, once, and the request is sent again. Without a key the
// relay is recorded as needing one (one warning, /status, the metric) and
// not retried.
type ReadAuth struct {
	sign func(*nostr.Event) error
	// timeout bounds one AUTH round trip (the engine's EOSE timeout): a
	// relay that never answers fails the attempt instead of holding every
	// job on the connection.
	timeout time.Duration
	log     *zap.Logger
	counter *prometheus.CounterVec

	mu     sync.Mutex
	conns  map[*relay.Conn]*authAttempt
	state  map[string]string // relay → "authenticated" / "needs a key" / "refused: …"
	warned map[string]bool
}

type authAttempt struct {
	done chan struct{}
	err  error
}

func NewReadAuth(sign func(*nostr.Event) error, timeout time.Duration, counter *prometheus.CounterVec, log *zap.Logger) *ReadAuth {
	return &ReadAuth{sign: sign, timeout: timeout, log: log, counter: counter,
		conns: map[*relay.Conn]*authAttempt{}, state: map[string]string{}, warned: map[string]bool{}}
}

// Ensure authenticates c once (concurrent callers wait for the one
// attempt, each on its own ctx); it returns an error wrapping
// relay.ErrAuthRequired when there is no key or the relay refused the AUTH or did
// not answer within the timeout. The attempt runs on the connection's
// lifetime, not on the first caller's ctx, so a caller that gives up does
// not fail it for the others. The outcome holds for the connection's life:
// a new connection tries again.
func (a *ReadAuth) Ensure(ctx context.Context, c *relay.Conn) error {
	if a == nil {
		return fmt.Errorf("%w: no authenticator", relay.ErrAuthRequired)
	}
	url := c.URL()
	a.mu.Lock()
	at, ok := a.conns[c]
	if !ok {
		at = &authAttempt{done: make(chan struct{})}
		a.conns[c] = at
	}
	a.mu.Unlock()
	if !ok {
		go func() { // forget the connection when it ends
			<-c.Done()
			a.mu.Lock()
			delete(a.conns, c)
			a.mu.Unlock()
		}()
		go a.attempt(c, url, at)
	}
	select {
	case <-at.done:
		return at.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt runs the connection's one authentication and publishes its
// outcome to every caller waiting in Ensure.
func (a *ReadAuth) attempt(c *relay.Conn, url string, at *authAttempt) {
	defer close(at.done)
	if a.sign == nil {
		at.err = fmt.Errorf("%w: no secret key configured", relay.ErrAuthRequired)
		a.record(url, authNoKey, "needs a key: no secret key configured", nil)
		return
	}
	if err := a.authenticate(c); err != nil {
		at.err = fmt.Errorf("%w: %w", relay.ErrAuthRequired, err)
		a.record(url, authFailed, "AUTH failed: "+err.Error(), err)
		return
	}
	a.record(url, authOK, authOK, nil)
}

// authenticate runs one AUTH on c, bounded by the timeout and by the
// connection's life.
func (a *ReadAuth) authenticate(c *relay.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	go func() {
		select {
		case <-c.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.Authenticate(ctx, a.sign)
}

// Failed returns the error of an authentication that failed on c (nil when
// none was tried, it is under way or it succeeded): requests on c are
// not sent again.
func (a *ReadAuth) Failed(c *relay.Conn) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	at := a.conns[c]
	a.mu.Unlock()
	if at == nil {
		return nil
	}
	select {
	case <-at.done:
		return at.err
	default:
		return nil
	}
}

func (a *ReadAuth) record(url, result, state string, err error) {
	a.counter.WithLabelValues(url, result).Inc()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state[url] = state
	if result == authOK || a.warned[url] {
		return
	}
	a.warned[url] = true
	a.log.Warn("relay requires NIP-42 authentication to read; its history cannot be synced", zap.String("relay", url),
		zap.String("state", state), zap.Error(err))
}

// Describe returns the relay's read-auth state for /status ("" when the
// relay never asked).
func (a *ReadAuth) Describe(url string) string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state[url]
}

// Track creates url's series at 0, one per result, so the first
// authentication of a newly tracked relay shows in a rate.
func (a *ReadAuth) Track(url string) {
	for _, r := range []string{authOK, authNoKey, authFailed} {
		if a != nil {
			a.counter.WithLabelValues(url, r)
		}
	}
}

func (a *ReadAuth) Forget(url string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	delete(a.state, url)
	delete(a.warned, url)
	a.mu.Unlock()
	for _, r := range []string{authOK, authNoKey, authFailed} {
		a.counter.DeleteLabelValues(url, r)
	}
}
