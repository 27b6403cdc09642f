package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeadroomMiB is the default of memory.gc_headroom_mib.
const DefaultHeadroomMiB = 56

// MinPercent is the lowest GOGC the headroom tuner sets: with a live heap
// of more than 5 × headroom the heap may grow past it by a fifth, so the
// collector's work per allocated byte stays within 5× GOGC 100's.
const MinPercent = 20

// HeadroomPercent is the GOGC under which a heap of live bytes grows by at
// most headroom bytes before the next collection: base (the GOGC in force
// at start) while headroom covers base % of live, never below MinPercent
// (nor below base when base is lower).
func HeadroomPercent(live, headroom uint64, base int) int {
	if live == 0 {
		return base
	}
	p := float64(headroom) * 100 / float64(live)
	if p >= float64(base) {
		return base
	}
	return max(int(p), min(MinPercent, base))
}

// LimitOver is how far past the heap goal the soft memory limit is set
// while the tuner lowers GOGC, in headrooms: the heap goal (live +
// headroom, or more at MinPercent) leads the collections, and the limit,
// half a headroom further, bounds what the runtime keeps from the OS
// around it (freed pages it has not returned yet, a burst between two
// collections).
const LimitOver = 0.5

// HeadroomLimit is the soft memory limit for a heap of live bytes under
// GOGC percent: base (the limit in force at start; math.MaxInt64: none)
// while the tuner keeps GOGC at its start value (percent ≥ basePercent),
// else the heap goal (live × (1 + percent/100), at least live + headroom)
// plus LimitOver × headroom, never above base. Above the goal, not at
// live + a constant: at MinPercent the goal is past live + headroom, and
// a limit below it would collect ever more often as the live heap grows.
func HeadroomLimit(live, headroom uint64, percent, basePercent int, base int64) int64 {
	if percent >= basePercent {
		return base
	}
	goal := max(float64(live)*(1+float64(percent)/100), float64(live)+float64(headroom))
	l := goal + LimitOver*float64(headroom)
	if l >= float64(base) {
		return base
	}
	return int64(l)
}

// Headroom keeps the Go heap near the live heap as the live heap grows:
// at GOGC 100 the collector lets the heap reach twice what is live, so a
// process whose indexes hold 200 MB lives at 400 MB and more. After each
// collection the tuner lowers GOGC so that the heap may grow by at most
// the headroom (HeadroomPercent), and sets the soft memory limit half a
// headroom above that (HeadroomLimit), so the runtime returns freed pages
// to the OS rather than keep them, and a burst of allocation between two
// collections meets a collection early. A small heap keeps the GOGC and
// the limit it started with, and so the collector's usual cost.
//
// The tuner runs from a finalizer the runtime calls after each
// collection (no timer, no goroutine of its own). It composes with the
// soft memory limit (Apply; start the tuner after it): the configured
// limit stays the ceiling of the one it sets.
type Headroom struct {
	headroom  uint64
	base      int
	baseLimit int64

	mu      sync.Mutex
	stopped bool
	percent int
	limit   int64
	sample  []metrics.Sample
}

// StartHeadroom starts the tuner with headroom MiB and returns it; nil when
// mib is not positive or the collector is off (GOGC=off).
func StartHeadroom(mib int) *Headroom {
	if mib <= 0 {
		return nil
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s[:1])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return nil
	}
	base := int(s[0].Value.Uint64()) // GOGC=off reads as 2^64-1: negative
	if base <= 0 || base > math.MaxInt32 {
		return nil
	}
	limit := debug.SetMemoryLimit(-1) // reads it
	h := &Headroom{headroom: uint64(mib) << 20, base: base, baseLimit: limit, percent: base, limit: limit, sample: s[1:]}
	h.arm()
	return h
}

// sentinel is garbage from birth: its finalizer runs after the next
// collection. It has a pointer so that it is never a tiny allocation
// (whose finalizer may not run).
type sentinel struct{ h *Headroom }

func (h *Headroom) arm() {
	runtime.SetFinalizer(&sentinel{h: h}, func(s *sentinel) { s.h.afterGC() })
}

func (h *Headroom) afterGC() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		live := h.sample[0].Value.Uint64()
		if p := HeadroomPercent(live, h.headroom, h.base); p != h.percent {
			debug.SetGCPercent(p)
			h.percent = p
		}
		if l := HeadroomLimit(live, h.headroom, h.percent, h.base, h.baseLimit); l != h.limit {
			debug.SetMemoryLimit(l)
			h.limit = l
		}
	}
	h.arm()
}

// Percent is the GOGC the tuner set last.
func (h *Headroom) Percent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.percent
}

// Limit is the soft memory limit the tuner set last.
func (h *Headroom) Limit() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit
}

// Stop ends the tuning and puts back the GOGC and limit in force at start.
func (h *Headroom) Stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		debug.SetGCPercent(h.base)
		debug.SetMemoryLimit(h.baseLimit)
		h.percent, h.limit = h.base, h.baseLimit
	}
}
