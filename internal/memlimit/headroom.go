package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeadroomMiB is the default of memory.gc_headroom_mib.
const DefaultHeadroomMiB = 64

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

// Headroom keeps the Go heap near the live heap as the live heap grows:
// at GOGC 100 the collector lets the heap reach twice what is live, so a
// process whose indexes hold 200 MB lives at 400 MB and more. After each
// collection the tuner lowers GOGC so that the heap may grow by at most
// the headroom (HeadroomPercent). A small heap keeps the GOGC it started
// with, and so the collector's usual cost.
//
// The tuner runs from a finalizer the runtime calls after each
// collection (no timer, no goroutine of its own). It composes with the
// soft memory limit (Apply): whichever is lower stops the heap.
type Headroom struct {
	headroom uint64
	base     int

	mu      sync.Mutex
	stopped bool
	percent int
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
	h := &Headroom{headroom: uint64(mib) << 20, base: base, percent: base, sample: s[1:]}
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
		if p := HeadroomPercent(h.sample[0].Value.Uint64(), h.headroom, h.base); p != h.percent {
			debug.SetGCPercent(p)
			h.percent = p
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

// Stop ends the tuning and puts back the GOGC in force at start.
func (h *Headroom) Stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		debug.SetGCPercent(h.base)
		h.percent = h.base
	}
}
