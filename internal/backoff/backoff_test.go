package backoff

import (
	"testing"
	"time"
)

func TestNominalSequence(t *testing.T) {
	p := Policy{Base: 5 * time.Second, Max: time.Hour}
	want := []time.Duration{0, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600}
	for n, w := range want {
		if got := p.Nominal(n); got != w*time.Second {
			t.Errorf("Nominal(%d) = %s, want %s", n, got, w*time.Second)
		}
	}
	if got := p.Nominal(1 << 30); got != time.Hour {
		t.Errorf("Nominal(huge) = %s, want 1h", got)
	}
}

// TestEqualJitter: the publisher's policy, base·2^(n−1) capped, with a
// uniformly random point in the upper half.
func TestEqualJitter(t *testing.T) {
	p := Policy{Base: time.Second, Max: time.Minute, Jitter: 0.5, Shorten: true}
	tests := []struct {
		n      int
		lo, hi time.Duration
	}{
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{3, 2 * time.Second, 4 * time.Second},
		{6, 16 * time.Second, 32 * time.Second},
		{7, 30 * time.Second, 60 * time.Second}, // capped
		{1000, 30 * time.Second, 60 * time.Second},
	}
	for _, tt := range tests {
		if got := p.Delay(tt.n, 0); got != tt.lo {
			t.Errorf("Delay(n=%d) with lowest jitter = %s, want %s", tt.n, got, tt.lo)
		}
		if got := p.Delay(tt.n, 1); got != tt.hi {
			t.Errorf("Delay(n=%d) with highest jitter = %s, want %s", tt.n, got, tt.hi)
		}
		for range 100 {
			if got := p.Delay(tt.n, Rand()); got < tt.lo || got > tt.hi {
				t.Fatalf("Delay(n=%d) = %s, outside [%s, %s]", tt.n, got, tt.lo, tt.hi)
			}
		}
	}
}

func TestSymmetricJitter(t *testing.T) {
	p := Policy{Base: 5 * time.Second, Max: time.Hour, Jitter: 0.2}
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{{0, 4 * time.Second}, {0.5, 5 * time.Second}, {0.75, 5500 * time.Millisecond}} {
		if got := p.Delay(1, tc.r); got != tc.want {
			t.Errorf("Delay(1, %v) = %s, want %s", tc.r, got, tc.want)
		}
	}
	if got := (Policy{Base: time.Second, Max: time.Minute}).Delay(3, 0.9); got != 4*time.Second {
		t.Errorf("no jitter: Delay(3) = %s, want 4s", got)
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{20 * time.Second, 40 * time.Second, 80 * time.Second, 120 * time.Second}
	want := []time.Duration{20, 20, 40, 80, 120, 120, 120}
	for n, w := range want {
		if got := s.Delay(n); got != w*time.Second {
			t.Errorf("Delay(%d) = %s, want %s", n, got, w*time.Second)
		}
	}
}

func TestStreak(t *testing.T) {
	p := Policy{Base: time.Second, Max: 4 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s Streak
	if !s.Due(t0) || s.Failures() != 0 {
		t.Fatalf("zero Streak: due %v, failures %d", s.Due(t0), s.Failures())
	}
	s.Fail(p, t0, 0)
	s.Fail(p, t0.Add(500*time.Millisecond), 0) // during the wait: the same attempt
	if s.Failures() != 1 || !s.Until().Equal(t0.Add(time.Second)) || s.Due(t0.Add(999*time.Millisecond)) {
		t.Fatalf("after one failure: %d failures, until %s", s.Failures(), s.Until())
	}
	now := t0.Add(time.Second)
	for _, want := range []time.Duration{2, 4, 4} {
		if !s.Due(now) {
			t.Fatalf("not due at %s (until %s)", now, s.Until())
		}
		s.Fail(p, now, 0)
		if got := s.Until().Sub(now); got != want*time.Second {
			t.Fatalf("wait after %d failures %s, want %s", s.Failures(), got, want*time.Second)
		}
		now = s.Until()
	}
	s.Reset()
	if !s.Due(t0) || s.Failures() != 0 {
		t.Fatal("Reset kept the streak")
	}
}
