package purgatory

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/throttle"
)

// Source is one clone URL an identifier's git data may be fetched from.
type Source struct {
	URL string
	// Domain is host[:port]: the throttling key.
	Domain string
}

// ReleaseResult counts what one Release call let out of purgatory.
type ReleaseResult struct {
	States int
	PRs    int
}

// SyncContext is everything the sync logic needs from git and the relay side.
// The purgatory's own implementation works on the git directory; unit tests
// use a fake so selection, throttling and backoff are tested without I/O.
type SyncContext interface {
	// Pending reports whether events for identifier are still held.
	Pending(identifier string) bool
	// NeededOIDs returns the object ids the held events of identifier still
	// miss locally (only for events that could be released once present).
	NeededOIDs(ctx context.Context, identifier string) ([]string, error)
	// Sources returns the clone URLs to fetch identifier's data from, in
	// preference order, without the own domain.
	Sources(ctx context.Context, identifier string) []Source
	// Fetch fetches oids from url into identifier's local repository and
	// returns the ids now present. gate is asked before every git request
	// after the first.
	Fetch(ctx context.Context, identifier, url string, oids []string, gate gitx.Gate) ([]string, error)
	// Release lets out every held event of identifier whose data is present:
	// objects copied to the authorised owners' repositories, refs aligned,
	// event published, entry removed. Each event releases on its own.
	Release(ctx context.Context, identifier string) (ReleaseResult, error)
}

// syncer syncs one identifier at a time (one fetch round for the events
// that wait on it, backoff between attempts), over a SyncContext and the
// per-domain throttle.
type syncer struct {
	sc  SyncContext
	th  *throttle.Throttle
	m   *metrics
	log *zap.Logger
	// note, when set, records an identifier's latest failure for status.
	note func(id string, err error)
	// fails, when set, writes the rate-limited WARN lines of failures.
	fails *failLog
	// wait, when set, records that an identifier waits in a domain's
	// queue, before it is queued there.
	wait func(id, domain string)
	// tally, when set, counts fetches for the summary line.
	tally *tally
}

// warn logs a failure of identifier id through the rate limit (debug
// without one).
func (s *syncer) warn(id, msg string, fields ...zap.Field) {
	if s.fails == nil {
		s.log.Debug(msg, append(fields, zap.String("identifier", id))...)
		return
	}
	s.fails.warn(id, msg, fields...)
}

func (s *syncer) noteErr(id string, err error) {
	if s.note != nil && err != nil {
		s.note(id, err)
	}
}

// syncIdentifier is one attempt from the main loop: it fetches from every
// clone URL whose domain has capacity, releasing events after each fetch,
// and hands the identifier to the queues of busy domains that still have
// untried URLs. It never waits for a throttled domain. It reports whether
// nothing is held for the identifier any more.
func (s *syncer) syncIdentifier(ctx context.Context, id string) bool {
	if !s.sc.Pending(id) {
		return true
	}
	needed, err := s.sc.NeededOIDs(ctx, id)
	if err != nil {
		s.log.Debug("cannot compute needed objects", zap.String("identifier", id), zap.Error(err))
		s.noteErr(id, err)
		return false
	}
	if len(needed) == 0 {
		s.release(ctx, id)
		return !s.sc.Pending(id)
	}
	tried := map[string]bool{}
	for ctx.Err() == nil {
		src, l := s.nextSource(ctx, id, tried)
		if l == nil {
			break
		}
		tried[src.URL] = true
		s.fetchFrom(ctx, id, src, needed, l)
		if !s.sc.Pending(id) {
			return true
		}
		if needed, err = s.sc.NeededOIDs(ctx, id); err != nil {
			s.noteErr(id, err)
			return false
		}
		if len(needed) == 0 {
			s.release(ctx, id)
			return !s.sc.Pending(id)
		}
	}
	if ctx.Err() != nil {
		return false
	}
	// What is left untried belongs to throttled domains: queue there.
	byDomain := map[string]map[string]bool{}
	for _, src := range s.sc.Sources(ctx, id) {
		if tried[src.URL] {
			continue
		}
		if _, ok := byDomain[src.Domain]; !ok {
			byDomain[src.Domain] = map[string]bool{}
		}
	}
	for u := range tried {
		if cu, err := gitx.ParseCloneURL(u); err == nil {
			if m, ok := byDomain[cu.Domain]; ok {
				m[u] = true
			}
		}
	}
	if len(tried) == 0 && len(byDomain) == 0 {
		s.noteErr(id, ErrNoSource)
	}
	for domain, triedHere := range byDomain {
		s.log.Debug("waiting for a request slot of a throttled domain", zap.String("identifier", id), zap.String("domain", domain))
		if s.wait != nil {
			s.wait(id, domain)
		}
		s.th.Enqueue(domain, id, triedHere)
	}
	return false
}

// nextSource returns the first untried source whose domain has capacity,
// holding a lease on that domain.
func (s *syncer) nextSource(ctx context.Context, id string, tried map[string]bool) (Source, *throttle.Lease) {
	busy := map[string]bool{}
	for _, src := range s.sc.Sources(ctx, id) {
		if tried[src.URL] || busy[src.Domain] {
			continue
		}
		if l := s.th.TryAcquire(src.Domain); l != nil {
			return src, l
		}
		busy[src.Domain] = true
	}
	return Source{}, nil
}

// fetchFrom runs one fetch round against src holding l, then releases what
// became satisfiable.
func (s *syncer) fetchFrom(ctx context.Context, id string, src Source, needed []string, l *throttle.Lease) {
	fetched, err := s.sc.Fetch(ctx, id, src.URL, needed, l)
	// A URL refused before git ran (invalid, private address, no local
	// repository) never reached the remote: it does not count as a request.
	l.Release(!errors.Is(err, gitx.ErrInvalid) && !errors.Is(err, ErrNoLocalRepo))
	result := resultOK
	if err != nil && !errors.Is(err, gitx.ErrRoundCut) {
		result = resultError
	}
	if s.m != nil {
		s.m.domainRequests.WithLabelValues(s.m.domain(src.Domain), result).Inc()
		s.m.oidsFetched.Add(float64(len(fetched)))
	}
	if s.tally != nil {
		s.tally.fetches.Add(1)
		s.tally.objects.Add(int64(len(fetched)))
		if result == resultError {
			s.tally.fetchesFailed.Add(1)
		}
	}
	if err != nil && ctx.Err() == nil {
		if result == resultError {
			s.warn(id, "git fetch failed", zap.String("url", src.URL), zap.Int("fetched", len(fetched)), zap.Error(err))
			s.noteErr(id, fmt.Errorf("fetch %s: %w", src.URL, err))
		} else {
			s.log.Debug("fetch round cut short", zap.String("identifier", id), zap.String("url", src.URL),
				zap.Int("fetched", len(fetched)), zap.Error(err))
		}
	}
	if len(fetched) > 0 {
		s.log.Debug("fetched objects", zap.String("identifier", id), zap.String("url", src.URL),
			zap.Int("objects", len(fetched)), zap.Int("needed", len(needed)))
		s.release(ctx, id)
	}
}

func (s *syncer) release(ctx context.Context, id string) {
	res, err := s.sc.Release(ctx, id)
	if err != nil && ctx.Err() == nil {
		s.warn(id, "release failed", zap.Error(err))
		s.noteErr(id, fmt.Errorf("release: %w", err))
	}
	if res.States+res.PRs > 0 {
		s.log.Debug("released events", zap.String("identifier", id), zap.Int("states", res.States), zap.Int("prs", res.PRs))
	}
	if s.fails != nil && !s.sc.Pending(id) {
		s.fails.forget(id)
	}
}

// workQueued is the throttle's work function: one fetch for identifier from
// an untried URL of domain. more: data is still missing and the domain has
// another untried URL of the identifier.
func (s *syncer) workQueued(ctx context.Context, domain, id string, tried map[string]bool, l *throttle.Lease) (url string, used, more bool) {
	if ctx.Err() != nil || !s.sc.Pending(id) {
		return "", false, false
	}
	needed, err := s.sc.NeededOIDs(ctx, id)
	if err != nil {
		s.noteErr(id, err)
		return "", false, false
	}
	if len(needed) == 0 {
		s.release(ctx, id)
		return "", false, false
	}
	srcs := s.sc.Sources(ctx, id)
	for i, src := range srcs {
		if src.Domain != domain || tried[src.URL] {
			continue
		}
		s.fetchFrom(ctx, id, src, needed, l)
		if s.sc.Pending(id) {
			for _, next := range srcs[i+1:] {
				more = more || (next.Domain == domain && !tried[next.URL])
			}
		}
		return src.URL, true, more
	}
	return "", false, false
}
