package historic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// NegSettings are the user settings of NIP-77 historic sync: the
// configuration's negentropy section, with the sessions' own settings
// (neg.Settings) inline. Each carries its YAML key and help text (flag,
// environment variable and documentation are derived from them).
type NegSettings struct {
	// Enabled uses NIP-77 where a relay supports it (REQ paging
	// otherwise).
	Enabled      bool `yaml:"enabled" help:"Use NIP-77 for historic sync when the relay supports it; otherwise REQ paging."`
	neg.Settings `yaml:",inline"`
	// FetchBatch is how many ids one fetching REQ asks for; required
	// (positive).
	FetchBatch int `yaml:"fetch_batch" help:"Event ids per REQ when fetching what reconciliation found missing."`
	// SupportCacheTTL is how long a relay's NIP-77 support is remembered.
	SupportCacheTTL time.Duration `yaml:"support_cache_ttl" help:"How long a relay's NIP-77 support (or lack of it) is remembered."`
	// ClaimWait bounds how long a fetch waits for another relay's fetch
	// of ids it claimed, after that fetch was last heard of, before
	// asking its own relay (fetchclaims.go); required (positive).
	ClaimWait time.Duration `yaml:"claim_wait" help:"Each missing event is fetched from one relay at a time: how long a fetch waits for another relay's fetch of the same ids, after that fetch was last heard of (sent, receiving or handing on an event), before asking its own relay."`
}

// DefaultNegSettings returns the documented defaults.
func DefaultNegSettings() NegSettings {
	return NegSettings{Enabled: true, Settings: neg.DefaultSettings(), FetchBatch: 500, SupportCacheTTL: 24 * time.Hour, ClaimWait: DefaultClaimWait}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key (the sessions' settings' too).
func (s NegSettings) Validate() error {
	v := setting.Checks{}
	v.Add(s.Settings.Validate())
	v.PositiveInt("fetch_batch", s.FetchBatch)
	v.Positive("support_cache_ttl", s.SupportCacheTTL)
	v.Positive("claim_wait", s.ClaimWait)
	return v.Err()
}

// NegConfig configures NIP-77 historic sync: the user settings and the
// bound on what a session accepts, which the caller derives from the
// connections' message limit.
type NegConfig struct {
	NegSettings
	// MaxInboundHex is every session's neg.Options.MaxInboundHex.
	MaxInboundHex int
}

// DefaultNegConfig returns the defaults.
func DefaultNegConfig() NegConfig {
	return NegConfig{NegSettings: DefaultNegSettings(), MaxInboundHex: neg.DefaultOptions().MaxInboundHex}
}

// SessionOptions are the options of every session: neg's defaults with
// the settings and MaxInboundHex.
func (c NegConfig) SessionOptions() neg.Options {
	o := neg.DefaultOptions()
	o.Settings = c.Settings
	o.MaxInboundHex = c.MaxInboundHex
	return o
}

// negMetrics are the negentropy_* metrics.
type negMetrics struct {
	lastSync   *prometheus.GaugeVec
	syncs      *prometheus.CounterVec
	discovered prometheus.Counter
	fetched    prometheus.Counter
	errors     *prometheus.CounterVec
	duration   prometheus.Histogram
	bytes      *prometheus.CounterVec
	probes     *prometheus.CounterVec
	skipped    *prometheus.CounterVec
	refetched  *prometheus.CounterVec
}

func newNegMetrics(reg prometheus.Registerer) (*negMetrics, error) {
	m := &negMetrics{
		lastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_negentropy_last_sync_timestamp_seconds", Help: "Unix time of the last successful reconciliation per relay.",
		}, []string{"relay"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_syncs_total", Help: "Reconciliations per relay by result (ok, error, unsupported).",
		}, []string{"relay", "result"}),
		discovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_events_discovered_total", Help: "Event ids reconciliation found missing locally.",
		}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_events_fetched_total", Help: "Events fetched by id after reconciliation.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_relay_errors_total", Help: "Reconciliation errors per relay by kind.",
		}, []string{"relay", "error"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ngit_sync_negentropy_sync_duration_seconds", Help: "Duration of one reconciliation (all windows of one filter).",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_bytes_total", Help: "Negentropy payload bytes per relay and direction (sent, received).",
		}, []string{"relay", "direction"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_truncation_probes_total", Help: "REQs sent to confirm a reconciled set that looked cut at a common cap, per relay.",
		}, []string{"relay"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_fetch_skipped_total", Help: "Missing event ids a fetch did not ask its relay for, by reason (claimed: another relay's fetch was asking for them; seen: the ingest handler had them, or had a copy on its way to the own relay).",
		}, []string{"reason"}),
		refetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_negentropy_fetch_claim_failed_total", Help: "Event ids a fetch left to another relay's fetch or to a copy on its way to the own relay and then asked its own relay for, by reason (failed: not delivered, or refused as invalid; timeout: the other fetch was not heard of, receiving or handing on events, for negentropy.claim_wait; unsettled: delivered, or on its way to the own relay, and not settled within negentropy.claim_wait).",
		}, []string{"reason"}),
	}
	for _, r := range []string{"seen", "claimed"} {
		m.skipped.WithLabelValues(r)
	}
	for _, r := range []string{"failed", "timeout", "unsettled"} {
		m.refetched.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.lastSync, m.syncs, m.discovered, m.fetched, m.errors, m.duration, m.bytes, m.probes, m.skipped, m.refetched} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Track creates a relay's reconciliation counters at 0, so a rate sees its
// first reconciliation or error; the last-sync timestamp waits for a
// success (0 would read as 1970).
func (s *NegSyncer) Track(url string) {
	if s == nil {
		return
	}
	for _, r := range []string{"ok", "error", "unsupported"} {
		s.m.syncs.WithLabelValues(url, r)
	}
	for _, d := range []string{"sent", "received"} {
		s.m.bytes.WithLabelValues(url, d)
	}
	for _, k := range errorKinds {
		s.m.errors.WithLabelValues(url, k)
	}
}

// Forget deletes a relay's series.
func (s *NegSyncer) Forget(url string) {
	if s == nil {
		return
	}
	for _, v := range []*prometheus.MetricVec{s.m.syncs.MetricVec, s.m.bytes.MetricVec, s.m.errors.MetricVec,
		s.m.lastSync.MetricVec, s.m.probes.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"relay": url})
	}
}

// errorKinds are the labels errorKind returns.
var errorKinds = []string{"unsupported", "blocked", "timeout", "invalid_message", "session_closed",
	"limit", "relay_error", "missing_ids", "other"}

// errorKind maps a reconciliation error to a bounded label.
func errorKind(err error) string {
	switch {
	case errors.Is(err, neg.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, neg.ErrBlocked):
		return "blocked"
	case errors.Is(err, neg.ErrTimeout):
		return "timeout"
	case errors.Is(err, neg.ErrInvalidMessage):
		return "invalid_message"
	case errors.Is(err, neg.ErrSessionClosed):
		return "session_closed"
	case errors.Is(err, neg.ErrLimit):
		return "limit"
	case errors.Is(err, neg.ErrRelay):
		return "relay_error"
	case errors.Is(err, errMissingIDs):
		return "missing_ids"
	}
	return "other"
}

var errMissingIDs = errors.New("relay did not return requested ids")

// LocalSet is our side of a negentropy reconciliation: what the own relay
// holds, plus what we hold elsewhere or do not want.
type LocalSet interface {
	// EnsureFilled makes sure the own relay's events matching f are known.
	EnsureFilled(ctx context.Context, f nostr.Filter) error
	// Storage returns our items for f.
	Storage(f nostr.Filter) (*neg.Storage, error)
}

// NegSyncer is the NIP-77 historic syncer: it reconciles each filter with
// the relay, then fetches the missing events by id. Relays without NIP-77
// (cached for SupportCacheTTL) and filters the local set cannot answer go to the
// Pager.
type NegSyncer struct {
	cfg   NegConfig
	pager *Pager
	local LocalSet
	m     *negMetrics
	log   *zap.Logger
	seq   atomic.Uint64

	// Limits, when set, returns a relay's announced limits: NEG-OPEN,
	// NEG-MSG and fetching REQs are built to fit its message size.
	Limits func(url string) relay.Limits
	// IDState, when set, tells where the ingest handler has an event id
	// (ingest.Handler.IDState): a fetch does not ask for a settled id, and
	// waits for one in flight (fetchclaims.go).
	IDState func(id event.ID) int
	// Clock tells the time of support entries and metrics and times the
	// waits for other fetches' claims and the negentropy sessions.
	Clock clock.Clock
	// claims are the ids being fetched, shared by every relay's fetches.
	claims *fetchClaims

	mu      sync.Mutex
	support map[string]supportEntry
	warned  map[string]bool
}

type supportEntry struct {
	supported bool
	at        time.Time
}

// NewNegSyncer builds a NegSyncer.
func NewNegSyncer(cfg NegConfig, pager *Pager, local LocalSet, reg prometheus.Registerer, log *zap.Logger, clk clock.Clock) (*NegSyncer, error) {
	if cfg.FetchBatch <= 0 {
		return nil, fmt.Errorf("reposync: Negentropy.FetchBatch must be positive, got %d", cfg.FetchBatch)
	}
	if cfg.ClaimWait <= 0 {
		return nil, fmt.Errorf("reposync: Negentropy.ClaimWait must be positive, got %s", cfg.ClaimWait)
	}
	m, err := newNegMetrics(reg)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &NegSyncer{cfg: cfg, pager: pager, local: local, m: m, log: log,
		Clock: clk, claims: newFetchClaims(),
		support: map[string]supportEntry{}, warned: map[string]bool{}}, nil
}

// Support reports what is known of a relay's NIP-77 support: "supported",
// "unsupported" or "unknown".
func (s *NegSyncer) Support(url string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.support[url]
	switch {
	case !ok || s.Clock.Now().Sub(e.at) > s.cfg.SupportCacheTTL:
		return "unknown"
	case e.supported:
		return "supported"
	}
	return "unsupported"
}

func (s *NegSyncer) SetSupport(url string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.support[url] = supportEntry{supported: ok, at: s.Clock.Now()}
	if !ok && !s.warned[url] {
		s.warned[url] = true
		s.log.Warn("relay does not support NIP-77; using REQ paging", zap.String("relay", url))
	}
}

// Sync implements HistoricSyncer. The filters are reconciled one after
// another; what they lack is fetched together at the end (one round trip
// for all, not one per filter), then each reconciled set is checked for
// truncation (confirmSet). Filters NIP-77 cannot do are paged.
func (s *NegSyncer) Sync(ctx context.Context, c *relay.Conn, fs []nostr.Filter, slots int, emit Emit) error {
	url := c.URL()
	if !s.cfg.Enabled || s.Support(url) == "unsupported" {
		return s.pager.Sync(ctx, c, fs, slots, emit)
	}
	if err := s.pager.Auth.Failed(c); err != nil {
		return err
	}
	var errs []error
	var fallback []nostr.Filter
	var done []reconciled
	pre := s.reconcileAhead(ctx, c, fs)
	for i, f := range fs {
		var res neg.Result
		var windows map[string]*neg.Storage
		var err error
		if pre != nil {
			res, windows, err = pre[i].res, pre[i].windows, pre[i].err
		} else {
			res, windows, err = s.reconcileNeed(ctx, c, f)
		}
		switch {
		case err == nil:
			done = append(done, reconciled{f: f, res: res, windows: windows})
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, neg.ErrUnsupported) && errors.Is(err, neg.ErrTimeout) && s.Support(url) == "supported":
			// Slow now, not unable: it answered NEG-OPEN before (a loaded
			// relay). This filter is paged; NIP-77 stays for the rest.
			errs = append(errs, err)
			fallback = append(fallback, f)
			continue
		case errors.Is(err, neg.ErrUnsupported):
			s.SetSupport(url, false)
			fallback = append(fallback, fs[i:]...)
		case errors.Is(err, relay.ErrAuthRequired):
			return errors.Join(append(errs, err)...)
		case errors.Is(err, localindex.ErrCannotAnswer), errors.Is(err, errLocalFill):
			fallback = append(fallback, f)
			continue
		default:
			errs = append(errs, err)
			// The relay speaks NIP-77 but this filter failed: page it.
			fallback = append(fallback, f)
			continue
		}
		break // unsupported: the rest is paged
	}
	if err := s.fetchReconciled(ctx, c, done, slots, emit); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, err)
		for _, d := range done {
			fallback = append(fallback, d.f)
		}
	}
	if len(fallback) > 0 {
		if err := s.pager.Sync(ctx, c, fallback, slots, emit); err != nil {
			return errors.Join(append(errs, err)...)
		}
		// Paging recovered what negentropy could not.
		return nil
	}
	return errors.Join(errs...)
}

var errLocalFill = errors.New("cannot fill the local set from the own relay")

// ReconcileFilter reconciles one filter and fetches what is missing; max
// bounds the events fetched (0: no bound), keeping the newest (see
// reconcileNewest). It reports how many ids were missing.
func (s *NegSyncer) ReconcileFilter(ctx context.Context, c *relay.Conn, f nostr.Filter, slots, max int, emit Emit) (int, error) {
	if max > 0 {
		return s.reconcileNewest(ctx, c, f, slots, max, emit)
	}
	return s.reconcileMax(ctx, c, f, slots, 0, emit)
}

func (s *NegSyncer) reconcileMax(ctx context.Context, c *relay.Conn, f nostr.Filter, slots, max int, emit Emit) (int, error) {
	url := c.URL()
	res, windows, err := s.reconcileNeed(ctx, c, f)
	if errors.Is(err, neg.ErrUnsupported) || errors.Is(err, errLocalFill) || (err != nil && ctx.Err() != nil) {
		return 0, err
	}
	need := res.Need
	if max > 0 && len(need) > max {
		need = need[len(need)-max:]
	}
	// Even a failed reconciliation returns what finished windows found.
	var rec fetchRecorder
	ferr := s.fetch(ctx, c, need, slots, rec.wrap(emit), &rec)
	if ferr != nil {
		s.m.errors.WithLabelValues(url, errorKind(ferr)).Inc()
		err = errors.Join(err, ferr)
	}
	if err == nil && max == 0 {
		local := make([]*neg.Storage, 0, len(windows))
		for _, st := range windows {
			local = append(local, st)
		}
		err = s.confirmSet(ctx, c, f, buildRemoteSet(local, res.Have, rec.items, rec.otherOf(need)), emit)
	}
	return len(res.Need), err
}

// reconcileNeed reconciles one filter: the result (what the relay has that
// we do not, also of the windows that completed when err is set) and the
// local storage of each window reconciled.
func (s *NegSyncer) reconcileNeed(ctx context.Context, c *relay.Conn, f nostr.Filter) (neg.Result, map[string]*neg.Storage, error) {
	url := c.URL()
	if err := s.local.EnsureFilled(ctx, f); err != nil {
		if ctx.Err() != nil {
			return neg.Result{}, nil, ctx.Err()
		}
		return neg.Result{}, nil, fmt.Errorf("%w: %v", errLocalFill, err)
	}
	f.Limit, f.LimitZero = 0, false
	opts := s.cfg.SessionOptions()
	opts.Clock = s.Clock
	opts.FrameLimit = negFrameLimit(opts.FrameLimit, s.limits(url), FilterBytes(f))
	// The storage of each window reconciled (the last, when one is retried)
	// tells, with the result, what the relay's set held.
	windows := map[string]*neg.Storage{}
	localFor := func(w nostr.Filter) (*neg.Storage, error) {
		st, err := s.local.Storage(w)
		if st != nil {
			windows[windowKey(w)] = st
		}
		return st, err
	}
	res, err := neg.ReconcileSplit(ctx, c, fmt.Sprintf("n%d-", s.seq.Add(1)), f, localFor, opts)
	if errors.Is(err, relay.ErrAuthRequired) {
		// NIP-42: authenticate the connection and reconcile again.
		if aerr := s.pager.Auth.Ensure(ctx, c); aerr != nil {
			return res, windows, errors.Join(err, aerr)
		}
		clear(windows)
		res, err = neg.ReconcileSplit(ctx, c, fmt.Sprintf("n%d-", s.seq.Add(1)), f, localFor, opts)
	}
	s.m.bytes.WithLabelValues(url, "sent").Add(float64(res.BytesSent))
	s.m.bytes.WithLabelValues(url, "received").Add(float64(res.BytesReceived))
	s.m.duration.Observe(res.Duration.Seconds())
	if err != nil && !errors.Is(err, neg.ErrUnsupported) {
		s.m.errors.WithLabelValues(url, errorKind(err)).Inc()
	}
	switch {
	case errors.Is(err, neg.ErrUnsupported):
		s.m.syncs.WithLabelValues(url, "unsupported").Inc()
		return res, windows, err
	case err != nil:
		s.m.syncs.WithLabelValues(url, "error").Inc()
	default:
		s.m.syncs.WithLabelValues(url, "ok").Inc()
		s.m.lastSync.WithLabelValues(url).Set(float64(s.Clock.Now().Unix()))
	}
	if res.Sessions > 0 || err == nil {
		s.SetSupport(url, true)
	}
	s.m.discovered.Add(float64(len(res.Need)))
	return res, windows, err
}

// windowKey names a reconciled window by its time range.
func windowKey(f nostr.Filter) string {
	k := ""
	if f.Since != nil {
		k = fmt.Sprint(*f.Since)
	}
	k += ","
	if f.Until != nil {
		k += fmt.Sprint(*f.Until)
	}
	return k
}

// limits returns url's announced limits (zero when unknown).
func (s *NegSyncer) limits(url string) relay.Limits {
	if s.Limits == nil {
		return relay.Limits{}
	}
	return s.Limits(url)
}

// syncSet is a mutex-guarded string set.
type syncSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func newSyncSet() *syncSet { return &syncSet{m: map[string]struct{}{}} }

func (s *syncSet) add(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[v]; ok {
		return false
	}
	s.m[v] = struct{}{}
	return true
}

func (s *syncSet) has(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[v]
	return ok
}

// RestoreSupport records a relay's NIP-77 support learnt in a previous run.
func (s *NegSyncer) RestoreSupport(url string, ok bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.support[url] = supportEntry{supported: ok, at: at}
}

// SupportOf returns what is known of a relay's NIP-77 support and since
// when ("" when nothing).
func (s *NegSyncer) SupportOf(url string) (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.support[url]
	if !ok {
		return "", time.Time{}
	}
	if e.supported {
		return "supported", e.at
	}
	return "unsupported", e.at
}
