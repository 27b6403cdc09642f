package purgatory

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// SummaryInterval is the default of Config.SummaryInterval: how often the
// purgatory logs what it released,
// created, fetched and dropped: each event, repository and fetch is logged
// at DEBUG, the counts once per interval (when not all zero) at INFO, or at
// WARN for events dropped (expired without git data, or refused when
// full).
const SummaryInterval = time.Minute

// tally counts what happened since the last summary line. The counters
// are updated where the events happen (under different locks), read and
// reset by summarize.
type tally struct {
	released  atomic.Int64 // events released (published or already on the own relay)
	published atomic.Int64 // of those, published by the purgatory
	created   atomic.Int64 // local repositories created
	expired   atomic.Int64 // events dropped after the expiry without git data
	refused   atomic.Int64 // events refused because the purgatory was full

	fetches        atomic.Int64 // git fetch rounds run
	fetchesFailed  atomic.Int64 // of those, failed
	objects        atomic.Int64 // git objects they fetched
	attemptsFailed atomic.Int64 // sync attempts that ended with data still missing
}

// summarize logs the counts gathered since the previous call, and resets
// them: released events, created repositories, git fetches and failed
// attempts in one INFO line (with the identifiers waiting for a domain's
// request slot now), expired and refused events in one WARN line each.
// Nothing when all are zero. held is the number of events held now.
func (p *Purgatory) summarize(held int, since time.Duration) {
	t := &p.tally
	released, published := t.released.Swap(0), t.published.Swap(0)
	created := t.created.Swap(0)
	expired, refused := t.expired.Swap(0), t.refused.Swap(0)
	fetches, failed, objects := t.fetches.Swap(0), t.fetchesFailed.Swap(0), t.objects.Swap(0)
	attemptsFailed := t.attemptsFailed.Swap(0)
	interval := zap.Duration("interval", since)
	if released > 0 || created > 0 || fetches > 0 || attemptsFailed > 0 {
		waiting := 0
		domains, _, _ := p.th.Status()
		for _, d := range domains {
			waiting += d.Waiting
		}
		p.log.Info("purgatory summary", zap.Int64("released", released), zap.Int64("published", published),
			zap.Int64("repos_created", created), zap.Int64("fetches", fetches), zap.Int64("fetches_failed", failed),
			zap.Int64("objects_fetched", objects), zap.Int64("attempts_failed", attemptsFailed),
			zap.Int("waiting_for_domains", waiting), zap.Int("held", held), interval)
	}
	if expired > 0 {
		p.log.Warn("purgatory dropped events expired without git data", zap.Int64("count", expired),
			zap.Duration("expiry", p.cfg.Expiry), zap.Int("held", held), interval)
	}
	if refused > 0 {
		p.log.Warn("purgatory refused events: full", zap.Int64("count", refused),
			zap.Int("max_entries", p.cfg.MaxEntries), interval)
	}
}
