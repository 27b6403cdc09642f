package statestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/discovery"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
)

// The relays bucket holds per remote relay two values: "t/<url>" (times
// and NIP-77 support, small, rewritten on every save) and "c/<url>" (the
// confirmed repositories and roots, rewritten only when they changed).
// Both are written in one transaction, and only when Sources.Confirmable
// says everything received so far is published or held: a confirmed item
// is then never one whose events the own relay might lack.

type relayTimes struct {
	reposync.PersistedRelay
	Repos any `json:"repos,omitempty"` // kept in c/<url>
	Roots any `json:"roots,omitempty"`
}

type relayConfirmed struct {
	Repos []string `json:"repos"`
	Roots []string `json:"roots"`
}

// LoadRelays returns the persisted relay states.
func (s *Store) LoadRelays() ([]reposync.PersistedRelay, error) {
	byURL := map[string]*reposync.PersistedRelay{}
	confirmed := map[string]relayConfirmed{}
	err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRelays).ForEach(func(k, v []byte) error {
				key := string(k)
				switch {
				case strings.HasPrefix(key, "t/"):
					var t reposync.PersistedRelay
					if err := json.Unmarshal(v, &t); err != nil {
						s.log.Warn("skipping an unreadable persisted relay state", zap.String("key", key), zap.Error(err))
						return nil
					}
					byURL[key[2:]] = &t
				case strings.HasPrefix(key, "c/"):
					var c relayConfirmed
					if err := json.Unmarshal(v, &c); err != nil {
						s.log.Warn("skipping an unreadable persisted relay state", zap.String("key", key), zap.Error(err))
						return nil
					}
					confirmed[key[2:]] = c
				}
				return nil
			})
		})
	})
	if errors.Is(err, errDamaged) {
		return nil, s.replaceDamaged(err)
	}
	var out []reposync.PersistedRelay
	for url, t := range byURL {
		t.URL = url
		if c, ok := confirmed[url]; ok {
			t.Repos, t.Roots = c.Repos, c.Roots
		}
		out = append(out, *t)
	}
	return out, err
}

// putRelays writes the relay states in tx.
func (s *Store) putRelays(tx *bolt.Tx, relays []reposync.PersistedRelay) (int, error) {
	w := s.w()
	b := tx.Bucket(bucketRelays)
	written := 0
	live := map[string]bool{}
	for _, r := range relays {
		live[r.URL] = true
		t, err := json.Marshal(relayTimes{PersistedRelay: r})
		if err != nil {
			return written, err
		}
		if err := b.Put([]byte("t/"+r.URL), t); err != nil {
			return written, err
		}
		written += len(t)
		if w.relayGen[r.URL] == r.ConfirmedGen && r.ConfirmedGen != 0 {
			continue
		}
		c, err := json.Marshal(relayConfirmed{Repos: r.Repos, Roots: r.Roots})
		if err != nil {
			return written, err
		}
		if err := b.Put([]byte("c/"+r.URL), c); err != nil {
			return written, err
		}
		written += len(c)
	}
	// Relays no longer tracked are forgotten.
	var stale [][]byte
	b.ForEach(func(k, _ []byte) error {
		if len(k) > 2 && !live[string(k[2:])] {
			stale = append(stale, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range stale {
		if err := b.Delete(k); err != nil {
			return written, err
		}
	}
	return written, nil
}

// relaysWritten records the generations written once the transaction
// committed.
func (s *Store) relaysWritten(relays []reposync.PersistedRelay) {
	w := s.w()
	w.relayGen = make(map[string]uint64, len(relays))
	w.relayConn = make(map[string]time.Time, len(relays))
	w.relayDisc = make(map[string]time.Time, len(relays))
	for _, r := range relays {
		w.relayGen[r.URL] = r.ConfirmedGen
		w.relayConn[r.URL], w.relayDisc[r.URL] = r.LastConnected, r.DisconnectedAt
	}
	w.relaysSaved = s.opt.Now()
	s.m.relaysSaved.Set(float64(w.relaysSaved.Unix()))
}

// relayLooks is how many times per flush interval Run looks whether relay
// states a flush held back can be saved.
const relayLooks = 20

// relaysWaiting tells whether a flush held relay states back.
func (s *Store) relaysWaiting() bool {
	w := s.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting != nil
}

// saveWaitingRelays writes the relay states a flush held back; call it
// only once Confirmable reported true after that flush.
func (s *Store) saveWaitingRelays() error {
	w := s.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	relays := w.waiting
	if relays == nil {
		return nil
	}
	w.waiting = nil
	var written int
	err := s.db.Update(func(tx *bolt.Tx) error {
		n, err := s.putRelays(tx, relays)
		written = n
		return err
	})
	if err != nil {
		s.m.flushes.WithLabelValues("error").Inc()
		return fmt.Errorf("statestore: relays: %w", err)
	}
	s.m.flushes.WithLabelValues("ok").Inc()
	s.m.flushBytes.Add(float64(written))
	s.relaysWritten(relays)
	return nil
}

var (
	keyRoots    = []byte("roots")
	keySelfSeen = []byte("self_seen")
)

// putRepos writes the repository index's roots and the current
// announcements and states (each when changed) and how far the own relay's
// history was read.
func (s *Store) putRepos(tx *bolt.Tx, p discovery.PersistedRepos, roots, heads bool) (int, error) {
	b := tx.Bucket(bucketRepos)
	written := 0
	if heads {
		n, err := s.putHeads(tx, p.Heads)
		if err != nil {
			return 0, err
		}
		written += n
	}
	if roots {
		v, err := json.Marshal(p.Roots)
		if err != nil {
			return 0, err
		}
		if err := b.Put(keyRoots, v); err != nil {
			return 0, err
		}
		written += len(v)
	}
	v, err := p.SelfSeen.MarshalBinary()
	if err != nil {
		return written, err
	}
	return written + len(v), b.Put(keySelfSeen, v)
}

// LoadRepos returns the persisted repository index.
func (s *Store) LoadRepos() (discovery.PersistedRepos, error) {
	var p discovery.PersistedRepos
	err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketRepos)
			if v := b.Get(keyRoots); v != nil {
				if err := json.Unmarshal(v, &p.Roots); err != nil {
					s.log.Warn("persisted repository index unreadable; the own relay's history is read in full", zap.Error(err))
					p.Roots = nil
					return nil
				}
			}
			p.Heads = s.loadHeads(tx)
			if v := b.Get(keySelfSeen); v != nil {
				if err := p.SelfSeen.UnmarshalBinary(v); err != nil {
					p.SelfSeen = time.Time{}
				}
			}
			return nil
		})
	})
	if errors.Is(err, errDamaged) {
		return discovery.PersistedRepos{}, s.replaceDamaged(err)
	}
	return p, err
}

var keyHealth = []byte("all")

// LoadHealth returns the persisted health of the remote relays.
func (s *Store) LoadHealth() ([]health.Persisted, error) {
	var out []health.Persisted
	err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bucketHealth).Get(keyHealth); v != nil {
				if err := json.Unmarshal(v, &out); err != nil {
					s.log.Warn("persisted relay health unreadable; relays start healthy", zap.Error(err))
					out = nil
				}
			}
			return nil
		})
	})
	if errors.Is(err, errDamaged) {
		return nil, s.replaceDamaged(err)
	}
	return out, err
}

var keyRejected = []byte("state")

// LoadRejected returns the persisted RejectedIndex (ok false when none).
func (s *Store) LoadRejected() (st ingest.RejectedState, ok bool, err error) {
	err = guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			v := tx.Bucket(bucketRejected).Get(keyRejected)
			if v == nil {
				return nil
			}
			if err := json.Unmarshal(v, &st); err != nil {
				s.log.Warn("persisted rejected index unreadable; rejected events may be fetched again once", zap.Error(err))
				return nil
			}
			ok = true
			return nil
		})
	})
	if errors.Is(err, errDamaged) {
		return st, false, s.replaceDamaged(err)
	}
	return st, ok, err
}

// putHeads writes the announcements and states that are new since the
// last write (one key per event id) and deletes those gone, so a change
// rewrites one event, not all. The ids written are recorded in the writer
// by headsWritten once the transaction committed.
func (s *Store) putHeads(tx *bolt.Tx, heads []discovery.Head) (int, error) {
	b := tx.Bucket(bucketHeads)
	had := s.w().headIDs
	if had == nil {
		had = map[string]bool{}
		if err := b.ForEach(func(k, _ []byte) error { had[string(k)] = true; return nil }); err != nil {
			return 0, err
		}
	}
	next := make(map[string]bool, len(heads))
	written := 0
	for _, h := range heads {
		next[h.ID] = true
		if had[h.ID] {
			continue
		}
		if err := b.Put([]byte(h.ID), h.JSON); err != nil {
			return 0, err
		}
		written += len(h.JSON)
	}
	for id := range had {
		if !next[id] {
			if err := b.Delete([]byte(id)); err != nil {
				return 0, err
			}
		}
	}
	s.w().headIDsNext = next
	return written, nil
}

// loadHeads reads the persisted announcements and states as their JSON
// (copied out of the store's pages); an unreadable one is skipped with a
// WARN (a restart fetches it again: the local index holds its id).
func (s *Store) loadHeads(tx *bolt.Tx) []discovery.Head {
	var out []discovery.Head
	ids := map[string]bool{}
	_ = tx.Bucket(bucketHeads).ForEach(func(k, v []byte) error {
		ids[string(k)] = true
		var ev struct { // the id alone: the engine decodes the rest once
			ID string `json:"id"`
		}
		if err := json.Unmarshal(v, &ev); err != nil || ev.ID != string(k) {
			s.log.Warn("skipping an unreadable persisted announcement or state", zap.ByteString("id", k), zap.Error(err))
			return nil
		}
		out = append(out, discovery.Head{ID: ev.ID, JSON: bytes.Clone(v)})
		return nil
	})
	s.w().headIDs = ids
	return out
}
