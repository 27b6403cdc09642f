package harness

import (
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Deliver stores evs and delivers each newly stored one to the live
// subscriptions it matches, as if a client had published it (no policy,
// no OK, no connection): a writer that no connection fault interrupts.
// It returns how many were new.
func (r *Relay) Deliver(evs ...*nostr.Event) int {
	n := 0
	for _, ev := range evs {
		stored, err := r.store.saveReport(ev)
		if err != nil || !stored {
			continue
		}
		n++
		for _, c := range r.connections() {
			c.deliverLive(ev)
		}
	}
	return n
}

// CutEvery cuts every open client connection of the relays abruptly (as
// DropConnections), all at once, every period until stop is called;
// reconnects are accepted at once: relays behind a proxy that resets its
// connections on a fixed schedule. It calls cut, when not nil, with the
// time of each cut after it.
func CutEvery(period time.Duration, cut func(time.Time), relays ...*Relay) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				for _, r := range relays {
					r.DropConnections()
				}
				if cut != nil {
					cut(now)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
