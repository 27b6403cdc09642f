package purgatory

import "github.com/grasp-sync/grasp-sync/internal/persisted"

// Persisted is one held event as a state store keeps it across restarts
// (persisted.Held).
type Persisted = persisted.Held

// Generation changes whenever an event is taken in or leaves, so a store
// knows when to save again.
func (p *Purgatory) Generation() uint64 { return p.gen.Load() }

// Export returns the held events with their deadlines and attempts.
func (p *Purgatory) Export() []Persisted {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Persisted, 0, len(p.byID))
	now := p.clock.Now()
	for _, e := range p.byID {
		ps := Persisted{Event: e.ev, OnOwnRelay: e.onOwnRelay, Added: e.added}
		if q := p.queue.entries[e.identifier]; q != nil {
			ps.Attempts, ps.Next = q.attempts, q.next
			if q.next.IsZero() { // waiting for a domain: due at once after a restart
				ps.Next = now
			}
		}
		out = append(out, ps)
	}
	return out
}

// Restore takes persisted events back in, before Run, keeping their
// original intake time (so the expiry deadline stays where it was) and
// their identifier's attempts and next attempt. Events that no longer
// parse, are stale or exceed MaxEntries are skipped and counted.
func (p *Purgatory) Restore(items []Persisted) (restored, skipped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range items {
		if it.Event == nil || !p.Needs(it.Event) || len(p.byID) >= p.cfg.MaxEntries {
			skipped++
			continue
		}
		if _, ok := p.byID[it.Event.ID]; ok {
			continue
		}
		e, err := parseEntry(it.Event, p.cfg.MaxCloneURLs)
		if err != nil {
			skipped++
			continue
		}
		e.onOwnRelay, e.added = it.OnOwnRelay, it.Added
		if it.Event.Kind == KindState {
			if old := p.states[e.identifier][it.Event.PubKey]; old != nil {
				if !(stamp{it.Event.CreatedAt, it.Event.ID}).newer(stamp{old.ev.CreatedAt, old.ev.ID}) {
					skipped++
					continue
				}
				p.removeLocked(old)
			}
			if it.OnOwnRelay {
				p.setLatestLocked(it.Event.PubKey+"/"+e.identifier, stamp{it.Event.CreatedAt, it.Event.ID})
			}
		}
		p.insertLocked(e)
		if it.Next.IsZero() { // a zero next attempt would never come
			it.Next = p.clock.Now()
		}
		q := p.queue.entries[e.identifier]
		if q == nil {
			p.queue.entries[e.identifier] = &queueEntry{next: it.Next, attempts: it.Attempts}
		} else if it.Next.Before(q.next) {
			q.next = it.Next
		}
		restored++
	}
	p.m.queueSize.Set(float64(p.queue.len()))
	return restored, skipped
}
