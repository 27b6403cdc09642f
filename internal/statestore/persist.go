package statestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/discovery"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
)

// Sources are the owners whose state the store saves; nil ones are skipped.
type Sources struct {
	Local     *localindex.Index
	Purgatory *purgatory.Purgatory
	// Relays returns the remote relays' states; they are saved only once
	// Confirmable, asked after Relays, reports true (nothing received is
	// still on its way to the own relay): at that flush, or else by Run at
	// the next instant it does.
	Relays      func() []reposync.PersistedRelay
	Confirmable func() bool
	// Repos returns the repository index (roots per repository).
	Repos func() discovery.PersistedRepos
	// Health returns the remote relays' health (failures, penalties).
	Health func() []health.Persisted
	// Rejected is the RejectedIndex (saved when it changed, at most every
	// Options.RejectedInterval, and at shutdown).
	Rejected *ingest.RejectedIndex
}

// Defaults of Options and of state.flush_interval.
const (
	DefaultFlushInterval    = 2 * time.Second
	DefaultLockTimeout      = 2 * time.Second
	DefaultHeartbeat        = 30 * time.Second
	DefaultRejectedInterval = time.Minute
	DefaultUsageInterval    = 10 * time.Second
)

// Tuning of the persisted local index.
const (
	// snapshotChunk is the events per chunk of a compacted local index.
	snapshotChunk = 10_000
	// maxChunks is the journal length that triggers a compaction.
	maxChunks = 512
	// purgatoryResave: with events held, the purgatory is saved at least
	// every this many flushes even if nothing entered or left (attempts and
	// next attempts move).
	purgatoryResave = 15
)

// Stats describe the store for /status.
type Stats struct {
	Dir           string    `json:"dir"`
	Outcome       Outcome   `json:"outcome"`
	Bytes         int64     `json:"bytes"`
	Events        int       `json:"events"`
	BytesPerEvent float64   `json:"bytes_per_event"`
	LastFlush     time.Time `json:"last_flush"`
	Flushes       uint64    `json:"flushes"`
	// RelaysSaved is when the remote relays' states were last saved (zero
	// before the first save of this run). They are saved only once nothing
	// received is on its way to the own relay (Sources.Confirmable): a
	// sidecar never idle keeps an old save, and a restart then syncs its
	// relays as of that save.
	RelaysSaved time.Time `json:"relays_saved"`
	// InUse is the bytes each bucket's pages hold (keys, values, page
	// headers; the file also has free pages and bbolt's growth slack).
	InUse map[string]int64 `json:"in_use"`
}

// writer is the state Run keeps between flushes.
type writer struct {
	mu        sync.Mutex
	chunks    int
	removed   int
	purgGen   uint64
	flushes   uint64
	lastFlush time.Time
	events    int
	relayGen  map[string]uint64
	relayConn map[string]time.Time
	relayDisc map[string]time.Time
	inUse     map[string]int64
	usageAt   time.Time
	reposGen  uint64
	headsGen  uint64
	// headIDs are the heads in the store (nil: not read yet);
	// headIDsNext what the flush in progress writes.
	headIDs, headIDsNext map[string]bool
	selfSeen             time.Time
	health               []byte
	lastBeat             time.Time
	rejGen               uint64
	rejAt                time.Time
	// relaysSaved is when relay states were last committed.
	relaysSaved time.Time
	// waiting are relay states a flush held back (not Confirmable).
	waiting []reposync.PersistedRelay
}

// relaysChanged reports whether a relay's confirmed items, connection
// times or set of relays differ from what was written last.
func (w *writer) relaysChanged(relays []reposync.PersistedRelay) bool {
	if len(relays) != len(w.relayGen) {
		return true
	}
	for _, r := range relays {
		g, ok := w.relayGen[r.URL]
		if !ok || g != r.ConfirmedGen || !r.LastConnected.Equal(w.relayConn[r.URL]) || !r.DisconnectedAt.Equal(w.relayDisc[r.URL]) {
			return true
		}
	}
	return false
}

// LoadLocal replays the persisted local index into idx and enables its
// journal. A chunk that does not decode stops the replay: the local index
// is cleared in the store (WARN) and loaded reports false, so the caller
// fills the index from the own relay as without a store.
func (s *Store) LoadLocal(idx *localindex.Index) (loaded bool, err error) {
	chunks := 0
	var bad error
	err = guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketLocal).ForEach(func(k, v []byte) error {
				chunks++
				if err := idx.LoadChunk(v); err != nil && !errors.Is(err, localindex.ErrFull) {
					bad = fmt.Errorf("chunk %x: %w", k, err)
					return bad
				}
				return nil
			})
		})
	})
	if errors.Is(err, errDamaged) {
		idx.EnableJournal()
		return false, s.replaceDamaged(err)
	}
	if bad != nil {
		s.log.Warn("persisted local index is damaged; it is dropped and filled from the own relay", zap.Error(bad))
		if err := s.db.Update(func(tx *bolt.Tx) error { return resetBucket(tx, bucketLocal) }); err != nil {
			return false, err
		}
		// What was replayed before the damage stays: extra items are
		// harmless and the own relay fill adds the rest.
		idx.EnableJournal()
		s.w().chunks = 0
		return false, nil
	}
	if err != nil {
		return false, err
	}
	idx.EnableJournal()
	s.w().chunks = chunks
	s.w().events = idx.Len()
	return chunks > 0, nil
}

// LoadPurgatory returns the persisted held events.
func (s *Store) LoadPurgatory() ([]purgatory.Persisted, error) {
	var out []purgatory.Persisted
	err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPurgatory).ForEach(func(k, v []byte) error {
				var p purgatory.Persisted
				if err := json.Unmarshal(v, &p); err != nil || p.Event == nil {
					s.log.Warn("skipping an unreadable persisted purgatory event", zap.ByteString("id", k), zap.Error(err))
					return nil
				}
				out = append(out, p)
				return nil
			})
		})
	})
	if errors.Is(err, errDamaged) {
		return nil, s.replaceDamaged(err)
	}
	return out, err
}

func (s *Store) w() *writer { return s.wr }

// guard runs a read of the store and turns a panic (bbolt faults on a
// damaged page) into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errDamaged, r)
		}
	}()
	return fn()
}

var errDamaged = errors.New("damaged store")

// replaceDamaged sets the store aside as corrupt and starts a new one.
func (s *Store) replaceDamaged(why error) error {
	if err := s.setAside("corrupt", why); err != nil {
		return err
	}
	s.outcome = Corrupt
	// The first flush writes whatever the owners hold as a snapshot.
	s.wr.chunks = maxChunks
	if err := s.open(); err != nil {
		return err
	}
	return s.initMeta()
}

func resetBucket(tx *bolt.Tx, name []byte) error {
	if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	_, err := tx.CreateBucket(name)
	return err
}

// Run flushes every interval until ctx is done. It does not flush at the
// end: the owner calls FlushFinal once everything that feeds the sources
// has stopped (a flush here would only be repeated by that one).
//
// Relay states a flush had to hold back (something received was still on
// its way to the own relay) are saved as soon as a look every
// interval/relayLooks finds nothing on its way: the states were built
// before that instant, so everything they claim reached the own relay.
func (s *Store) Run(ctx context.Context, src Sources, interval time.Duration) error {
	tick := s.opt.Clock.After(interval)
	for {
		var look <-chan time.Time
		if src.Confirmable != nil && s.relaysWaiting() {
			look = s.opt.Clock.After(max(interval/relayLooks, time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			tick = s.opt.Clock.After(interval)
			if err := s.Flush(src); err != nil {
				s.log.Warn("state store flush failed", zap.Error(err))
			}
		case <-look:
			if src.Confirmable() {
				if err := s.saveWaitingRelays(); err != nil {
					s.log.Warn("state store: saving the relays' states failed", zap.Error(err))
				}
			}
		}
	}
}

// Flush writes what changed since the last flush in one transaction: the
// local index's journal as one chunk (or, when the journal grew long, a
// snapshot replacing it) and the purgatory when it changed.
func (s *Store) Flush(src Sources) error { return s.flush(src, false) }

// FlushFinal is Flush at shutdown: what is written only now and then
// (timestamps, the RejectedIndex) is written too if it changed.
func (s *Store) FlushFinal(src Sources) error { return s.flush(src, true) }

func (s *Store) flush(src Sources, final bool) error {
	// The relays' states come from the engine's goroutine: asked before
	// the lock, so Stats (/status) does not wait for the engine.
	var rs []reposync.PersistedRelay
	if src.Relays != nil && src.Confirmable != nil {
		rs = src.Relays()
	}
	w := s.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	start := s.opt.Now()
	var chunk []byte
	var snapshot [][]byte
	removed := 0
	if src.Local != nil {
		w.events = src.Local.Len()
		if w.chunks >= maxChunks || (w.removed > 1000 && w.removed*4 > w.events) {
			snapshot = src.Local.Snapshot(snapshotChunk)
		} else {
			chunk, removed = src.Local.DrainJournal()
		}
	}
	var relays []reposync.PersistedRelay
	if rs != nil {
		if src.Confirmable() {
			relays, w.waiting = rs, nil
		} else {
			w.waiting = rs // saved by Run at the next instant nothing is on its way
		}
	}
	// Timestamps alone (a relay last seen up, the own relay read until
	// now) are written at most every Options.Heartbeat: an idle sidecar does not
	// commit every flush interval.
	beat := final || s.opt.Now().Sub(w.lastBeat) >= s.opt.Heartbeat
	if relays != nil && !beat && !w.relaysChanged(relays) {
		relays = nil
	}
	var repos discovery.PersistedRepos
	saveRoots, saveHeads, saveSeen := false, false, false
	if src.Repos != nil {
		repos = src.Repos()
		saveRoots = repos.Gen != 0 && repos.Gen != w.reposGen
		saveHeads = repos.HeadsGen != 0 && repos.HeadsGen != w.headsGen
		saveSeen = !repos.SelfSeen.Equal(w.selfSeen) && (beat || saveRoots || saveHeads || w.selfSeen.IsZero())
	}
	var healthJSON []byte
	if src.Health != nil {
		if b, err := json.Marshal(src.Health()); err == nil && !bytes.Equal(b, w.health) {
			healthJSON = b
		}
	}
	var rejected []byte
	var rejGen uint64
	if src.Rejected != nil {
		if rejGen = src.Rejected.Generation(); rejGen != w.rejGen && (final || s.opt.Now().Sub(w.rejAt) >= s.opt.RejectedInterval) {
			b, err := json.Marshal(src.Rejected.ExportState())
			if err != nil {
				return fmt.Errorf("statestore: rejected index: %w", err)
			}
			rejected = b
		}
	}
	var held []purgatory.Persisted
	savePurg := false
	var purgGen uint64
	if src.Purgatory != nil {
		purgGen = src.Purgatory.Generation()
		n := src.Purgatory.Len()
		if purgGen != w.purgGen || (n > 0 && w.flushes%purgatoryResave == 0) {
			held, savePurg = src.Purgatory.Export(), true
		}
	}
	if chunk == nil && snapshot == nil && !savePurg && relays == nil && !saveRoots && !saveHeads && !saveSeen && healthJSON == nil && rejected == nil {
		w.flushes++
		return nil
	}
	written := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		if snapshot != nil {
			if err := resetBucket(tx, bucketLocal); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucketLocal)
		b.FillPercent = 1 // keys only ever grow
		for _, c := range append(snapshot, chunk) {
			if c == nil {
				continue
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), c); err != nil {
				return err
			}
			written += len(c)
		}
		if rejected != nil {
			if err := tx.Bucket(bucketRejected).Put(keyRejected, rejected); err != nil {
				return err
			}
			written += len(rejected)
		}
		if healthJSON != nil {
			if err := tx.Bucket(bucketHealth).Put(keyHealth, healthJSON); err != nil {
				return err
			}
			written += len(healthJSON)
		}
		if saveRoots || saveHeads || saveSeen {
			n, err := s.putRepos(tx, repos, saveRoots, saveHeads)
			if err != nil {
				return err
			}
			written += n
		}
		if relays != nil {
			n, err := s.putRelays(tx, relays)
			if err != nil {
				return err
			}
			written += n
		}
		if savePurg {
			if err := resetBucket(tx, bucketPurgatory); err != nil {
				return err
			}
			pb := tx.Bucket(bucketPurgatory)
			for _, h := range held {
				v, err := json.Marshal(h)
				if err != nil {
					return err
				}
				if err := pb.Put([]byte(h.Event.ID), v); err != nil {
					return err
				}
				written += len(v)
			}
		}
		return nil
	})
	w.flushes++
	s.m.flushSecs.Add(s.opt.Now().Sub(start).Seconds())
	if err != nil {
		s.m.flushes.WithLabelValues("error").Inc()
		// The journal was drained (or cleared by the snapshot) before the
		// transaction: the next flush writes a full snapshot instead, so
		// the lost chunk's adds and removes reach the store. Nothing else
		// is recorded before commit; the purgatory is compared against
		// the generation last committed.
		if src.Local != nil && (chunk != nil || snapshot != nil) {
			w.chunks = maxChunks
		}
		return fmt.Errorf("statestore: flush: %w", err)
	}
	s.m.flushes.WithLabelValues("ok").Inc()
	if savePurg {
		w.purgGen = purgGen
	}
	s.m.flushBytes.Add(float64(written))
	if relays != nil {
		s.relaysWritten(relays)
	}
	if beat {
		w.lastBeat = s.opt.Now()
	}
	if rejected != nil {
		w.rejGen, w.rejAt = rejGen, s.opt.Now()
	}
	if saveRoots {
		w.reposGen = repos.Gen
	}
	if saveHeads {
		w.headsGen = repos.HeadsGen
		w.headIDs, w.headIDsNext = w.headIDsNext, nil
	}
	w.selfSeen = repos.SelfSeen
	if healthJSON != nil {
		w.health = healthJSON
	}
	if snapshot != nil {
		s.m.compactions.Inc()
		w.chunks, w.removed = len(snapshot), 0
	} else if chunk != nil {
		w.chunks++
		w.removed += removed
	}
	w.lastFlush = s.opt.Now()
	s.refreshSize()
	s.refreshUsage(w)
	if w.events > 0 {
		s.m.perEvent.Set(float64(s.Bytes()) / float64(w.events))
	}
	return nil
}

// Stats returns the store's footprint.
func (s *Store) Stats() Stats {
	w := s.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Stats{Dir: s.opt.Dir, Outcome: s.outcome, Bytes: s.Bytes(), Events: w.events, LastFlush: w.lastFlush, Flushes: w.flushes, RelaysSaved: w.relaysSaved}
	if w.events > 0 {
		st.BytesPerEvent = float64(st.Bytes) / float64(w.events)
	}
	st.InUse = w.inUse
	return st
}

// refreshUsage recomputes the bytes in use per bucket (under w.mu).
func (s *Store) refreshUsage(w *writer) {
	if s.opt.Now().Sub(w.usageAt) < s.opt.UsageInterval && w.inUse != nil {
		return
	}
	w.usageAt = s.opt.Now()
	in := map[string]int64{}
	_ = guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				bs := b.Stats()
				in[string(name)] = int64(bs.LeafInuse + bs.BranchInuse)
				return nil
			})
		})
	})
	w.inUse = in
}
