package sidecar

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// openState opens the state store under state.dir and loads the local
// index from it; without a directory it says the sidecar runs memory-only.
func (s *Sidecar) openState(local *localindex.Index) error {
	if s.cfg.State.Dir == "" {
		s.log.Info("no state directory (state.dir): running memory-only; a restart reads the own relay's events back and events held in purgatory are lost")
		return nil
	}
	own, err := relay.NormalizeURL(s.cfg.OwnRelay)
	if err != nil {
		own = s.cfg.OwnRelay
	}
	st, err := statestore.Open(statestore.Options{
		Config: s.cfg.State, OwnRelay: own, Log: s.log.Named("state"),
		Registerer: s.d.Registry, Clock: s.d.Clock,
	})
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	s.store = st
	if local == nil {
		return nil
	}
	loaded, err := st.LoadLocal(local)
	if err != nil {
		return fmt.Errorf("state store: loading the local index: %w", err)
	}
	s.localRestored = loaded && st.Outcome() == statestore.Resumed
	s.log.Info("state store opened", zap.String("path", st.Path()), zap.String("outcome", string(st.Outcome())),
		zap.Int("local_index_events", local.Len()), zap.Bool("local_index_restored", s.localRestored))
	return nil
}

// restorePurgatory takes the persisted held events back into purgatory.
func (s *Sidecar) restorePurgatory() {
	if s.store == nil {
		return
	}
	items, err := s.store.LoadPurgatory()
	if err != nil {
		s.log.Warn("state store: cannot read the purgatory's held events", zap.Error(err))
		return
	}
	if s.store.Outcome() == statestore.Corrupt {
		s.localRestored = false // the store was replaced while reading
	}
	if len(items) == 0 {
		return
	}
	n, skipped := s.purg.Restore(items)
	s.log.Info("purgatory: held events restored from the state store", zap.Int("events", n), zap.Int("skipped", skipped))
}

// stateStatus is the /status block of the state store.
func (s *Sidecar) stateStatus() status.State {
	if s.store == nil {
		return status.State{Outcome: string(statestore.MemoryOnly)}
	}
	st := s.store.Stats()
	return status.State{Outcome: string(st.Outcome), Dir: st.Dir, Bytes: st.Bytes, Events: st.Events,
		BytesPerEvent: st.BytesPerEvent, LastFlush: st.LastFlush, RelaysSaved: st.RelaysSaved, InUse: st.InUse}
}

// LocalIndex is the index of what the own relay holds (nil without
// negentropy); tests read it.
func (s *Sidecar) LocalIndex() *localindex.Index { return s.local }

// stateSources are what the store saves. The local index, the purgatory
// and the rejected index are set only when they exist: a nil pointer in an
// interface field is not a nil field.
func (s *Sidecar) stateSources() statestore.Sources {
	src := statestore.Sources{
		Relays: s.engine.RelayStates, Repos: s.engine.RepoState, Health: s.health.Export,
		Confirmable: func() bool {
			ps := s.pub.Stats()
			return s.ingest.Pending() == 0 && ps.Queued == 0 && ps.InFlight == 0
		},
	}
	if s.local != nil {
		src.Local = s.local
	}
	if s.purg != nil {
		src.Purgatory = s.purg
	}
	if r := s.ingest.Rejected(); r != nil {
		src.Rejected = r
	}
	return src
}

// restoreRelays hands the engine the remote relays' persisted states.
func (s *Sidecar) restoreRelays() {
	if s.store == nil {
		return
	}
	rs, err := s.store.LoadRelays()
	if err != nil {
		s.log.Warn("state store: cannot read the relays' states; they sync afresh", zap.Error(err))
		return
	}
	if len(rs) > 0 {
		s.engine.RestoreRelays(rs)
		s.log.Info("relay states restored from the state store", zap.Int("relays", len(rs)))
	}
	if hs, err := s.store.LoadHealth(); err != nil {
		s.log.Warn("state store: cannot read the relays' health; they start healthy", zap.Error(err))
	} else if len(hs) > 0 {
		s.health.Restore(hs)
		s.log.Info("relay health restored from the state store", zap.Int("relays", len(hs)))
	}
	if st, ok, err := s.store.LoadRejected(); err != nil {
		s.log.Warn("state store: cannot read the rejected index", zap.Error(err))
	} else if ok {
		if err := s.ingest.Rejected().RestoreState(st); err != nil {
			s.log.Warn("state store: rejected index not restored", zap.Error(err))
		} else {
			hot, cold := s.ingest.Rejected().Len()
			s.log.Info("rejected index restored from the state store", zap.Int("hot", hot), zap.Int("cold", cold))
		}
	}
	repos, err := s.store.LoadRepos()
	if err != nil {
		s.log.Warn("state store: cannot read the repository index; the own relay's history is read in full", zap.Error(err))
		return
	}
	if len(repos.Roots) > 0 && !repos.SelfSeen.IsZero() {
		s.engine.RestoreRepos(repos)
		n := 0
		for _, r := range repos.Roots {
			n += len(r)
		}
		s.log.Info("repository index restored from the state store", zap.Int("repositories", len(repos.Roots)),
			zap.Int("roots", n), zap.Time("own_relay_read_until", repos.SelfSeen))
	}
}
