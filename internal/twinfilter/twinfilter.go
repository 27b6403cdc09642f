// Package twinfilter tells, by a NIP-45 COUNT, when a Layer 3 `E` filter
// holds no event its `e` twin does not, so that REQ paging sweeps only the
// twin: a NIP-22 comment on a root tags it by `E` and by `e`, and each
// sweep would otherwise receive it whole.
package twinfilter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// maxRelays bounds the relays whose COUNT support is remembered; past it
// the record starts over (a relay asked again costs one COUNT).
const maxRelays = 4096

// Both returns, for a filter tagging roots by `E` only (nip34.Layer3's
// `E` filters: no ids, authors, kinds or other tags), the filter of its
// events that tag one of the same roots by `e` as well, and true; for any
// other filter false.
func Both(f nostr.Filter) (nostr.Filter, bool) {
	vs, ok := f.Tags["E"]
	if !ok || len(vs) == 0 || len(f.Tags) != 1 || len(f.IDs) > 0 || len(f.Authors) > 0 || len(f.Kinds) > 0 || f.Search != "" {
		return nostr.Filter{}, false
	}
	both := f
	both.Tags = nostr.TagMap{"E": vs, "e": vs}
	both.Limit, both.LimitZero = 0, false
	return both, true
}

// support is what a relay did with COUNT.
type support uint8

const (
	unknown support = iota
	probing         // a COUNT is out; others do not wait for it
	counts
	noCount
)

// relayState is a relay's support; probed is closed when a probe ends.
type relayState struct {
	support support
	probed  chan struct{}
}

// Checker answers Covered. Its zero value is not usable: New.
type Checker struct {
	timeout time.Duration
	clock   clock.Clock

	seq   atomic.Uint64
	mu    sync.Mutex
	state map[string]relayState
}

// New returns a Checker whose COUNTs wait at most timeout for an answer
// (clk: clock.Real{} when nil).
func New(timeout time.Duration, clk clock.Clock) *Checker {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Checker{timeout: timeout, clock: clk, state: map[string]relayState{}}
}

// Covered tells whether sweeping f on c's relay can be left out: f tags
// roots by `E` only (Both) and the relay counts as many events for it as
// for the events among them that tag one of the roots by `e` too. Those
// all come in the sweep of f's `e` twin (nip34.Layer3 builds one for each
// `E` filter, with the same roots, since and until), which the caller
// runs as well. A relay that refuses COUNT (CLOSED) or does not answer it
// within the timeout is not asked again; while the first COUNT to a relay
// is out, the others wait for its outcome. An approximate count or any
// failure means false: f is swept.
func (ch *Checker) Covered(ctx context.Context, c *relay.Conn, f nostr.Filter) bool {
	both, ok := Both(f)
	if ch == nil || !ok {
		return false
	}
	ask, probe := ch.begin(ctx, c.URL())
	if !ask {
		return false
	}
	all, err := ch.count(ctx, c, f)
	var shared relay.CountResult
	if err == nil {
		shared, err = ch.count(ctx, c, both)
	}
	ch.end(c.URL(), probe, err)
	return err == nil && !all.Approximate && !shared.Approximate && all.Count == shared.Count
}

// begin tells whether url may be asked a COUNT now; when its support is
// not known yet this COUNT probes it (probe, closed by end), and while
// another probes it, begin waits for that one's outcome.
func (ch *Checker) begin(ctx context.Context, url string) (ask bool, probe chan struct{}) {
	for {
		ch.mu.Lock()
		st := ch.state[url]
		switch st.support {
		case counts:
			ch.mu.Unlock()
			return true, nil
		case noCount:
			ch.mu.Unlock()
			return false, nil
		case unknown:
			if len(ch.state) >= maxRelays {
				clear(ch.state)
			}
			probe = make(chan struct{})
			ch.state[url] = relayState{support: probing, probed: probe}
			ch.mu.Unlock()
			return true, probe
		}
		ch.mu.Unlock()
		select {
		case <-st.probed:
		case <-ctx.Done():
			return false, nil
		}
	}
}

// errNoAnswer: a COUNT got no answer within the timeout.
var errNoAnswer = errors.New("no answer to COUNT")

// end records what url did with a COUNT: refused or not answered is no
// support; another failure (the connection ended) says nothing. It ends
// the probe begin started, if any.
func (ch *Checker) end(url string, probe chan struct{}, err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case err == nil:
		ch.state[url] = relayState{support: counts}
	case errors.Is(err, relay.ErrCountClosed) || errors.Is(err, errNoAnswer):
		if ch.state[url].support != counts { // one that counted before was busy
			ch.state[url] = relayState{support: noCount}
		}
	case probe != nil && ch.state[url].probed == probe:
		delete(ch.state, url) // the next COUNT probes again
	}
	if probe != nil {
		close(probe)
	}
}

// count runs one COUNT of f, bounded by the timeout.
func (ch *Checker) count(ctx context.Context, c *relay.Conn, f nostr.Filter) (relay.CountResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var late atomic.Bool
	t := ch.clock.AfterFunc(ch.timeout, func() { late.Store(true); cancel() })
	defer t.Stop()
	res, err := c.Count(ctx, fmt.Sprintf("n%d", ch.seq.Add(1)), f)
	if late.Load() && errors.Is(err, relay.ErrCountUnanswered) { // not a wait before it went (the request budget)
		return res, fmt.Errorf("%w within %s", errNoAnswer, ch.timeout)
	}
	return res, err
}
