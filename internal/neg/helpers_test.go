package neg

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// dataset is a pair of sets with a known difference.
type dataset struct {
	client, server []Item
	need, have     []string // sorted hex ids
}

// makeDataset builds n items of which a fraction diff exists on one side
// only (half on each side). Timestamps collide often so that bounds need id
// prefixes.
func makeDataset(seed uint64, n int, diff float64) dataset {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var d dataset
	base := int64(1_700_000_000)
	for i := 0; i < n; i++ {
		var it Item
		it.CreatedAt = nostr.Timestamp(base + r.Int64N(int64(n/4+1)))
		for j := 0; j < 32; j += 8 {
			v := r.Uint64()
			for k := range 8 {
				it.ID[j+k] = byte(v >> (8 * k))
			}
		}
		x := r.Float64()
		switch {
		case x < diff/2:
			d.client = append(d.client, it)
			d.have = append(d.have, hex.EncodeToString(it.ID[:]))
		case x < diff:
			d.server = append(d.server, it)
			d.need = append(d.need, hex.EncodeToString(it.ID[:]))
		default:
			d.client = append(d.client, it)
			d.server = append(d.server, it)
		}
	}
	slices.Sort(d.need)
	slices.Sort(d.have)
	return d
}

func ourStorage(items []Item) *Storage { return NewStorage(slices.Clone(items)) }

func vectorStorage(items []Item) *vector.Vector {
	v := vector.New()
	for _, it := range items {
		v.Insert(it.CreatedAt, hex.EncodeToString(it.ID[:]))
	}
	v.Seal()
	return v
}

// lockstep runs a client and a server engine in-process and returns the
// exchanged messages, the client's need/have, and each side's time. impl
// "ours" runs our Engine (both storages must be *Storage); "go-nostr" runs
// go-nostr's engine over any storage. Both work on hex messages, as on the
// wire, so hex encoding and decoding count in both.
type lockstepResult struct {
	msgs                   []string
	need, have             []string
	clientTime, serverTime time.Duration
	clientCPU, serverCPU   time.Duration // thread CPU time (Linux)
}

const (
	implOurs    = "ours"
	implGoNostr = "go-nostr"
)

// hexSide is one side of a reconciliation on hex messages.
type hexSide interface {
	start() string
	reconcile(msg string) (string, error) // "" when a client is done
	result() (need, have []string)
}

type ourSide struct{ e *Engine }

func (s ourSide) start() string                      { return s.e.Initiate() }
func (s ourSide) reconcile(m string) (string, error) { return s.e.Reconcile(m) }
func (s ourSide) result() (need, have []string)      { return s.e.Result() }

type goNostrSide struct {
	n          *negentropy.Negentropy
	wg         sync.WaitGroup
	need, have []string
}

func newGoNostrSide(st negentropy.Storage, limit int, client bool) *goNostrSide {
	g := &goNostrSide{n: negentropy.New(st, limit)}
	if client {
		g.wg.Add(2)
		go func() {
			defer g.wg.Done()
			for id := range g.n.Haves {
				g.have = append(g.have, id)
			}
		}()
		go func() {
			defer g.wg.Done()
			for id := range g.n.HaveNots {
				g.need = append(g.need, id)
			}
		}()
	}
	return g
}

func (g *goNostrSide) start() string                      { return g.n.Start() }
func (g *goNostrSide) reconcile(m string) (string, error) { return g.n.Reconcile(m) }
func (g *goNostrSide) result() (need, have []string) {
	g.wg.Wait()
	slices.Sort(g.need)
	slices.Sort(g.have)
	return slices.Compact(g.need), slices.Compact(g.have)
}

func newSide(t testing.TB, impl string, st negentropy.Storage, limit int, client bool) hexSide {
	t.Helper()
	switch impl {
	case implOurs:
		ours, ok := st.(*Storage)
		if !ok {
			t.Fatalf("impl %q needs *Storage, got %T", impl, st)
		}
		var e *Engine
		var err error
		if client {
			e, err = NewClient(ours, limit, 0)
		} else {
			e, err = NewServer(ours, limit)
		}
		if err != nil {
			t.Fatal(err)
		}
		return ourSide{e}
	case implGoNostr:
		return newGoNostrSide(st, limit, client)
	}
	t.Fatalf("unknown impl %q", impl)
	return nil
}

func lockstep(t testing.TB, impl string, client, server negentropy.Storage, clientLimit, serverLimit int) lockstepResult {
	t.Helper()
	var res lockstepResult
	c := newSide(t, impl, client, clientLimit, true)
	s := newSide(t, impl, server, serverLimit, false)
	t0, c0 := time.Now(), threadCPU()
	msg := c.start()
	res.clientTime += time.Since(t0)
	res.clientCPU += threadCPU() - c0
	for round := 0; ; round++ {
		if round > 10_000 {
			t.Fatal("no convergence after 10,000 rounds")
		}
		res.msgs = append(res.msgs, msg)
		t0, c0 = time.Now(), threadCPU()
		reply, err := s.reconcile(msg)
		res.serverTime += time.Since(t0)
		res.serverCPU += threadCPU() - c0
		if err != nil {
			t.Fatalf("server reconcile: %v", err)
		}
		res.msgs = append(res.msgs, reply)
		t0, c0 = time.Now(), threadCPU()
		msg, err = c.reconcile(reply)
		if msg == "" && err == nil {
			res.need, res.have = c.result()
		}
		res.clientTime += time.Since(t0)
		res.clientCPU += threadCPU() - c0
		if err != nil {
			t.Fatalf("client reconcile: %v", err)
		}
		if msg == "" {
			break
		}
	}
	// Results compare as sorted lists (our have comes in NIP-77 order).
	res.need, res.have = sortedCopy(res.need), sortedCopy(res.have)
	return res
}

func sortedCopy(ids []string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

// step is what the fake relay does in answer to one client message.
type step struct {
	replies []relay.NegReply
	close   bool // close the reply channel (connection ended / session dropped)
}

// fakeConn is a Conn whose relay side runs go-nostr's negentropy engine as
// the server, in-process, over a set chosen per filter. handle, when set,
// overrides the relay's behaviour (round 0 is the NEG-OPEN).
type fakeConn struct {
	serverSet  func(nostr.Filter) negentropy.Storage
	frameLimit int
	handle     func(s *fakeSession, round int, msg string) step

	mu       sync.Mutex
	sessions map[string]*fakeSession
	opened   []string
	closed   []string
	ended    []*fakeSession
	filters  []nostr.Filter
}

type fakeSession struct {
	subID  string
	filter nostr.Filter
	server *negentropy.Negentropy
	ch     chan relay.NegReply
	round  int
	done   bool
	msgs   []string // client messages received
}

var _ Conn = (*fakeConn)(nil)

func newFakeConn(serverSet func(nostr.Filter) negentropy.Storage, frameLimit int) *fakeConn {
	return &fakeConn{serverSet: serverSet, frameLimit: frameLimit, sessions: map[string]*fakeSession{}}
}

// serve is the honest relay: it answers with the server engine.
func (f *fakeConn) serve(s *fakeSession, msg string) step {
	out, err := s.server.Reconcile(msg)
	if err != nil {
		return step{replies: []relay.NegReply{{Err: "PROTOCOL-ERROR: " + err.Error()}}}
	}
	return step{replies: []relay.NegReply{{Msg: out}}}
}

func (f *fakeConn) deliver(s *fakeSession, msg string) {
	s.msgs = append(s.msgs, msg)
	var st step
	if f.handle != nil {
		st = f.handle(s, s.round, msg)
	} else {
		st = f.serve(s, msg)
	}
	s.round++
	if s.done {
		return
	}
	for _, r := range st.replies {
		s.ch <- r
	}
	if st.close {
		s.done = true
		close(s.ch)
	}
}

func (f *fakeConn) NegOpen(ctx context.Context, subID string, filter nostr.Filter, msgHex string) (<-chan relay.NegReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.sessions[subID]; dup {
		return nil, fmt.Errorf("duplicate subscription %q", subID)
	}
	var srv *negentropy.Negentropy
	if f.serverSet != nil {
		srv = negentropy.New(f.serverSet(filter), f.frameLimit)
	}
	s := &fakeSession{subID: subID, filter: filter, server: srv, ch: make(chan relay.NegReply, 16)}
	f.sessions[subID] = s
	f.opened = append(f.opened, subID)
	f.filters = append(f.filters, filter)
	f.deliver(s, msgHex)
	return s.ch, nil
}

func (f *fakeConn) NegMsg(ctx context.Context, subID string, msgHex string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[subID]
	if !ok {
		return fmt.Errorf("unknown subscription %q", subID)
	}
	f.deliver(s, msgHex)
	return nil
}

func (f *fakeConn) NegClose(subID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, subID)
	if s, ok := f.sessions[subID]; ok {
		if !s.done {
			s.done = true
			close(s.ch)
		}
		delete(f.sessions, subID)
		f.ended = append(f.ended, s)
	}
}

func (f *fakeConn) closedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.closed)
}

func (f *fakeConn) openSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

// testOptions are DefaultOptions with timeouts shrunk for tests.
func testOptions() Options {
	o := DefaultOptions()
	o.InitialTimeout = 2 * time.Second
	o.IdleTimeout = 2 * time.Second
	return o
}
