package sidecar

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// DefaultProgressInterval is the default of log.progress_interval.
const DefaultProgressInterval = 10 * time.Second

// progress is what one progress line compares with the previous one.
type progress struct {
	at         time.Time
	received   uint64
	accepted   uint64
	duplicates uint64
	// busy: the previous line reported work, so a quiet interval gets one
	// "caught up" line.
	busy bool
}

// runProgress logs one "sync progress" line at info every interval while
// relays are syncing or events flow, and one "sync caught up" line when
// the work stops: a warning "sync idle with seconds cut" instead while a
// relay's tied second stays cut (status TiesCut). Quiet intervals log
// nothing.
func (s *Sidecar) runProgress(ctx context.Context) error {
	every := s.cfg.Log.ProgressInterval
	if every <= 0 {
		return nil
	}
	last := progress{at: s.d.Clock.Now()}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.d.Clock.After(every):
		}
		last = s.logProgress(s.Status(), last, s.d.Clock.Now())
	}
}

// logProgress logs the line for snapshot st taken at now and returns the
// sample the next line compares with.
func (s *Sidecar) logProgress(st status.Snapshot, last progress, now time.Time) progress {
	cur := progress{at: now, accepted: st.Publisher.Accepted, duplicates: st.Publisher.Duplicates}
	done, idleCut, connected, repos, reposDone := 0, 0, 0, 0, 0
	for _, r := range st.Relays {
		cur.received += r.EventsReceived
		repos += r.ReposConfirmed + r.ReposPending
		reposDone += r.ReposConfirmed
		switch r.State {
		case "connected", "connected_historic_sync_failures", "syncing":
			connected++
		}
		if r.State != "syncing" && r.ReposPending == 0 && r.RootsPending == 0 && r.PendingBatches == 0 {
			if r.TiesCut > 0 {
				idleCut++ // idle, not synced
			} else {
				done++
			}
		}
	}
	received := cur.received - min(cur.received, last.received)
	accepted := cur.accepted - min(cur.accepted, last.accepted)
	cut := st.OwnRelay.TiesCut
	for _, r := range st.Relays {
		cut += r.TiesCut
	}
	working := done+idleCut < len(st.Relays) || received > 0 || accepted > 0 || st.Publisher.Queued > 0
	secs := now.Sub(last.at).Seconds()
	rate := func(n uint64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(int(float64(n)/secs*10)) / 10
	}
	// repositories is the status's count (the repositories synced, as on
	// the status page and in /status); relay_repo_pairs and
	// relay_repo_pairs_confirmed count relay-repository pairs, the status
	// page's per-relay "repositories confirmed/total" summed over the relays
	// (the page's "relay-repository pairs confirmed"): a repository listed
	// on two remote relays counts twice there.
	fields := []zap.Field{
		zap.Int("relays_done", done), zap.Int("relays_total", len(st.Relays)), zap.Int("relays_connected", connected),
		zap.Int("repositories", st.Repositories),
		zap.Int("relay_repo_pairs_confirmed", reposDone), zap.Int("relay_repo_pairs", repos),
		zap.Uint64("events_received", cur.received), zap.Uint64("events_published", cur.accepted),
		zap.Uint64("events_duplicate", cur.duplicates),
		zap.Float64("received_per_s", rate(received)), zap.Float64("published_per_s", rate(accepted)),
		zap.Int("publish_queue", st.Publisher.Queued), zap.Int("purgatory_held", st.Purgatory.Events),
	}
	switch {
	case working:
		s.log.Info("sync progress", fields...)
	case last.busy && cut > 0:
		// Not caught up: some seconds hold more events than their relay
		// returns, and the events beyond are not seen (/status says which).
		s.log.Warn("sync idle with seconds cut", append(fields, zap.Int("seconds_cut", cut))...)
	case last.busy:
		s.log.Info("sync caught up", fields...)
	}
	cur.busy = working
	return cur
}
