// Package backoff is the one capped exponential backoff of grasp-sync:
// the health tracker's reconnects, the publisher's redials and rate-limit
// holds, and the self-subscriber's reconnects to the own relay use a
// Policy; purgatory's operator-configured list of delays is a Schedule.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is a capped exponential backoff with optional jitter: after n
// consecutive failures the nominal wait is Base·2^(n−1), capped at Max.
type Policy struct {
	// Base is the nominal wait after the first failure.
	Base time.Duration
	// Max caps the nominal wait (before jitter).
	Max time.Duration
	// Jitter, in [0, 1), is the fraction of the nominal wait d that is
	// random: the wait is spread uniformly over [d·(1−Jitter), d·(1+Jitter)],
	// or over [d·(1−Jitter), d] when Shorten is set. 0 means no jitter.
	Jitter float64
	// Shorten makes jitter only shorten the wait, so that it never
	// exceeds the nominal one (Jitter 0.5 is "equal jitter").
	Shorten bool
}

// Nominal returns the unjittered wait after n consecutive failures:
// Base·2^(n−1), capped at Max. It returns 0 for n ≤ 0.
func (p Policy) Nominal(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := p.Base
	for i := 1; i < n; i++ {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Delay returns the wait after n consecutive failures with jitter drawn
// from r, a value in [0, 1] (see Rand): r = 0 gives the shortest wait,
// r = 1 the longest.
func (p Policy) Delay(n int, r float64) time.Duration {
	return p.Jittered(p.Nominal(n), r)
}

// Jittered spreads d as the policy's jitter does.
func (p Policy) Jittered(d time.Duration, r float64) time.Duration {
	f := p.Jitter
	if f == 0 || d <= 0 {
		return d
	}
	if p.Shorten {
		return time.Duration(float64(d) * (1 - f*(1-r)))
	}
	return time.Duration(float64(d) * (1 + f*(2*r-1)))
}

// Rand is the default source of jitter: math/rand/v2's Float64, safe for
// concurrent use.
func Rand() float64 { return rand.Float64() }

// Schedule is an explicit list of waits: the n-th (1-based) entry after n
// consecutive failures, the last one repeating. It must not be empty.
type Schedule []time.Duration

// Delay returns the wait after n consecutive failures (n < 1 counts as 1).
func (s Schedule) Delay(n int) time.Duration {
	n = max(1, min(n, len(s)))
	return s[n-1]
}

// Streak is a run of failures in a row and the wait after the last one;
// the zero value has none.
type Streak struct {
	n     int
	until time.Time
}

// Fail counts a failure at now and waits p's delay for the failures so far
// (jitter from r, see Policy.Delay), unless a wait runs already: failures
// during a wait are of the same attempt and count once.
func (s *Streak) Fail(p Policy, now time.Time, r float64) {
	if now.Before(s.until) {
		return
	}
	s.n++
	s.until = now.Add(p.Delay(s.n, r))
}

// Reset ends the streak: the next failure waits the first delay.
func (s *Streak) Reset() { *s = Streak{} }

// Due tells whether no wait runs at now.
func (s Streak) Due(now time.Time) bool { return !now.Before(s.until) }

// Failures is the number of failures in a row.
func (s Streak) Failures() int { return s.n }

// Until is the end of the wait (zero: none yet).
func (s Streak) Until() time.Time { return s.until }
