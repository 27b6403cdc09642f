package purgatory

import (
	"sort"
	"time"
)

// syncQueue schedules identifiers: when each may be synced next, how many
// attempts failed in a row, and whether a sync runs now or waits for a
// request slot on a throttled domain. Not safe for concurrent use;
// Purgatory guards it with its mutex.
//
// An attempt starts when the main loop picks an identifier (ready) and
// ends when neither its main-loop sync runs nor a domain's queue holds it
// (done, leave): only then does it count, as complete or as failed. A
// sync that found every domain it needs throttled has not failed: it
// waits, with no attempt planned (next is zero), until the domains' queues
// have run it.
type syncQueue struct {
	backoff func(n int) time.Duration
	entries map[string]*queueEntry
}

type queueEntry struct {
	next       time.Time
	attempts   int
	inProgress bool
	// dirty is set when an event arrives during a sync; the sync's end then
	// schedules the next attempt after redo instead of a backoff.
	dirty bool
	redo  time.Duration
	// lastErr is the latest failure noted for the identifier (noteError).
	lastErr   string
	lastErrAt time.Time
	// waiting holds the domains whose throttle queue holds the identifier.
	waiting map[string]bool
}

func newSyncQueue(backoff func(n int) time.Duration) *syncQueue {
	return &syncQueue{backoff: backoff, entries: map[string]*queueEntry{}}
}

// add schedules identifier after delay. A new event resets the failure count
// and can only bring the next attempt earlier (a waiting identifier gets a
// main-loop attempt, which tries the domains that are free).
func (q *syncQueue) add(id string, delay time.Duration, now time.Time) {
	e, ok := q.entries[id]
	if !ok {
		q.entries[id] = &queueEntry{next: now.Add(delay)}
		return
	}
	e.attempts = 0
	if e.inProgress {
		if !e.dirty || delay < e.redo {
			e.redo = delay
		}
		e.dirty = true
		return
	}
	if t := now.Add(delay); e.next.IsZero() || t.Before(e.next) {
		e.next = t
	}
}

// ready returns the identifiers due at now that are not being synced, in
// name order, and marks them in progress.
func (q *syncQueue) ready(now time.Time) []string {
	var out []string
	for id, e := range q.entries {
		if !e.inProgress && !e.next.IsZero() && !now.Before(e.next) {
			e.inProgress = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// done ends a main-loop sync. An identifier left waiting for a domain's
// request slot has no attempt planned (unless an event arrived meanwhile)
// and its attempt goes on. Otherwise the attempt ends: a complete
// identifier leaves the queue, otherwise the next attempt follows the
// backoff (or the delay of an event that arrived meanwhile, which also
// reset the failure count). It reports whether the attempt ended.
func (q *syncQueue) done(id string, complete bool, now time.Time) bool {
	e, ok := q.entries[id]
	if !ok {
		return true
	}
	e.inProgress = false
	if !complete && len(e.waiting) > 0 {
		e.next = time.Time{}
		if e.dirty {
			e.dirty = false
			e.next = now.Add(e.redo)
		}
		return false
	}
	return q.end(e, id, complete, now)
}

// wait records that id waits in domain's throttle queue. False when id is
// not in the sync queue.
func (q *syncQueue) wait(id, domain string) bool {
	e, ok := q.entries[id]
	if !ok {
		return false
	}
	if e.waiting == nil {
		e.waiting = map[string]bool{}
	}
	e.waiting[domain] = true
	return true
}

// leave records that domain's throttle queue let id go (its fetch there
// ran, or there was nothing to do). When id waits nowhere else and no sync
// of it runs or is planned, its attempt ends (as done's does); leave
// reports whether it did.
func (q *syncQueue) leave(id, domain string, complete bool, now time.Time) bool {
	e, ok := q.entries[id]
	if !ok || !e.waiting[domain] {
		return false
	}
	delete(e.waiting, domain)
	if len(e.waiting) > 0 || e.inProgress || !e.next.IsZero() {
		return false
	}
	return q.end(e, id, complete, now)
}

// end ends e's attempt; it reports true.
func (q *syncQueue) end(e *queueEntry, id string, complete bool, now time.Time) bool {
	if e.dirty {
		e.dirty = false
		e.next = now.Add(e.redo)
		return true
	}
	if complete {
		delete(q.entries, id)
		return true
	}
	e.attempts++
	e.next = now.Add(q.backoff(e.attempts))
	return true
}

// remove drops an identifier unless a sync for it runs or waits for a
// domain (that attempt still ends, and is counted, through done or leave).
func (q *syncQueue) remove(id string) {
	if e, ok := q.entries[id]; ok && !e.inProgress && len(e.waiting) == 0 {
		delete(q.entries, id)
	}
}

// earliest returns the soonest next attempt of an idle entry.
func (q *syncQueue) earliest() (time.Time, bool) {
	var t time.Time
	found := false
	for _, e := range q.entries {
		if e.inProgress || e.next.IsZero() {
			continue
		}
		if !found || e.next.Before(t) {
			t, found = e.next, true
		}
	}
	return t, found
}

func (q *syncQueue) len() int { return len(q.entries) }
