package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestHeadroomPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		base, want     int
	}{
		{0, 64 * mib, 100, 100},         // nothing measured yet
		{40 * mib, 64 * mib, 100, 100},  // the headroom covers GOGC 100
		{64 * mib, 64 * mib, 100, 100},  // exactly
		{64*mib + 1, 64 * mib, 100, 99}, // just past: rounds down
		{128 * mib, 64 * mib, 100, 50},  // the heap goal is live + 64 MiB
		{150 * mib, 64 * mib, 100, 42},  // the large profile's live heap
		{320 * mib, 64 * mib, 100, 20},  // the floor
		{1000 * mib, 64 * mib, 100, 20}, //
		{3 << 40, 64 * mib, 100, 20},    // no overflow
		{100 * mib, 1 << 40, 100, 100},  //
		{100 * mib, 0, 100, 20},         // headroom 0 (StartHeadroom refuses it)
		{200 * mib, 64 * mib, 50, 32},   // a lower GOGC of the operator's is the ceiling
		{200 * mib, 64 * mib, 25, 25},   //
		{1000 * mib, 64 * mib, 10, 10},  // a GOGC below the floor is kept
		{100 * mib, 64 * mib, 400, 64},  // a higher one is lowered as well
		{10 * mib, 64 * mib, 400, 400},  //
	} {
		if got := HeadroomPercent(c.live, c.headroom, c.base); got != c.want {
			t.Errorf("HeadroomPercent(live %d, headroom %d, base %d) = %d, want %d", c.live, c.headroom, c.base, got, c.want)
		}
	}
}

func TestHeadroomLimit(t *testing.T) {
	const mib = 1 << 20
	const none = math.MaxInt64
	for _, c := range []struct {
		live, headroom       uint64
		percent, basePercent int
		base, want           int64
	}{
		{40 * mib, 64 * mib, 100, 100, none, none},                   // GOGC not lowered: no limit of the tuner's
		{40 * mib, 64 * mib, 100, 100, 500 * mib, 500 * mib},         // nor a change to the operator's
		{200 * mib, 64 * mib, 32, 100, none, 296 * mib},              // live + 1.5 headrooms (GOGC 32 rounds 64/200 down)
		{200 * mib, 64 * mib, 32, 100, 250 * mib, 250 * mib},         // the operator's lower limit wins
		{200 * mib, 64 * mib, 25, 50, none, 296 * mib},               // an operator's GOGC lowered further
		{1 << 30, 64 * mib, 20, 100, none, 1<<30 + 1<<30/5 + 32*mib}, // at the floor: the goal (1.2 × live) and half a headroom
		{3 << 40, 64 * mib, 20, 100, none, 3<<40 + 3<<40/5 + 32*mib}, // large
		{1 << 62, 1 << 62, 20, 100, none, none},                      // no overflow
	} {
		if got := HeadroomLimit(c.live, c.headroom, c.percent, c.basePercent, c.base); got != c.want {
			t.Errorf("HeadroomLimit(live %d, headroom %d, GOGC %d of %d, limit %d) = %d, want %d",
				c.live, c.headroom, c.percent, c.basePercent, c.base, got, c.want)
		}
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(s[0].Value.Uint64())
}

// waitPercent collects until the tuner's finalizer has set want.
func waitPercent(t *testing.T, h *Headroom, want func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		time.Sleep(time.Millisecond) // the finalizer goroutine runs
		if p := h.Percent(); want(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stays %d", h.Percent())
		}
	}
}

// TestHeadroomFollowsTheLiveHeap holds 96 MiB live with a 24 MiB headroom:
// the collector's GOGC goes down to about 25 and the soft memory limit to
// the live heap and 36 MiB, and the runtime has both; with the memory
// released they go back up, and Stop puts back what was set.
func TestHeadroomFollowsTheLiveHeap(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	baseLimit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(baseLimit)
	h := StartHeadroom(24)
	if h == nil {
		t.Fatal("StartHeadroom(24) = nil with GOGC 100")
	}
	defer h.Stop()

	live := make([][]byte, 96)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = byte(i)
	}
	p := waitPercent(t, h, func(p int) bool { return p < 30 })
	if p < MinPercent || gogc() != p {
		t.Errorf("with 96 MiB live: tuner %d, runtime %d; want between %d and 30", p, gogc(), MinPercent)
	}
	if l, rl := h.Limit(), debug.SetMemoryLimit(-1); l != rl || l < (96+36)<<20 || l > (96+36+16)<<20 {
		t.Errorf("with 96 MiB live: limit %d MiB, runtime %d MiB; want 132 to 148", l>>20, rl>>20)
	}
	runtime.KeepAlive(live)
	live = nil
	waitPercent(t, h, func(p int) bool { return p == 100 })
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("with the heap released the limit stays %d MiB", l>>20)
	}

	h.Stop()
	if got := gogc(); got != 100 {
		t.Errorf("after Stop GOGC = %d, want 100", got)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("after Stop the limit is %d MiB", l>>20)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := gogc(); got != 100 {
		t.Errorf("a collection after Stop changed GOGC to %d", got)
	}
}

func TestHeadroomOff(t *testing.T) {
	if h := StartHeadroom(0); h != nil {
		t.Error("StartHeadroom(0) started a tuner")
	}
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	if h := StartHeadroom(64); h != nil {
		t.Error("StartHeadroom with GOGC=off started a tuner")
	}
}
