package publish

import (
	"math/rand/v2"
	"time"
)

// backoff returns the delay before attempt n (n >= 1) of something that
// failed n times in a row: base·2^(n−1), capped at max, with "equal jitter"
// (a uniformly random point in the upper half), so that many publishers do
// not retry in lockstep. rnd returns a value in [0, n).
func backoff(base, max time.Duration, n int, rnd func(int64) int64) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max || d <= 0 {
		d = max
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return d - half + time.Duration(rnd(int64(half)+1))
}

func defaultRand(n int64) int64 { return rand.Int64N(n) }
