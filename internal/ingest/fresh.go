package ingest

import "sync"

// maxFreshRelays bounds the relays freshCounts keeps a count for; past
// it the counts start over (the relays the sidecar follows are far fewer).
const maxFreshRelays = 4096

// freshCounts counts, per relay, the events that were new when they came
// from it: the first copy of an id the handler had not seen (nor learned
// the own relay holds), the one it sends on (Handler.Fresh).
type freshCounts struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (f *freshCounts) add(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxFreshRelays && f.m[url] == 0 {
		f.m = map[string]uint64{}
	}
	f.m[url]++
}

func (f *freshCounts) get(url string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[url]
}

// Fresh returns how many events were new when they came from the relay at
// url: the first copy of an id the handler had not seen nor learned the
// own relay holds, which it sent on (to the own relay or the purgatory).
// Against the relay's events received, it tells how much of what the
// relay sent was asked for again or was had from elsewhere.
func (h *Handler) Fresh(url string) uint64 { return h.fresh.get(url) }
