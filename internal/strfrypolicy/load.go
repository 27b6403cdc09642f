package strfrypolicy

import (
	"context"
	"errors"
	"fmt"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// storedFilters are what the plugin reads from the relay at start: the
// announcements first, then the root events, so every root finds its
// repository (strfry does not replay stored events to a plugin).
var storedFilters = []nostr.Filter{
	{Kinds: []int{nip34.KindRepoAnnouncement}},
	{Kinds: []int{nip34.KindPatch, nip34.KindPullRequest, nip34.KindPRUpdate, nip34.KindIssue}},
}

// load reads the relay's stored events into the rules, trying again with
// the reconnect backoff until it succeeds or ctx ends, then closes loaded.
// tried is closed when the first attempt ended.
func (p *Plugin) load(ctx context.Context) {
	retry := backoff.Policy{Base: p.cfg.ReconnectBase, Max: p.cfg.ReconnectMax}
	defer func() {
		select {
		case <-p.tried:
		default:
			close(p.tried)
		}
	}()
	for failures := 0; ctx.Err() == nil; {
		err := p.read(ctx)
		if err == nil {
			repos, roots := p.rules.Counts()
			p.log.Info("read the relay's repositories", zap.String("relay", p.cfg.OwnRelay),
				zap.Int("repositories", repos), zap.Int("root_events", roots))
			close(p.loaded)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if failures == 0 {
			close(p.tried)
		}
		failures++
		delay := retry.Delay(failures, 0)
		if failures > 1 && failures%10 != 0 {
			p.log.Debug("cannot read the relay's repositories", zap.Int("failures", failures), zap.Error(err))
		} else {
			p.log.Warn("cannot read the relay's repositories; events other than announcements are rejected until it can",
				zap.String("relay", p.cfg.OwnRelay), zap.Int("failures", failures), zap.Duration("retry_in", delay), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.clock.After(delay):
		}
	}
}

// readRelay pages the relay's stored announcements and root events (REQ
// paging, as the sidecar reads the own relay) into the rules.
func (p *Plugin) readRelay(ctx context.Context) error {
	opts := p.cfg.RelayOptions
	opts.NoRaw = true
	opts.Logger = p.log
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	conn, err := relay.Dial(dctx, p.cfg.OwnRelay, opts)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	pager := &historic.Pager{PageSize: p.cfg.PageSize, EOSETimeout: p.cfg.EOSETimeout, Clock: p.clock}
	n := 0
	err = pager.Sync(ctx, conn, storedFilters, 1, func(_ context.Context, in ingest.Incoming) error {
		n++
		p.rules.Remember(in.Event)
		return nil
	})
	if errors.Is(err, historic.ErrSaturatedSecond) && ctx.Err() == nil {
		// The pager read past the saturated second; only its surplus is
		// missing, which waiting would not bring.
		p.log.Warn("some stored events share one second beyond the relay's page size and were not read", zap.Error(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("after %d events: %w", n, err)
	}
	return nil
}
