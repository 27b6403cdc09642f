package publish

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	low := func(n int64) int64 { return 0 }
	high := func(n int64) int64 { return n - 1 }
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
		if got := backoff(time.Second, time.Minute, tt.n, low); got != tt.lo {
			t.Errorf("backoff(n=%d) with lowest jitter = %s, want %s", tt.n, got, tt.lo)
		}
		if got := backoff(time.Second, time.Minute, tt.n, high); got != tt.hi {
			t.Errorf("backoff(n=%d) with highest jitter = %s, want %s", tt.n, got, tt.hi)
		}
		for range 100 {
			if got := backoff(time.Second, time.Minute, tt.n, defaultRand); got < tt.lo || got > tt.hi {
				t.Fatalf("backoff(n=%d) = %s, outside [%s, %s]", tt.n, got, tt.lo, tt.hi)
			}
		}
	}
}
