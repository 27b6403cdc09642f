package ingest

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
)

func randomKey() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// RejectedState is the RejectedIndex as a state store keeps it
// (persisted.Rejected).
type RejectedState = persisted.Rejected

// RejectedHot is one hot entry.
type RejectedHot = persisted.RejectedHot

// Generation changes whenever the index changes.
func (r *RejectedIndex) Generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// ExportState returns the index for a state store.
func (r *RejectedIndex) ExportState() RejectedState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := RejectedState{Key: r.key}
	buf := make([]byte, 0, len(r.cold)*56)
	for _, id := range r.order {
		ce, ok := r.cold[id]
		if !ok {
			continue
		}
		buf = append(buf, id[:]...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(ce.at))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(ce.createdAt))
		buf = append(buf, byte(len(ce.refs)))
		for _, h := range ce.refs {
			buf = binary.LittleEndian.AppendUint64(buf, h)
		}
	}
	st.Cold = buf
	for _, id := range r.hotOrder {
		if e, ok := r.hot[id]; ok {
			st.Hot = append(st.Hot, RejectedHot{Event: e.ev, At: e.at})
		}
	}
	return st
}

var errBadRejectedState = errors.New("ingest: bad persisted rejected index")

// RestoreState loads a state written by ExportState into an empty index,
// before the handler runs. Entries past their TTL are dropped.
func (r *RejectedIndex) RestoreState(st RejectedState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cold) != 0 || len(r.hot) != 0 {
		return errors.New("ingest: RestoreState on a non-empty rejected index")
	}
	r.key = st.Key
	b := st.Cold
	for len(b) > 0 {
		if len(b) < 49 {
			return errBadRejectedState
		}
		var id event.ID
		copy(id[:], b)
		ce := coldEntry{at: int64(binary.LittleEndian.Uint64(b[32:])), createdAt: int64(binary.LittleEndian.Uint64(b[40:]))}
		n := int(b[48])
		b = b[49:]
		if n > MaxRejectedRefs || len(b) < 8*n {
			return errBadRejectedState
		}
		for i := 0; i < n; i++ {
			h := binary.LittleEndian.Uint64(b[8*i:])
			if !slices.Contains(ce.refs, h) {
				ce.refs = append(ce.refs, h)
			}
		}
		b = b[8*n:]
		if _, dup := r.cold[id]; dup {
			continue
		}
		r.cold[id] = ce
		r.order = append(r.order, id)
		for _, h := range ce.refs {
			r.byRef[h] = append(r.byRef[h], id)
		}
	}
	for _, h := range st.Hot {
		id, ok := event.DecodeID(h.Event.ID)
		if !ok || r.cold[id].at == 0 {
			continue // hot entries are also cold ones
		}
		if _, dup := r.hot[id]; !dup {
			r.hotOrder = append(r.hotOrder, id)
		}
		r.hot[id] = &hotEntry{ev: h.Event, at: h.At}
	}
	r.expireLocked(r.now())
	r.gen++
	return nil
}
