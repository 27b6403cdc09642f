package purgatory

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// SummaryInterval is how often the purgatory logs what it released,
// created and dropped: each event and repository is logged at DEBUG, the
// counts once per interval (when not all zero) at INFO, or at WARN for
// events dropped (expired without git data, or refused when full).
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
}

// summarize logs the counts gathered since the previous call, and resets
// them: released events and created repositories in one INFO line,
// expired and refused events in one WARN line each. Nothing when all are
// zero. held is the number of events held now.
func (p *Purgatory) summarize(held int, since time.Duration) {
	released, published := p.tally.released.Swap(0), p.tally.published.Swap(0)
	created := p.tally.created.Swap(0)
	expired, refused := p.tally.expired.Swap(0), p.tally.refused.Swap(0)
	interval := zap.Duration("interval", since)
	if released > 0 || created > 0 {
		p.log.Info("purgatory released events", zap.Int64("released", released), zap.Int64("published", published),
			zap.Int64("repos_created", created), zap.Int("held", held), interval)
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
