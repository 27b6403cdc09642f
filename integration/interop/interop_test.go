// Package interop checks grasp-sync's negentropy (our engine over our
// prefix-sum storage) against independent implementations: go-nostr's
// engine over its vector storage, and the
// NIP-77 client of the nostr-tools npm package, run by node (negclient.mjs).
// Run `npm ci` in this directory first; without node_modules the tests skip
// unless GRASP_SYNC_REQUIRE_INTEROP is set, then they fail.
package interop

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

const requireEnv = "GRASP_SYNC_REQUIRE_INTEROP"

// jsClient is a running negclient.mjs.
type jsClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startJS(t *testing.T) *jsClient {
	t.Helper()
	if _, err := os.Stat("node_modules/nostr-tools/package.json"); err != nil {
		if os.Getenv(requireEnv) == "" {
			t.Skipf("integration/interop/node_modules is absent (%v): run `npm ci` in integration/interop; set %s=1 to make this a failure", err, requireEnv)
		}
		t.Fatalf("%s is set but nostr-tools is not installed: run `npm ci` in integration/interop: %v", requireEnv, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is present but node is not on PATH: %v", err)
	}
	cmd := exec.Command(node, "negclient.mjs")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	c := &jsClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

type jsAnswer struct {
	Msg         string   `json:"msg"`
	Done        bool     `json:"done"`
	Have        []string `json:"have"`
	Need        []string `json:"need"`
	Fingerprint string   `json:"fingerprint"`
	Error       string   `json:"error"`
}

func (c *jsClient) call(t *testing.T, cmd string) jsAnswer {
	t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		t.Fatalf("write to node: %v", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read from node: %v", err)
	}
	var a jsAnswer
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	if a.Error != "" {
		t.Fatalf("nostr-tools: %s", a.Error)
	}
	return a
}

func itemsJSON(items []neg.Item) string {
	var b strings.Builder
	b.Grow(len(items) * 80)
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		b.WriteString(strconv.FormatInt(int64(it.CreatedAt), 10))
		b.WriteString(`,"`)
		b.WriteString(hex.EncodeToString(it.ID[:]))
		b.WriteString(`"]`)
	}
	b.WriteByte(']')
	return b.String()
}

// exchange is one reconciliation seen from the client side.
type exchange struct {
	clientMsgs, serverMsgs []string
	need, have             []string
}

// server answers client messages: our engine or go-nostr's.
type server func(msg string) (string, error)

// ourServer is grasp-sync's engine as the relay side.
func ourServer(t *testing.T, items []neg.Item, limit int) server {
	t.Helper()
	e, err := neg.NewServer(neg.NewStorage(slices.Clone(items)), limit)
	if err != nil {
		t.Fatal(err)
	}
	return e.Reconcile
}

// goNostrServer is go-nostr's engine over st as the relay side.
func goNostrServer(st negentropy.Storage, limit int) server {
	return negentropy.New(st, limit).Reconcile
}

// runJS reconciles the nostr-tools client (holding client) against srv.
func runJS(t *testing.T, js *jsClient, client []neg.Item, srv server, limit int) exchange {
	t.Helper()
	var ex exchange
	a := js.call(t, fmt.Sprintf(`{"op":"client","frameLimit":%d,"items":%s}`, limit, itemsJSON(client)))
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatal("no convergence after 1000 rounds")
		}
		// Our engine must read every message of the reference client.
		msg := a.Msg
		reader, err := neg.NewServer(neg.NewStorage(nil), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reader.Reconcile(msg); errors.Is(err, neg.ErrInvalidMessage) {
			t.Fatalf("our engine rejected a nostr-tools message: %v", err)
		}
		ex.clientMsgs = append(ex.clientMsgs, msg)
		if limit > 0 && len(msg)/2 > limit {
			t.Fatalf("nostr-tools message of %d bytes over the %d limit", len(msg)/2, limit)
		}
		reply, err := srv(msg)
		if err != nil {
			t.Fatalf("server: %v", err)
		}
		ex.serverMsgs = append(ex.serverMsgs, reply)
		a = js.call(t, fmt.Sprintf(`{"op":"reply","msg":%q}`, reply))
		if a.Done {
			break
		}
	}
	ex.need, ex.have = sortedUnique(a.Need), sortedUnique(a.Have)
	return ex
}

func sortedUnique(ids []string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// pipeConn is a neg.Conn whose relay is a Go server engine in-process; it
// records the client's messages.
type pipeConn struct {
	server negentropy.Storage
	limit  int

	mu   sync.Mutex
	srv  *negentropy.Negentropy
	ch   chan relay.NegReply
	msgs []string
}

func (p *pipeConn) reply(msg string) {
	p.msgs = append(p.msgs, msg)
	out, err := p.srv.Reconcile(msg)
	if err != nil {
		p.ch <- relay.NegReply{Err: "PROTOCOL-ERROR: " + err.Error()}
		return
	}
	p.ch <- relay.NegReply{Msg: out}
}

func (p *pipeConn) NegOpen(ctx context.Context, subID string, f nostr.Filter, msg string) (<-chan relay.NegReply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv = negentropy.New(p.server, p.limit)
	p.ch = make(chan relay.NegReply, 1)
	p.reply(msg)
	return p.ch, nil
}

func (p *pipeConn) NegMsg(ctx context.Context, subID string, msg string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reply(msg)
	return nil
}

func (p *pipeConn) NegClose(string) {}

// runGo reconciles our session runner (client, our engine) against
// go-nostr's server engine over server.
func runGo(client *neg.Storage, server negentropy.Storage, limit int) (exchange, error) {
	p := &pipeConn{server: server, limit: limit}
	opt := neg.DefaultOptions()
	opt.FrameLimit = limit
	opt.MaxInboundHex = 64 << 20
	res, err := neg.Reconcile(context.Background(), p, "interop", nostr.Filter{}, client, opt)
	if err != nil {
		return exchange{}, fmt.Errorf("neg.Reconcile: %w", err)
	}
	return exchange{clientMsgs: p.msgs, need: res.Need, have: res.Have}, nil
}

// runGoNostr reconciles go-nostr's engine with itself, both sides over
// go-nostr's vector storage: the reference for our messages.
func runGoNostr(client, server []neg.Item, limit int) (exchange, error) {
	var ex exchange
	c, srv := negentropy.New(vectorOf(client), limit), negentropy.New(vectorOf(server), limit)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for id := range c.Haves {
			ex.have = append(ex.have, id)
		}
	}()
	go func() {
		defer wg.Done()
		for id := range c.HaveNots {
			ex.need = append(ex.need, id)
		}
	}()
	msg := c.Start()
	for round := 0; msg != ""; round++ {
		if round > 1000 {
			return ex, fmt.Errorf("no convergence after 1000 rounds")
		}
		ex.clientMsgs = append(ex.clientMsgs, msg)
		reply, err := srv.Reconcile(msg)
		if err != nil {
			return ex, fmt.Errorf("go-nostr server: %w", err)
		}
		ex.serverMsgs = append(ex.serverMsgs, reply)
		if msg, err = c.Reconcile(reply); err != nil {
			return ex, fmt.Errorf("go-nostr client: %w", err)
		}
	}
	wg.Wait()
	ex.need, ex.have = sortedUnique(ex.need), sortedUnique(ex.have)
	return ex, nil
}

// makeSets builds two sets of about n items each that differ in a fraction
// diff of the items (half only on each side).
func makeSets(seed uint64, n int, diff float64) (client, server []neg.Item, need, have []string) {
	r := rand.New(rand.NewPCG(seed, 42))
	for i := 0; i < n; i++ {
		var it neg.Item
		it.CreatedAt = nostr.Timestamp(1_700_000_000 + r.Int64N(int64(n/4+1)))
		for j := 0; j < 32; j += 8 {
			v := r.Uint64()
			for k := range 8 {
				it.ID[j+k] = byte(v >> (8 * k))
			}
		}
		x := r.Float64()
		switch {
		case x < diff/2:
			client = append(client, it)
			have = append(have, hex.EncodeToString(it.ID[:]))
		case x < diff:
			server = append(server, it)
			need = append(need, hex.EncodeToString(it.ID[:]))
		default:
			client = append(client, it)
			server = append(server, it)
		}
	}
	slices.Sort(need)
	slices.Sort(have)
	return client, server, need, have
}

func vectorOf(items []neg.Item) *vector.Vector {
	v := vector.New()
	for _, it := range items {
		v.Insert(it.CreatedAt, hex.EncodeToString(it.ID[:]))
	}
	v.Seal()
	return v
}

func TestInteropReconcile(t *testing.T) {
	startJS(t) // skip or fail once, before the subtests
	for _, n := range []int{0, 1, 10_000, 100_000} {
		for _, diff := range []float64{0.001, 0.5} {
			for _, limit := range []int{60_000, 0} {
				t.Run(fmt.Sprintf("n=%d/diff=%g/limit=%d", n, diff, limit), func(t *testing.T) {
					if n >= 100_000 && testing.Short() {
						t.Skip("100,000-item sets skipped in -short mode")
					}
					// nostr-tools fingerprints in O(n) per call, so the large
					// cases take seconds each: run them side by side.
					t.Parallel()
					js := startJS(t)
					client, server, need, have := makeSets(uint64(n)+uint64(diff*1000), n, diff)
					// The Go runs go alongside nostr-tools, which is slow at 100k.
					var goEx, vecEx exchange
					var goErr, vecErr error
					var wg sync.WaitGroup
					wg.Add(2)
					go func() {
						defer wg.Done()
						goEx, goErr = runGo(neg.NewStorage(slices.Clone(client)), vectorOf(server), limit)
					}()
					go func() {
						defer wg.Done()
						vecEx, vecErr = runGoNostr(client, server, limit)
					}()
					jsEx := runJS(t, js, client, ourServer(t, server, limit), limit)
					wg.Wait()
					if goErr != nil || vecErr != nil {
						t.Fatalf("our client: %v; go-nostr: %v", goErr, vecErr)
					}

					for _, c := range []struct {
						name string
						ex   exchange
					}{{"nostr-tools client, our server", jsEx}, {"our client, go-nostr server", goEx}, {"go-nostr both sides", vecEx}} {
						if !slices.Equal(c.ex.need, need) || !slices.Equal(c.ex.have, have) {
							t.Errorf("%s: need/have %d/%d ids, want %d/%d", c.name, len(c.ex.need), len(c.ex.have), len(need), len(have))
						}
					}
					if !slices.Equal(goEx.clientMsgs, vecEx.clientMsgs) {
						t.Errorf("our client's messages differ from go-nostr's (%d vs %d messages)", len(goEx.clientMsgs), len(vecEx.clientMsgs))
					}
					if !slices.Equal(goEx.clientMsgs, jsEx.clientMsgs) {
						t.Errorf("our client's messages differ from nostr-tools' (%d vs %d messages)", len(goEx.clientMsgs), len(jsEx.clientMsgs))
					}
					if !slices.Equal(jsEx.serverMsgs, vecEx.serverMsgs) {
						t.Errorf("our server's replies differ from go-nostr's (%d vs %d messages)", len(jsEx.serverMsgs), len(vecEx.serverMsgs))
					}
					t.Logf("%d rounds", len(jsEx.clientMsgs))
				})
			}
		}
	}
}

// carrySet is a crafted set whose id sum needs a carry out of a 32-bit
// word where both operands are 0xFFFFFFFF and a carry comes in: go-nostr's
// vector accumulator drops it.
func carrySet() []neg.Item {
	var a, b neg.Item
	a.CreatedAt, b.CreatedAt = 1000, 1001
	for i := range 8 {
		a.ID[i] = 0xff
	}
	b.ID[0] = 0x01
	for i := 4; i < 8; i++ {
		b.ID[i] = 0xff
	}
	return []neg.Item{a, b}
}

// bigFingerprint is an independent NIP-77 fingerprint with math/big.
func bigFingerprint(items []neg.Item) string {
	sum := new(big.Int)
	for _, it := range items {
		be := slices.Clone(it.ID[:])
		slices.Reverse(be)
		sum.Add(sum, new(big.Int).SetBytes(be))
	}
	sum.Mod(sum, new(big.Int).Lsh(big.NewInt(1), 256))
	le := make([]byte, 32)
	sum.FillBytes(le)
	slices.Reverse(le)
	h := sha256.Sum256(append(le, negentropy.EncodeVarInt(len(items))...))
	return hex.EncodeToString(h[:negentropy.FingerprintSize])
}

func TestInteropCarryFingerprint(t *testing.T) {
	js := startJS(t)
	set := carrySet()
	want := bigFingerprint(set)
	if got := js.call(t, `{"op":"fingerprint","items":`+itemsJSON(set)+`}`).Fingerprint; got != want {
		t.Errorf("nostr-tools fingerprint = %s, math/big = %s", got, want)
	}
	if got := neg.NewStorage(slices.Clone(set)).Fingerprint(0, 2); got != want {
		t.Errorf("our fingerprint = %s, math/big = %s", got, want)
	}
	if got := vectorOf(set).Fingerprint(0, 2); got == want {
		t.Errorf("go-nostr vector fingerprint equals math/big's: the crafted set no longer shows the carry bug")
	}

	// 32 identical items, the carry pair first: the client's first message
	// carries 16 fingerprints of 2 items each. Our server agrees with all of
	// them (reply: the version byte only); a vector server disagrees on
	// bucket 0 and answers with its ids. Both end with nothing to transfer.
	items := carrySet()
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 30 {
		it := neg.Item{CreatedAt: nostr.Timestamp(2000 + i)}
		for j := range it.ID {
			it.ID[j] = byte(r.Uint32())
		}
		items = append(items, it)
	}
	ours := runJS(t, js, items, ourServer(t, items, 60_000), 60_000)
	vec := runJS(t, js, items, goNostrServer(vectorOf(items), 60_000), 60_000)
	if got := ours.serverMsgs; len(got) != 1 || got[0] != "61" {
		t.Errorf("our server's replies = %q, want [\"61\"] (all fingerprints agree)", got)
	}
	if got := vec.serverMsgs; len(got) == 0 || got[0] == "61" {
		t.Errorf("vector server's replies = %.80q, want an id list for the disagreeing bucket", got)
	}
	for _, ex := range []exchange{ours, vec} {
		if len(ex.need) != 0 || len(ex.have) != 0 {
			t.Errorf("identical sets: need %d, have %d", len(ex.need), len(ex.have))
		}
	}
}
