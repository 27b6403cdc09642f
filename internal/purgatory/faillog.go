package purgatory

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// failLog writes the WARN lines of failed fetches and releases, at most
// one per identifier and kind of failure per interval; the line after a
// quiet period carries how many failures it stands for.
type failLog struct {
	log      *zap.Logger
	clock    clock.Clock
	interval time.Duration

	mu   sync.Mutex
	last map[string]*failLine // identifier + "\x00" + what
}

type failLine struct {
	at         time.Time
	suppressed int
}

// maxFailLines bounds the identifiers remembered; older lines are dropped
// first when it is exceeded.
const maxFailLines = 4096

func newFailLog(log *zap.Logger, clk clock.Clock, interval time.Duration) *failLog {
	return &failLog{log: log, clock: clk, interval: interval, last: map[string]*failLine{}}
}

// warn logs msg with fields for identifier id unless a line for the same id
// and msg was written less than interval ago; then it only counts.
func (f *failLog) warn(id, msg string, fields ...zap.Field) {
	now := f.clock.Now()
	key := id + "\x00" + msg
	f.mu.Lock()
	l := f.last[key]
	if l != nil && now.Sub(l.at) < f.interval {
		l.suppressed++
		f.mu.Unlock()
		return
	}
	failures := 1
	if l != nil {
		failures += l.suppressed
	}
	if len(f.last) >= maxFailLines && l == nil {
		for k, o := range f.last {
			if now.Sub(o.at) >= f.interval {
				delete(f.last, k)
			}
		}
		if len(f.last) >= maxFailLines {
			clear(f.last)
		}
	}
	f.last[key] = &failLine{at: now}
	f.mu.Unlock()
	f.log.Warn(msg, append([]zap.Field{zap.String("identifier", id), zap.Int("failures", failures),
		zap.Duration("per", f.interval)}, fields...)...)
}

// forget drops id's lines (its events left the purgatory).
func (f *failLog) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.last {
		if len(k) > len(id) && k[:len(id)] == id && k[len(id)] == 0 {
			delete(f.last, k)
		}
	}
}
