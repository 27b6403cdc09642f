package reposync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

func newBareEngine(t *testing.T) *Engine {
	t.Helper()
	return newBareEngineWith(t, DefaultConfig(), nil)
}

// newBareEngineWith is newBareEngine with cfg and, when local is set, a
// LocalIndex (so the engine builds its own-relay local set).
func newBareEngineWith(t *testing.T, cfg Config, local *localindex.Index) *Engine {
	t.Helper()
	return newBareEngineDeps(t, cfg, func(d *Deps) { d.LocalIndex = local })
}

// newBareEngineDeps is newBareEngine with cfg and deps changed by mut (its
// Clock, when set, is the health tracker's too).
func newBareEngineDeps(t *testing.T, cfg Config, mut func(*Deps)) *Engine {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := Deps{Registry: reg}
	mut(&d)
	clk := d.Clock
	if clk == nil {
		clk = clock.NewManual(time.Unix(1_700_000_000, 0))
	}
	ht, err := health.New(health.DefaultConfig(), clk, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	noDial := func(context.Context, string, relay.Options) (*relay.Conn, error) {
		return nil, errors.New("no network in this test")
	}
	in, err := ingest.New(ingest.DefaultConfig(), ingest.Deps{Publisher: nopPublisher{}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	d.Health, d.Dial, d.DialOwn, d.Ingest = ht, noDial, noDial, in
	e, err := New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the test calls the Run goroutine's methods itself. Dial
	// attempts the engine starts fail at once and are waited for.
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() { cancel(); e.wg.Wait() })
	return e
}

// nopPublisher never answers: nothing in these tests is published.
type nopPublisher struct{}

func (nopPublisher) Submit(context.Context, *nostr.Event, func(publish.Result)) error { return nil }
func (nopPublisher) Publish(context.Context, *nostr.Event) (publish.Result, error) {
	return publish.Result{}, errors.New("not publishing in this test")
}
