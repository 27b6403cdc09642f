package ingest

import (
	"slices"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// RejectedConfig bounds the RejectedIndex; it is the configuration's
// rejected section.
type RejectedConfig struct {
	HotTTL  time.Duration `yaml:"hot_ttl" help:"How long whole rejected events are kept for retry when a dependency is accepted."`
	HotMax  int           `yaml:"hot_max" help:"Rejected events kept whole at most."`
	ColdTTL time.Duration `yaml:"cold_ttl" help:"How long rejected event ids are remembered (excluded from sync)."`
	ColdMax int           `yaml:"cold_max" help:"Rejected event ids remembered at most."`
}

// Validate reports every invalid field, keyed by its YAML key.
func (c RejectedConfig) Validate() error {
	v := setting.Checks{}
	v.Positive("hot_ttl", c.HotTTL)
	v.PositiveInt("hot_max", c.HotMax)
	v.Positive("cold_ttl", c.ColdTTL)
	v.PositiveInt("cold_max", c.ColdMax)
	return v.Err()
}

// MaxRejectedRefs bounds the dependencies remembered per rejected event:
// any one of them being accepted brings the event back.
const MaxRejectedRefs = 32

// DefaultRejectedConfig returns the default bounds: whole events for two
// minutes (at most 10,000), ids for a week (at most 1,000,000).
func DefaultRejectedConfig() RejectedConfig {
	return RejectedConfig{HotTTL: 2 * time.Minute, HotMax: 10000, ColdTTL: 7 * 24 * time.Hour, ColdMax: 1000000}
}

// RejectedIndex remembers events the own relay refused: whole events for a
// short while (hot), ids for long (cold). Both count as "have" for
// reconciliation, so they are not fetched again and again. When a
// dependency (a repository address or a root event id) is accepted, the
// events referencing it are handed back for another try and forgotten.
// Safe for concurrent use. Only verified events may be added.
type RejectedIndex struct {
	cfg RejectedConfig
	now func() time.Time
	// key keys the reference hashes; it is persisted with the index
	// (ExportState), so restored entries find their dependencies.
	key uint64
	// gen counts changes, so a state store knows when to save.
	gen uint64

	mu       sync.Mutex
	hot      map[event.ID]*hotEntry
	cold     map[event.ID]coldEntry
	byRef    map[uint64][]event.ID // ref hash → ids (hot and cold)
	order    []event.ID            // insertion order of cold ids, for eviction
	hotOrder []event.ID            // insertion order of hot ids, for eviction

	// accepted remembers, for HotTTL, the dependencies accepted lately:
	// an event whose rejection arrives after its dependency's acceptance
	// (pipelined publishing) is retried at once instead of waiting for
	// the next sync. retried makes that happen once per event. Times are
	// unix nanoseconds (8 bytes where a time.Time takes 24).
	accepted map[uint64]int64
	retried  map[event.ID]int64
}

type hotEntry struct {
	ev *nostr.Event
	at time.Time
}

type coldEntry struct {
	at        int64 // unix seconds
	createdAt int64
	refs      []uint64 // hashes of its dependencies, at most MaxRejectedRefs
}

// NewRejectedIndex returns an empty index.
func NewRejectedIndex(cfg RejectedConfig, now func() time.Time) *RejectedIndex {
	if now == nil {
		now = time.Now
	}
	return &RejectedIndex{
		cfg: cfg, now: now, key: randomKey(),
		hot:      make(map[event.ID]*hotEntry),
		cold:     make(map[event.ID]coldEntry),
		byRef:    make(map[uint64][]event.ID),
		accepted: make(map[uint64]int64),
		retried:  make(map[event.ID]int64),
	}
}

func (r *RejectedIndex) refHash(ref string) uint64 {
	// FNV-1a from a secret starting state: crafted references cannot aim
	// at one list without knowing the key (a collision only retries or
	// forgets an unrelated event early, which is harmless).
	h := r.key ^ 14695981039346656037
	for i := 0; i < len(ref); i++ {
		h ^= uint64(ref[i])
		h *= 1099511628211
	}
	return h
}

// Add records ev as rejected. It returns true instead, recording nothing,
// when one of ev's dependencies was accepted within HotTTL and ev was not
// retried for that yet: the caller should publish it again now.
func (r *RejectedIndex) Add(ev *nostr.Event) (retryNow bool) {
	id, ok := event.IDOf(ev)
	if !ok {
		return false
	}
	return r.addID(id, ev)
}

// addID is Add of an event whose id (id) is decoded already.
func (r *RejectedIndex) addID(id event.ID, ev *nostr.Event) (retryNow bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	refs := nip34.References(ev)
	if _, done := r.retried[id]; !done {
		for _, ref := range refs {
			if at, ok := r.accepted[r.refHash(ref)]; ok && time.Duration(now.UnixNano()-at) <= r.cfg.HotTTL {
				r.retried[id] = now.UnixNano()
				return true
			}
		}
	}
	r.gen++
	if old, exists := r.cold[id]; exists {
		// Rejected again: keep its place and references, refresh its age.
		old.at = now.Unix()
		r.cold[id] = old
	} else {
		ce := coldEntry{at: now.Unix(), createdAt: int64(ev.CreatedAt)}
		for _, ref := range refs {
			if len(ce.refs) == MaxRejectedRefs {
				break
			}
			h := r.refHash(ref)
			if !slices.Contains(ce.refs, h) {
				ce.refs = append(ce.refs, h)
			}
		}
		r.order = append(r.order, id)
		for _, h := range ce.refs {
			r.byRef[h] = append(r.byRef[h], id)
		}
		r.cold[id] = ce
	}
	if r.cfg.HotMax > 0 {
		if _, exists := r.hot[id]; !exists {
			r.hotOrder = append(r.hotOrder, id)
		}
		r.hot[id] = &hotEntry{ev: ev, at: now}
		for len(r.hot) > r.cfg.HotMax && len(r.hotOrder) > 0 {
			delete(r.hot, r.hotOrder[0])
			r.hotOrder = r.hotOrder[1:]
		}
	}
	for r.cfg.ColdMax > 0 && len(r.cold) > r.cfg.ColdMax && len(r.order) > 0 {
		r.removeLocked(r.order[0])
	}
	return false
}

// pruneRecentLocked bounds the accepted and retried memories.
func (r *RejectedIndex) pruneRecentLocked(now time.Time) {
	limit := max(4*r.cfg.HotMax, 1024)
	pruneTimes(r.accepted, now, r.cfg.HotTTL, limit)
	pruneTimes(r.retried, now, r.cfg.HotTTL, limit)
}

// pruneTimes drops entries older than ttl once m exceeds limit, and starts
// over if that is not enough.
func pruneTimes[K comparable](m map[K]int64, now time.Time, ttl time.Duration, limit int) {
	if len(m) <= limit {
		return
	}
	for k, at := range m {
		if time.Duration(now.UnixNano()-at) > ttl {
			delete(m, k)
		}
	}
	if len(m) > limit {
		clear(m)
	}
}

// removeLocked forgets id entirely.
func (r *RejectedIndex) removeLocked(id event.ID) {
	r.gen++
	ce, ok := r.cold[id]
	delete(r.hot, id)
	delete(r.cold, id)
	if ok {
		for _, h := range ce.refs {
			ids := r.byRef[h]
			for j, x := range ids {
				if x == id {
					ids = append(ids[:j], ids[j+1:]...)
					break
				}
			}
			if len(ids) == 0 {
				delete(r.byRef, h)
			} else {
				r.byRef[h] = ids
			}
		}
	}
	if len(r.order) > 0 && r.order[0] == id {
		r.order = r.order[1:]
	}
}

// expireLocked drops hot entries past HotTTL and cold ones past ColdTTL.
func (r *RejectedIndex) expireLocked(now time.Time) {
	for len(r.hotOrder) > 0 {
		id := r.hotOrder[0]
		if e, ok := r.hot[id]; ok && now.Sub(e.at) <= r.cfg.HotTTL {
			break
		}
		delete(r.hot, id)
		r.hotOrder = r.hotOrder[1:]
	}
	cut := now.Add(-r.cfg.ColdTTL).Unix()
	for len(r.order) > 0 {
		id := r.order[0]
		ce, ok := r.cold[id]
		if ok && ce.at >= cut {
			break
		}
		if ok {
			r.removeLocked(id)
		} else {
			r.order = r.order[1:]
		}
	}
}

// Expire applies the TTLs now; Add does it too.
func (r *RejectedIndex) Expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(r.now())
}

// Has tells whether id is remembered as rejected.
func (r *RejectedIndex) Has(id string) bool {
	b, ok := event.DecodeID(id)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, has := r.cold[b]
	return has
}

// DependencyAccepted is called when ref (a repository address or an event
// id) was accepted by the own relay. It returns the hot events that
// referenced it, for another try, and forgets every event (hot or cold)
// that referenced it so the next sync fetches the cold ones again. The
// second result lists the forgotten cold-only ids.
func (r *RejectedIndex) DependencyAccepted(ref string) (retry []*nostr.Event, forgotten []string) {
	again, gone := r.dependencyAccepted(ref)
	for _, e := range again {
		retry = append(retry, e.ev)
	}
	for _, id := range gone {
		forgotten = append(forgotten, id.String())
	}
	return retry, forgotten
}

// dependencyAccepted is DependencyAccepted with the ids in binary.
func (r *RejectedIndex) dependencyAccepted(ref string) (retry []idEvent, forgotten []event.ID) {
	h := r.refHash(ref)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accepted[h] = now.UnixNano()
	r.pruneRecentLocked(now)
	ids := r.byRef[h]
	if len(ids) == 0 {
		return nil, nil
	}
	ids = append([]event.ID(nil), ids...)
	for _, id := range ids {
		if e, ok := r.hot[id]; ok {
			retry = append(retry, idEvent{id: id, ev: e.ev})
		} else {
			forgotten = append(forgotten, id)
		}
		r.removeLocked(id)
	}
	return retry, forgotten
}

// Items calls fn with created_at and id of every remembered event (for the
// negentropy local set).
func (r *RejectedIndex) Items(fn func(createdAt int64, id event.ID)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, ce := range r.cold {
		fn(ce.createdAt, id)
	}
}

// Len returns the number of hot and cold entries.
func (r *RejectedIndex) Len() (hot, cold int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hot), len(r.cold)
}
