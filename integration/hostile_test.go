package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// fakeRelay is a websocket server that speaks just enough NIP-01 and
// NIP-77 to answer with whatever a test wants.
type fakeRelay struct {
	srv   *httptest.Server
	conns atomic.Int64
	reqs  atomic.Int64
	negs  atomic.Int64

	// onReq answers a REQ; onNeg answers NEG-OPEN and NEG-MSG. Both run
	// on their own goroutine and must return when ctx is done.
	onReq func(ctx context.Context, w *fakeWriter, sub string, filters nostr.Filters)
	onNeg func(ctx context.Context, w *fakeWriter, sub, msg string)

	mu   sync.Mutex
	open map[*websocket.Conn]bool
}

// fakeWriter serialises writes to one connection.
type fakeWriter struct {
	mu sync.Mutex
	c  *websocket.Conn
}

func (w *fakeWriter) raw(ctx context.Context, b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.Write(ctx, websocket.MessageText, b)
}

func (w *fakeWriter) send(ctx context.Context, v ...any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.raw(ctx, b)
}

func startFakeRelay(t *testing.T, f *fakeRelay) *fakeRelay {
	t.Helper()
	f.open = map[*websocket.Conn]bool{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.mu.Lock()
		for c := range f.open {
			c.CloseNow()
		}
		f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

func (f *fakeRelay) URL() string  { return "ws://" + f.Addr() }
func (f *fakeRelay) Addr() string { return f.srv.Listener.Addr().String() }

func (f *fakeRelay) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "" { // NIP-11
		w.Header().Set("Content-Type", "application/nostr+json")
		_, _ = w.Write([]byte(`{"name":"fake"}`))
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	f.conns.Add(1)
	f.mu.Lock()
	f.open[c] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.open, c)
		f.mu.Unlock()
		c.CloseNow()
	}()
	c.SetReadLimit(4 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	fw := &fakeWriter{c: c}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil || len(arr) < 2 {
			continue
		}
		var label, sub string
		_ = json.Unmarshal(arr[0], &label)
		_ = json.Unmarshal(arr[1], &sub)
		switch label {
		case "REQ":
			f.reqs.Add(1)
			var fs nostr.Filters
			for _, raw := range arr[2:] {
				var flt nostr.Filter
				if json.Unmarshal(raw, &flt) == nil {
					fs = append(fs, flt)
				}
			}
			if f.onReq != nil {
				wg.Add(1)
				go func() { defer wg.Done(); f.onReq(ctx, fw, sub, fs) }()
			}
		case "NEG-OPEN", "NEG-MSG":
			if label == "NEG-OPEN" {
				f.negs.Add(1)
			}
			var msg string
			if len(arr) > 0 {
				_ = json.Unmarshal(arr[len(arr)-1], &msg)
			}
			if f.onNeg != nil {
				wg.Add(1)
				go func() { defer wg.Done(); f.onNeg(ctx, fw, sub, msg) }()
			}
		}
	}
}

// hostileNegMessages are NEG-MSG payloads a hostile relay answers with.
var hostileNegMessages = []string{
	"6101ffffffffffffffffff7f0000", // negative length: panics go-nostr's decoder
	"610",                          // odd length
	"61zz00",                       // not hex
	"",                             // empty
}

// heapSampler records the peak HeapInuse until stopped.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap(every time.Duration) *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > s.peak.Load() {
				s.peak.Store(ms.HeapInuse)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// floodSize is how many junk events the hostile relay sends: 100,000
// (25,000 under -race, which is ten times slower), or
// GRASP_SYNC_HOSTILE_FLOOD.
func floodSize(t *testing.T) int {
	if s := os.Getenv("GRASP_SYNC_HOSTILE_FLOOD"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("GRASP_SYNC_HOSTILE_FLOOD=%q", s)
		}
		return n
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return 25_000
			}
		}
	}
	return 100_000
}

// junkEvent is an unsigned event with random id, key and signature that
// matches no filter the sidecar sends (kind 1, no tags).
func junkEvent(rng *rand.Rand, sub string) []byte {
	var id, pk [32]byte
	var sig [64]byte
	for _, b := range [][]byte{id[:], pk[:], sig[:]} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	return fmt.Appendf(nil, `["EVENT",%q,{"id":"%s","pubkey":"%s","created_at":%d,"kind":1,"tags":[],"content":"junk","sig":"%s"}]`,
		sub, hex.EncodeToString(id[:]), hex.EncodeToString(pk[:]), 1_600_000_000+rng.IntN(100_000_000), hex.EncodeToString(sig[:]))
}

// TestHostileRelay: one remote relay sends forged signatures, mismatched
// ids, oversized events, a flood of events that match no filter, never
// sends EOSE and answers NIP-77 with garbage, while two honest relays hold
// the real data. The sidecar stays up, publishes nothing invalid, syncs
// everything from the honest relays, and its memory stays bounded.
func TestHostileRelay(t *testing.T) {
	own := ownRelay(t)
	honest1 := harness.Start(t, harness.RelayOptions{Name: "honest1", Negentropy: true})
	honest2 := harness.Start(t, harness.RelayOptions{Name: "honest2"})
	alice, mallory := signed.NewKey(), signed.NewKey()
	const d = "hostile"
	repoAddr := alice.RepoAddress(d)

	var honest []*nostr.Event
	for i := 0; i < 20; i++ {
		issue := alice.Issue(repoAddr, fmt.Sprintf("issue %d", i))
		reply := alice.Comment(issue, nil)
		if i%2 == 0 {
			honest1.Inject(issue, reply)
		} else {
			honest2.Inject(issue, reply)
		}
		honest = append(honest, issue, reply)
	}
	// Events that verify but break the bounds, addressed to the repository
	// so that they match what the sidecar asks for.
	oversized := mallory.Issue(repoAddr, "big", signed.WithContentSize(300_000))
	manyTags := mallory.Issue(repoAddr, "tags", signed.WithTags(func() nostr.Tags {
		tags := make(nostr.Tags, 2100)
		for i := range tags {
			tags[i] = nostr.Tag{"t", strconv.Itoa(i)}
		}
		return tags
	}()...))

	// Forgeries of events nobody else has: their ids are never seen from an
	// honest relay first, so they always reach validation (the forged
	// copies of honest events above may lose that race and be dropped as
	// already seen instead).
	lone1, lone2 := mallory.Issue(repoAddr, "only here 1"), mallory.Issue(repoAddr, "only here 2")
	loneBadID := *lone1
	loneBadID.Content = "forged: " + lone1.Content
	loneBadSig := *lone2
	loneBadSig.Sig = strings.Repeat("0", 128)

	flood := floodSize(t)
	var flooded atomic.Bool
	hostile := startFakeRelay(t, &fakeRelay{
		onReq: func(ctx context.Context, w *fakeWriter, sub string, fs nostr.Filters) {
			// Forged copies of the honest events the REQ asks for: same
			// id with other content (id mismatch), and the real content
			// with a forged signature.
			for _, ev := range honest {
				if !fs.Match(ev) {
					continue
				}
				badID := *ev
				badID.Content = "forged: " + ev.Content
				badSig := *ev
				badSig.Sig = strings.Repeat("0", 128)
				for _, f := range []*nostr.Event{&badID, &badSig} {
					if w.send(ctx, "EVENT", sub, f) != nil {
						return
					}
				}
			}
			for _, ev := range []*nostr.Event{oversized, manyTags, &loneBadID, &loneBadSig} {
				if fs.Match(ev) && w.send(ctx, "EVENT", sub, ev) != nil {
					return
				}
			}
			// The flood goes to a live subscription ("l…"), which the
			// sidecar keeps open: a historic REQ is closed after its EOSE
			// timeout or its first page of only foreign events, and what
			// arrives for a closed subscription never reaches the handler.
			if strings.HasPrefix(sub, "l") && flooded.CompareAndSwap(false, true) {
				rng := rand.New(rand.NewPCG(1, 2))
				for i := 0; i < flood; i++ {
					if w.raw(ctx, junkEvent(rng, sub)) != nil {
						return
					}
				}
			}
			// And never an EOSE.
		},
		onNeg: func(ctx context.Context, w *fakeWriter, sub, _ string) {
			_ = w.send(ctx, "NEG-MSG", sub, hostileNegMessages[rand.IntN(len(hostileNegMessages))])
		},
	})

	repo := alice.Announcement(d, signed.WithRelays(own.URL(), honest1.URL(), honest2.URL(), hostile.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+alice.Npub()+"/"+d+".git"))
	honest1.Inject(repo)
	honest2.Inject(repo)
	mustPublish(t, own, repo)

	heap := sampleHeap(20 * time.Millisecond)
	start := time.Now()
	cfg := fastConfig(own)
	cfg.Sync.EOSETimeout = 2 * time.Second
	sc := startSidecar(t, cfg)
	waitHas(t, own, honest...)
	synced := time.Since(start)
	testkit.WaitFor(t, syncTimeout, "the flood was not dropped as no_match", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_events_invalid_total", map[string]string{"reason": "no_match"}) >= float64(flood)
	})
	flushed := time.Since(start)
	for _, reason := range []string{"bad_id", "bad_signature", "too_large", "too_many_tags"} {
		reason := reason
		testkit.WaitFor(t, syncTimeout, fmt.Sprintf("no event dropped as %s", reason), func() bool {
			return testkit.Metric(t, sc.Registry, "ngit_sync_events_invalid_total", map[string]string{"reason": reason}) > 0
		})
	}
	// The subscriptions that never see EOSE fail their historic batch.
	testkit.WaitFor(t, syncTimeout, "no historic batch against the hostile relay failed", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_historic_batches_total", map[string]string{"result": "failed"}) > 0
	})
	peak := heap.Stop()
	// The honest relays are unaffected.
	waitState(t, sc, honest1.URL(), "connected")
	waitState(t, sc, honest2.URL(), "connected")

	if !sc.Ready() {
		t.Fatal("sidecar not ready after the hostile relay's attack")
	}
	// Nothing invalid reached the own relay: exactly the announcement and
	// the honest events, each with its real content.
	if n := own.Len(); n != len(honest)+1 {
		t.Errorf("own relay holds %d events, want %d", n, len(honest)+1)
	}
	for _, ev := range honest {
		if got := own.Store().Get(ev.ID); got == nil || got.Content != ev.Content || got.Sig != ev.Sig {
			t.Errorf("own relay's copy of %s is not the real event: %+v", ev.ID, got)
		}
	}
	for _, ev := range []*nostr.Event{oversized, manyTags} {
		if own.Has(ev.ID) {
			t.Errorf("event over a bound published: %s", ev.ID)
		}
	}
	if n := testkit.Metric(t, sc.Registry, "ngit_sync_events_rejected_total", nil); n != 0 {
		t.Errorf("the own relay rejected %v events the sidecar sent", n)
	}
	if n := hostile.conns.Load(); n > 3 {
		t.Errorf("hostile relay saw %d connections", n)
	}
	if hostile.negs.Load() == 0 {
		t.Error("the hostile relay was never asked for NIP-77: garbage NEG-MSGs untested")
	}
	t.Logf("flood %d junk events: honest data synced after %s, flood dropped after %s; peak HeapInuse %.1f MiB",
		flood, synced.Round(time.Millisecond), flushed.Round(time.Millisecond), float64(peak)/(1<<20))
	// A generous bound: the flood is ~35 MB on the wire and must not be
	// held; the process (relays, test and sidecar) stays far below this.
	if peak > 1<<30 {
		t.Errorf("peak HeapInuse %d MiB", peak>>20)
	}
}

// TestHostileNegMessagesOverTheWire: known-bad NEG-MSGs sent by a relay
// over a real websocket fail the negentropy session cleanly; the process
// survives and the connection stays usable. A NEG-MSG far above the frame
// limit ends only that connection.
func TestHostileNegMessagesOverTheWire(t *testing.T) {
	var answer atomic.Value
	fake := startFakeRelay(t, &fakeRelay{
		onReq: func(ctx context.Context, w *fakeWriter, sub string, _ nostr.Filters) {
			_ = w.send(ctx, "EOSE", sub)
		},
		onNeg: func(ctx context.Context, w *fakeWriter, sub, _ string) {
			_ = w.send(ctx, "NEG-MSG", sub, answer.Load().(string))
		},
	})
	opts := neg.DefaultOptions()
	// The answers come at once; the timeouts only bound a broken test. A
	// loaded machine under -race took over 5 s to build and send the
	// 6 MB frame below.
	opts.InitialTimeout, opts.IdleTimeout = 30*time.Second, 30*time.Second
	opts.MaxInboundHex = 1 << 18
	opts.SessionRetries = 0
	ropts := relay.DefaultOptions()
	ropts.MaxMessageBytes = 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cases := append([]string{}, hostileNegMessages...)
	cases = append(cases, strings.Repeat("61", 300_000)) // under the frame limit, over MaxInboundHex
	for i, msg := range cases {
		answer.Store(msg)
		conn, err := relay.Dial(ctx, fake.URL(), ropts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = neg.Reconcile(ctx, conn, "n"+strconv.Itoa(i), nostr.Filter{Kinds: []int{1}}, neg.NewStorage(nil), opts)
		if !errors.Is(err, neg.ErrInvalidMessage) {
			t.Errorf("NEG-MSG %.40q: err = %v, want ErrInvalidMessage", msg, err)
		}
		// The connection survives the bad session.
		sub, err := conn.Subscribe(ctx, "after", nostr.Filters{{Kinds: []int{1}}})
		if err != nil {
			t.Fatalf("connection unusable after NEG-MSG %.40q: %v", msg, err)
		}
		select {
		case m := <-sub.Messages():
			if m.Type != relay.MsgEOSE {
				t.Errorf("after NEG-MSG %.40q: got %+v, want EOSE", msg, m)
			}
		case <-ctx.Done():
			t.Fatal("no EOSE")
		}
		conn.Close()
	}

	// Far above the frame limit: the websocket read limit ends the
	// connection, the session fails, nothing panics.
	answer.Store(strings.Repeat("ab", 3<<20))
	conn, err := relay.Dial(ctx, fake.URL(), ropts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = neg.Reconcile(ctx, conn, "huge", nostr.Filter{Kinds: []int{1}}, neg.NewStorage(nil), opts)
	if !errors.Is(err, neg.ErrSessionClosed) {
		t.Errorf("oversized NEG-MSG: err = %v, want ErrSessionClosed", err)
	}
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("connection not ended by an oversized frame")
	}
}

// TestSlowLorisRelay: a relay that starts a frame and trickles it one
// byte at a time cannot hold the connection: the pong deadline ends it.
func TestSlowLorisRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var trickled atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(h[:]))
		// A text frame announcing 1000 bytes, sent one byte per 20 ms.
		if _, err := c.Write([]byte{0x81, 126, 0x03, 0xe8}); err != nil {
			return
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
				trickled.Add(1)
			}
		}
	}()
	opts := relay.DefaultOptions()
	opts.PingInterval, opts.PongTimeout = 100*time.Millisecond, 500*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := relay.Dial(ctx, "ws://"+ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatalf("connection still open after %d trickled bytes", trickled.Load())
	}
	if conn.Err() == nil || trickled.Load() >= 1000 {
		t.Fatalf("ended with %v after %d bytes", conn.Err(), trickled.Load())
	}
	t.Logf("slow-loris relay dropped after %d bytes: %v", trickled.Load(), conn.Err())
}

// TestSecretKeyNeverExposed: a running sidecar that authenticates to its
// own relay with the NIP-42 key never shows the key in /status, /metrics
// or its logs (debug level).
func TestSecretKeyNeverExposed(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), AuthWrites: true})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	sk := nostr.GeneratePrivateKey()
	key, err := config.ParseSecretKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	alice := signed.NewKey()
	repo := repoFor(alice, "secret", own, remote)
	issue := alice.Issue(alice.RepoAddress("secret"), "needs auth to publish")
	remote.Inject(repo, issue)
	// The own relay asks for AUTH before writes; the announcement goes in
	// through the back door, the issue only through the sidecar's AUTH.
	own.Inject(repo)

	cfg := fastConfig(own)
	cfg.Auth.Key = key
	cfg.Log.Level = "debug"
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := zap.New(zapcore.NewTee(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(writerFunc(func(p []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logs.Write(p)
		})), zapcore.DebugLevel)))
	log.Debug("configuration", zap.Any("config", cfg))
	reg := prometheus.NewRegistry()
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: log, Registry: reg, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("sidecar did not stop")
		}
	}()
	srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Provider: sc, Gatherer: reg, Log: log})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	waitHas(t, own, issue) // published through AUTH with the key
	if n := own.Stats().Received["AUTH"]; n == 0 {
		t.Fatal("the sidecar never authenticated: the key was not exercised")
	}

	get := func(path string) string {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	statusJSON, metricsText := get("/status"), get("/metrics")
	if !strings.Contains(statusJSON, own.URL()) || !strings.Contains(metricsText, "ngit_sync_") {
		t.Fatalf("unexpected /status or /metrics:\n%s\n%.500s", statusJSON, metricsText)
	}
	mfs, _ := reg.Gather()
	var gathered bytes.Buffer
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(&gathered, mf)
	}
	logMu.Lock()
	logText := logs.String()
	logMu.Unlock()
	if !strings.Contains(logText, "[redacted]") {
		t.Errorf("the configuration log lacks the redacted key")
	}
	pub, _ := key.PublicKey()
	nsec := nsecOf(t, sk)
	if k, err := config.ParseSecretKey(nsec); err != nil || k.Hex() != sk {
		t.Fatalf("nsec encoding is wrong: %v", err)
	}
	for name, text := range map[string]string{"/status": statusJSON, "/metrics": metricsText + gathered.String(), "logs": logText} {
		for _, secret := range []string{sk, strings.ToUpper(sk), sk[:16], sk[48:], nsec} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains the secret key (%.8s…)", name, secret)
			}
		}
	}
	if pub == "" {
		t.Error("no public key for the secret")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// nsecOf encodes a hex secret key as nsec1… (BIP-173 bech32).
func nsecOf(t *testing.T, sk string) string {
	t.Helper()
	raw, err := hex.DecodeString(sk)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte // 8-bit groups to 5-bit groups
	acc, bits := 0, 0
	for _, b := range raw {
		acc = acc<<8 | int(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			data = append(data, byte(acc>>bits&31))
		}
	}
	if bits > 0 {
		data = append(data, byte(acc<<(5-bits)&31))
	}
	polymod := func(v []byte) uint32 {
		gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
		chk := uint32(1)
		for _, x := range v {
			top := chk >> 25
			chk = (chk&0x1ffffff)<<5 ^ uint32(x)
			for i := 0; i < 5; i++ {
				if top>>i&1 == 1 {
					chk ^= gen[i]
				}
			}
		}
		return chk
	}
	const hrp, charset = "nsec", "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	var exp []byte
	for i := 0; i < len(hrp); i++ {
		exp = append(exp, hrp[i]>>5)
	}
	exp = append(exp, 0)
	for i := 0; i < len(hrp); i++ {
		exp = append(exp, hrp[i]&31)
	}
	mod := polymod(append(append(exp, data...), 0, 0, 0, 0, 0, 0)) ^ 1
	out := []byte(hrp + "1")
	for _, x := range data {
		out = append(out, charset[x])
	}
	for i := 0; i < 6; i++ {
		out = append(out, charset[mod>>(5*(5-i))&31])
	}
	return string(out)
}

// TestImageRunsAsNonRoot: the final stage of the Dockerfile switches to an
// unprivileged numeric user before its entrypoint.
func TestImageRunsAsNonRoot(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var user string
	entry := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			user, entry = "", false // a new stage starts as root
		case "USER":
			if entry {
				t.Errorf("USER after ENTRYPOINT: %q", line)
			}
			user = f[1]
		case "ENTRYPOINT":
			entry = true
		}
	}
	uid := strings.Split(user, ":")[0]
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Fatalf("final stage runs as %q, want a non-zero numeric uid", user)
	}
	if !entry {
		t.Fatal("final stage has no ENTRYPOINT")
	}
}
