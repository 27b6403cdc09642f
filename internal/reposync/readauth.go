package reposync

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// ErrAuthRequired: a relay answered a REQ or NEG-OPEN with
// "auth-required:" and either no key is configured or its AUTH failed.
var ErrAuthRequired = errors.New("relay requires NIP-42 authentication to read")

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
	sign    func(*nostr.Event) error
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

func newReadAuth(sign func(*nostr.Event) error, counter *prometheus.CounterVec, log *zap.Logger) *ReadAuth {
	return &ReadAuth{sign: sign, log: log, counter: counter,
		conns: map[*relay.Conn]*authAttempt{}, state: map[string]string{}, warned: map[string]bool{}}
}

// Ensure authenticates c once (concurrent callers wait for the one
// attempt); it returns an error wrapping ErrAuthRequired when there is no
// key or the relay refused the AUTH. The outcome holds for the connection's
// life: a new connection tries again.
func (a *ReadAuth) Ensure(ctx context.Context, c *relay.Conn) error {
	if a == nil {
		return fmt.Errorf("%w: no authenticator", ErrAuthRequired)
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
		switch {
		case a.sign == nil:
			at.err = fmt.Errorf("%w: no secret key configured", ErrAuthRequired)
			a.record(url, authNoKey, "needs a key: no secret key configured", nil)
		default:
			if err := c.Authenticate(ctx, a.sign); err != nil {
				at.err = fmt.Errorf("%w: %w", ErrAuthRequired, err)
				a.record(url, authFailed, "AUTH failed: "+err.Error(), err)
			} else {
				a.record(url, authOK, authOK, nil)
			}
		}
		close(at.done)
	}
	select {
	case <-at.done:
		return at.err
	case <-ctx.Done():
		return ctx.Err()
	}
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

func (a *ReadAuth) forget(url string) {
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
