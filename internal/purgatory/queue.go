package purgatory

import (
	"sort"
	"time"
)

// syncQueue schedules identifiers: when each may be synced next, how many
// attempts failed in a row, and whether a sync runs now. Not safe for
// concurrent use; Purgatory guards it with its mutex.
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
}

func newSyncQueue(backoff func(n int) time.Duration) *syncQueue {
	return &syncQueue{backoff: backoff, entries: map[string]*queueEntry{}}
}

// add schedules identifier after delay. A new event resets the failure count
// and can only bring the next attempt earlier.
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
	if t := now.Add(delay); t.Before(e.next) {
		e.next = t
	}
}

// ready returns the identifiers due at now that are not being synced, in
// name order, and marks them in progress.
func (q *syncQueue) ready(now time.Time) []string {
	var out []string
	for id, e := range q.entries {
		if !e.inProgress && !now.Before(e.next) {
			e.inProgress = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// done ends a sync: a complete identifier leaves the queue, otherwise the
// next attempt follows the backoff (or the delay of an event that arrived
// meanwhile, which also reset the failure count).
func (q *syncQueue) done(id string, complete bool, now time.Time) {
	e, ok := q.entries[id]
	if !ok {
		return
	}
	e.inProgress = false
	if e.dirty {
		e.dirty = false
		e.next = now.Add(e.redo)
		return
	}
	if complete {
		delete(q.entries, id)
		return
	}
	e.attempts++
	e.next = now.Add(q.backoff(e.attempts))
}

// remove drops an identifier unless a sync for it is running.
func (q *syncQueue) remove(id string) {
	if e, ok := q.entries[id]; ok && !e.inProgress {
		delete(q.entries, id)
	}
}

// earliest returns the soonest next attempt of an idle entry.
func (q *syncQueue) earliest() (time.Time, bool) {
	var t time.Time
	found := false
	for _, e := range q.entries {
		if e.inProgress {
			continue
		}
		if !found || e.next.Before(t) {
			t, found = e.next, true
		}
	}
	return t, found
}

func (q *syncQueue) len() int { return len(q.entries) }
