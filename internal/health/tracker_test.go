package health

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
)

func TestConfigBackoffSequence(t *testing.T) {
	cfg := DefaultConfig()
	want := []time.Duration{0, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600}
	for n, w := range want {
		if got := cfg.policy().Nominal(n); got != w*time.Second {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, w*time.Second)
		}
	}
	if got := cfg.policy().Nominal(1 << 30); got != time.Hour {
		t.Errorf("Backoff(huge) = %s, want 1h", got)
	}
}

func TestTrackerBackoffSequence(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	wantAttempt(t, tr, relayA, true, 0)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600}
	for i, w := range want {
		w *= time.Second
		tr.AttemptStarted(relayA)
		tr.Failed(relayA, errors.New("connection refused"))
		wantAttempt(t, tr, relayA, false, w)
		if got := tr.Snapshot()[0].Failures; got != i+1 {
			t.Fatalf("failures = %d, want %d", got, i+1)
		}
		clock.Advance(w - time.Nanosecond)
		wantAttempt(t, tr, relayA, false, time.Nanosecond)
		clock.Advance(time.Nanosecond)
		wantAttempt(t, tr, relayA, true, 0)
	}
}

func TestTrackerJitter(t *testing.T) {
	for _, tc := range []struct {
		name string
		rnd  float64
		want time.Duration
	}{
		{"lowest", 0, 4 * time.Second},
		{"middle", 0.5, 5 * time.Second},
		{"highest", 0.75, 5500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTestTracker(t, func(c *Config) { c.Jitter = 0.2 },
				WithRand(func() float64 { return tc.rnd }))
			tr.Track(relayA)
			tr.Failed(relayA, errors.New("refused"))
			wantAttempt(t, tr, relayA, false, tc.want)
		})
	}
}

func TestTrackerJitterDefaultRandStaysInBounds(t *testing.T) {
	tr, _, _ := newTestTracker(t, func(c *Config) { c.Jitter = 0.2 })
	lo, hi := 4*time.Second, 6*time.Second
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		d := tr.cfg.jittered(5*time.Second, tr.rand)
		if d < lo || d > hi {
			t.Fatalf("jitter(5s) = %s, outside [%s, %s]", d, lo, hi)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("jitter produced %d distinct values in 200 draws", len(seen))
	}
}

// failUntil fails relayA at every allowed attempt until the clock reaches end.
func failUntil(t *testing.T, tr *Tracker, clock *clock.Manual, end time.Time) {
	t.Helper()
	for clock.Now().Before(end) {
		ok, wait := tr.CanAttempt(relayA)
		if !ok {
			if clock.Now().Add(wait).After(end) {
				clock.Advance(end.Sub(clock.Now()))
				return
			}
			clock.Advance(wait)
			continue
		}
		tr.AttemptStarted(relayA)
		tr.Failed(relayA, errors.New("connection refused"))
	}
}

func TestTrackerDeadAfterContinuousFailures(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	wantState(t, tr, relayA, Disconnected)

	tr.AttemptStarted(relayA)
	tr.Failed(relayA, errors.New("connection refused"))
	wantState(t, tr, relayA, Degraded)
	firstFailure := clock.Now()

	failUntil(t, tr, clock, firstFailure.Add(24*time.Hour-time.Nanosecond))
	wantState(t, tr, relayA, Degraded)
	// Time alone makes the relay Dead, even in the middle of a backoff.
	clock.Advance(time.Nanosecond)
	wantState(t, tr, relayA, Dead)

	// The attempt still scheduled by the last backoff is allowed; after it
	// fails, exactly one attempt per 24 h.
	ok, wait := tr.CanAttempt(relayA)
	if ok || wait <= 0 || wait > time.Hour {
		t.Fatalf("CanAttempt = %v, %s; want the pending backoff (≤1h)", ok, wait)
	}
	clock.Advance(wait)
	for day := 0; day < 3; day++ {
		wantAttempt(t, tr, relayA, true, 0)
		tr.AttemptStarted(relayA)
		ok, _ := tr.CanAttempt(relayA)
		if ok {
			t.Fatalf("day %d: second attempt allowed while one is in flight", day)
		}
		if due := tr.Due(); len(due) != 0 {
			t.Fatalf("day %d: Due = %v while attempt in flight", day, due)
		}
		clock.Advance(time.Second)
		tr.Failed(relayA, errors.New("connection refused"))
		wantState(t, tr, relayA, Dead)
		wantAttempt(t, tr, relayA, false, 24*time.Hour)
		clock.Advance(24*time.Hour - time.Nanosecond)
		wantAttempt(t, tr, relayA, false, time.Nanosecond)
		clock.Advance(time.Nanosecond)
	}

	// A dead relay that connects recovers through the stability period.
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	wantState(t, tr, relayA, Degraded)
	clock.Advance(5 * time.Minute)
	wantState(t, tr, relayA, Healthy)
	if got := tr.Snapshot()[0].Failures; got != 0 {
		t.Fatalf("failures after stability = %d, want 0", got)
	}
}

func TestTrackerNormalConnectDisconnect(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	wantState(t, tr, relayA, Disconnected)
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	wantState(t, tr, relayA, Healthy) // no failures: no stability period
	wantAttempt(t, tr, relayA, false, 0)
	tr.Disconnected(relayA)
	wantState(t, tr, relayA, Disconnected)
	wantAttempt(t, tr, relayA, true, 0)
}

func TestTrackerRecoveryStability(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Failed(relayA, errors.New("refused"))
	clock.Advance(5 * time.Second)
	tr.Failed(relayA, errors.New("refused"))
	clock.Advance(10 * time.Second)
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	wantState(t, tr, relayA, Degraded)
	if got := tr.Snapshot()[0].Failures; got != 2 {
		t.Fatalf("failures during stability = %d, want 2", got)
	}
	clock.Advance(5*time.Minute - time.Nanosecond)
	wantState(t, tr, relayA, Degraded)
	clock.Advance(time.Nanosecond)
	wantState(t, tr, relayA, Healthy)
	if got := tr.Snapshot()[0].Failures; got != 0 {
		t.Fatalf("failures after stability = %d, want 0", got)
	}
	// The next failure starts the backoff sequence over.
	tr.Failed(relayA, errors.New("reset"))
	wantState(t, tr, relayA, Degraded)
	wantAttempt(t, tr, relayA, false, 5*time.Second)
}

func TestTrackerFailureDuringStability(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	for i := 0; i < 3; i++ {
		tr.Failed(relayA, errors.New("refused"))
		_, wait := tr.CanAttempt(relayA)
		clock.Advance(wait)
	}
	tr.Connected(relayA)
	clock.Advance(time.Minute)
	tr.Failed(relayA, errors.New("connection reset"))
	// A flapping relay keeps backing off: 4th failure waits 40 s.
	wantState(t, tr, relayA, Degraded)
	wantAttempt(t, tr, relayA, false, 40*time.Second)
	if got := tr.Snapshot()[0].Failures; got != 4 {
		t.Fatalf("failures = %d, want 4", got)
	}
	// The Dead clock restarted at the drop: 24 h after the first failure
	// of the old streak the relay is not Dead.
	failUntil(t, tr, clock, epoch.Add(24*time.Hour+time.Minute))
	wantState(t, tr, relayA, Degraded)
}

func TestTrackerCleanDisconnectDuringStability(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Failed(relayA, errors.New("refused"))
	clock.Advance(5 * time.Second)
	tr.Connected(relayA)
	clock.Advance(time.Minute)
	tr.Disconnected(relayA)
	wantState(t, tr, relayA, Degraded) // not yet proven stable
	wantAttempt(t, tr, relayA, true, 0)
	tr.Connected(relayA)
	clock.Advance(5 * time.Minute)
	wantState(t, tr, relayA, Healthy)
}

func TestTrackerRateLimitCooldownReturnsToPreviousState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(tr *Tracker, clock *clock.Manual)
		want  State
	}{
		{"healthy", func(tr *Tracker, _ *clock.Manual) { tr.Connected(relayA) }, Healthy},
		{"disconnected", func(*Tracker, *clock.Manual) {}, Disconnected},
		{"degraded", func(tr *Tracker, _ *clock.Manual) { tr.Failed(relayA, errors.New("refused")) }, Degraded},
		{"recovering", func(tr *Tracker, clock *clock.Manual) {
			tr.Failed(relayA, errors.New("refused"))
			clock.Advance(5 * time.Second)
			tr.Connected(relayA)
		}, Degraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, clock, _ := newTestTracker(t, nil)
			tr.Track(relayA)
			tc.setup(tr, clock)
			wantState(t, tr, relayA, tc.want)

			if got := tr.Observe(relayA, SourceNotice, "rate-limited: slow down"); got != SignalRateLimited {
				t.Fatalf("Observe = %s, want rate_limited", got)
			}
			wantState(t, tr, relayA, RateLimited)
			if got := tr.CooldownRemaining(relayA); got != 65*time.Second {
				t.Fatalf("CooldownRemaining = %s, want 65s", got)
			}
			if ok, wait := tr.CanAttempt(relayA); ok || (wait != 65*time.Second && wait != 0) {
				t.Fatalf("CanAttempt during cooldown = %v, %s", ok, wait)
			}
			clock.Advance(65*time.Second - time.Nanosecond)
			wantState(t, tr, relayA, RateLimited)
			clock.Advance(time.Nanosecond)
			if got := tr.CooldownRemaining(relayA); got != 0 {
				t.Fatalf("CooldownRemaining after cooldown = %s", got)
			}
			want := tc.want
			if tc.name == "recovering" {
				want = Degraded // 65 s < 5 min stability
			}
			wantState(t, tr, relayA, want)
		})
	}
}

func TestTrackerRateLimitBlocksAttempts(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Observe(relayA, SourceClosed, "you are being throttled")
	wantAttempt(t, tr, relayA, false, 65*time.Second)
	clock.Advance(30 * time.Second)
	// A second signal during the cooldown extends it.
	tr.Observe(relayA, SourceOK, "rate-limited: too fast")
	wantAttempt(t, tr, relayA, false, 65*time.Second)
	if due := tr.Due(); len(due) != 0 {
		t.Fatalf("Due during cooldown = %v", due)
	}
	clock.Advance(65 * time.Second)
	wantAttempt(t, tr, relayA, true, 0)
	if got := tr.Snapshot()[0].Failures; got != 0 {
		t.Fatalf("rate limiting counted %d failures", got)
	}
}

func TestTrackerHandshake429IsRateLimit(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.AttemptStarted(relayA)
	tr.Failed(relayA, &relay.HandshakeError{URL: relayA, StatusCode: 429})
	wantState(t, tr, relayA, RateLimited)
	wantAttempt(t, tr, relayA, false, 65*time.Second)
	clock.Advance(65 * time.Second)
	wantState(t, tr, relayA, Disconnected)
	wantAttempt(t, tr, relayA, true, 0)
}

func TestTrackerNaughtyList(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"dns not found", &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}},
		{"tls", fmt.Errorf("dial: %w", x509.UnknownAuthorityError{})},
		{"not a websocket", &relay.HandshakeError{URL: relayA, StatusCode: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, clock, _ := newTestTracker(t, nil)
			tr.Track(relayA)
			tr.AttemptStarted(relayA)
			tr.Failed(relayA, tc.err)
			wantState(t, tr, relayA, Degraded)
			wantAttempt(t, tr, relayA, false, 12*time.Hour)
			snap := tr.Snapshot()[0]
			if want := epoch.Add(12 * time.Hour); !snap.NaughtyUntil.Equal(want) || !snap.NextAttempt.Equal(want) {
				t.Fatalf("NaughtyUntil = %s, NextAttempt = %s; want both %s", snap.NaughtyUntil, snap.NextAttempt, want)
			}
			if snap.LastError != tc.err.Error() {
				t.Fatalf("LastError = %q, want %q", snap.LastError, tc.err.Error())
			}
			clock.Advance(12*time.Hour - time.Nanosecond)
			wantAttempt(t, tr, relayA, false, time.Nanosecond)
			clock.Advance(time.Nanosecond)
			wantAttempt(t, tr, relayA, true, 0)
			// A transient failure after the naughty period backs off normally.
			tr.Failed(relayA, errors.New("refused"))
			wantAttempt(t, tr, relayA, false, 10*time.Second)
			clock.Advance(10 * time.Second)
			tr.Connected(relayA)
			if snap := tr.Snapshot()[0]; !snap.NaughtyUntil.IsZero() {
				t.Fatalf("NaughtyUntil after connect = %s", snap.NaughtyUntil)
			}
		})
	}
}

func TestTrackerAttemptExpiry(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.AttemptStarted(relayA)
	wantAttempt(t, tr, relayA, false, time.Minute)
	clock.Advance(time.Minute - time.Nanosecond)
	wantAttempt(t, tr, relayA, false, time.Nanosecond)
	clock.Advance(time.Nanosecond)
	// The lost attempt counts as a failure and backs off.
	wantAttempt(t, tr, relayA, false, 5*time.Second)
	snap := tr.Snapshot()[0]
	if snap.Failures != 1 || snap.Connecting || !strings.Contains(snap.LastError, ErrAttemptExpired.Error()) {
		t.Fatalf("snapshot after expiry = %+v", snap)
	}
}

func TestTrackerDue(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	for _, u := range []string{relayB, relayA, "wss://c.example.com", "wss://d.example.com"} {
		tr.Track(u)
	}
	tr.Connected("wss://c.example.com")
	tr.AttemptStarted("wss://d.example.com")
	tr.Failed(relayB, errors.New("refused"))
	if got, want := tr.Due(), []string{relayA}; !slices.Equal(got, want) {
		t.Fatalf("Due = %v, want %v", got, want)
	}
	clock.Advance(5 * time.Second)
	if got, want := tr.Due(), []string{relayA, relayB}; !slices.Equal(got, want) {
		t.Fatalf("Due = %v, want %v", got, want)
	}
}

func TestTrackerIgnoresUntrackedRelays(t *testing.T) {
	tr, _, reg := newTestTracker(t, nil)
	tr.Failed(relayA, errors.New("refused"))
	tr.Connected(relayA)
	tr.AttemptStarted(relayA)
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: 3})
	if got := tr.Observe(relayA, SourceNotice, "rate-limited: x"); got != SignalRateLimited {
		t.Fatalf("Observe on untracked = %s, want the classification", got)
	}
	tr.Tick()
	if tr.Tracked(relayA) || len(tr.Snapshot()) != 0 {
		t.Fatal("events resurrected an untracked relay")
	}
	wantAttempt(t, tr, relayA, true, 0)
	wantState(t, tr, relayA, Disconnected)
	if got := tr.SubscriptionBudget(relayA); got != 20 {
		t.Fatalf("SubscriptionBudget(untracked) = %d, want 20", got)
	}
	if _, ok := testkit.Series(t, reg, MetricRelayStatus, map[string]string{"relay": relayA}); ok {
		t.Fatal("untracked relay has a status series")
	}
}

func TestTrackerTrackTwiceKeepsState(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Failed(relayA, errors.New("refused"))
	tr.Track(relayA)
	if got := tr.Snapshot()[0].Failures; got != 1 {
		t.Fatalf("failures after re-Track = %d, want 1", got)
	}
}

func TestTrackerSnapshot(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayB)
	tr.Track(relayA)
	tr.Connected(relayA)
	tr.SetLimits(relayA, relay.Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 1 << 20})
	tr.Failed(relayB, errors.New("refused"))
	tr.Observe(relayB, SourceNotice, "slow down!")
	snap := tr.Snapshot()
	want := []RelayHealth{
		{
			URL: relayA, State: Healthy, Connected: true, LastConnected: epoch,
			SubscriptionBudget: 50,
			Limits:             relay.Limits{MaxSubscriptions: 50, MaxFilters: 10, MaxLimit: 500, MaxMessageLength: 1 << 20},
		},
		{
			URL: relayB, State: RateLimited, Failures: 1, LastError: "refused",
			NextAttempt:        epoch.Add(65 * time.Second),
			CooldownUntil:      epoch.Add(65 * time.Second),
			SubscriptionBudget: 20, Limits: relay.Limits{MaxSubscriptions: 20},
		},
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("Snapshot =\n%+v\nwant\n%+v", snap, want)
	}
}

func TestTrackerDeadRelayRefusedWith429KeepsDailyRetry(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Failed(relayA, errors.New("refused"))
	failUntil(t, tr, clock, epoch.Add(25*time.Hour))
	wantState(t, tr, relayA, Dead)
	_, wait := tr.CanAttempt(relayA)
	clock.Advance(wait)
	tr.AttemptStarted(relayA)
	tr.Failed(relayA, &relay.HandshakeError{URL: relayA, StatusCode: 429})
	wantState(t, tr, relayA, RateLimited)
	wantAttempt(t, tr, relayA, false, 24*time.Hour)
	clock.Advance(65 * time.Second)
	wantState(t, tr, relayA, Dead)
	wantAttempt(t, tr, relayA, false, 24*time.Hour-65*time.Second)
}

func TestTrackerConnectTimeoutAndAttemptExpiryFloor(t *testing.T) {
	tr, clock, _ := newTestTracker(t, func(c *Config) {
		c.BackoffBase = 30 * time.Second
		c.AttemptExpiry = 10 * time.Second
	})
	if got := tr.ConnectTimeout(relayA); got != 30*time.Second {
		t.Fatalf("ConnectTimeout = %s, want the base backoff 30s", got)
	}
	tr.Track(relayA)
	tr.AttemptStarted(relayA)
	// The attempt may use its whole connect timeout before it expires.
	wantAttempt(t, tr, relayA, false, 30*time.Second)
	clock.Advance(30 * time.Second)
	wantAttempt(t, tr, relayA, false, 30*time.Second) // expired: first backoff
	if got := tr.Snapshot()[0].Failures; got != 1 {
		t.Fatalf("failures = %d, want 1", got)
	}
}
