package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// pgOwnRelay is the own relay of the purgatory tests: a real khatru relay on
// 127.0.0.1 storing in memory. The purgatory publishes into it over WebSocket.
type pgOwnRelay struct {
	URL string

	mu     sync.Mutex
	events map[string]*nostr.Event
	at     map[string]time.Time
}

func startPgOwnRelay(t testing.TB) *pgOwnRelay {
	t.Helper()
	r := &pgOwnRelay{events: map[string]*nostr.Event{}, at: map[string]time.Time{}}
	r.URL = harness.StartKhatru(t, nil, func(relay *khatru.Relay) {
		// only StoreEvent and an empty QueryEvents, as the purgatory expects
		relay.ReplaceEvent, relay.DeleteEvent, relay.CountEvents = nil, nil, nil
		relay.StoreEvent = []func(context.Context, *nostr.Event) error{func(_ context.Context, ev *nostr.Event) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if _, ok := r.events[ev.ID]; ok {
				return errors.New("duplicate: have it")
			}
			r.events[ev.ID] = ev
			r.at[ev.ID] = time.Now()
			return nil
		}}
		relay.QueryEvents = []func(context.Context, nostr.Filter) (chan *nostr.Event, error){func(context.Context, nostr.Filter) (chan *nostr.Event, error) {
			ch := make(chan *nostr.Event)
			close(ch)
			return ch, nil
		}}
	})
	return r
}

// has reports whether the relay stored id, and when.
func (r *pgOwnRelay) has(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[id]
	return at, ok
}

func (r *pgOwnRelay) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// wsPublisher implements purgatory.Publisher: one WebSocket connection per
// event, EVENT then wait for its OK.
type wsPublisher struct{ url string }

var _ purgatory.Publisher = wsPublisher{}

func (p wsPublisher) Publish(ctx context.Context, ev *nostr.Event) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, p.url, nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	msg, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		return err
	}
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		return err
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil || len(arr) < 3 {
			continue
		}
		var label, id string
		var ok bool
		var reason string
		_ = json.Unmarshal(arr[0], &label)
		if label != "OK" {
			continue
		}
		_ = json.Unmarshal(arr[1], &id)
		_ = json.Unmarshal(arr[2], &ok)
		if len(arr) > 3 {
			_ = json.Unmarshal(arr[3], &reason)
		}
		if id != ev.ID {
			continue
		}
		if ok || strings.HasPrefix(reason, "duplicate:") {
			return nil
		}
		return fmt.Errorf("rejected: %s", reason)
	}
}

type pgKey struct{ sk, pk string }

func newPgKey(t testing.TB) pgKey {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return pgKey{sk, pk}
}

func (k pgKey) npub(t testing.TB) string {
	t.Helper()
	n, err := gitx.Npub(k.pk)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rel is the repository's path below a git root: <npub>/<d>.git.
func (k pgKey) rel(t testing.TB, d string) string { return k.npub(t) + "/" + d + ".git" }

func (k pgKey) sign(t testing.TB, kind int, createdAt nostr.Timestamp, tags nostr.Tags) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{Kind: kind, CreatedAt: createdAt, Tags: tags}
	if err := ev.Sign(k.sk); err != nil {
		t.Fatal(err)
	}
	return ev
}

// pgAnnouncement announces k's repository d on the service startPurgatory
// configures (own.example, GRASP-01: in clone and relays) and on clone.
func pgAnnouncement(t testing.TB, k pgKey, d string, clone []string, maintainers ...string) *nostr.Event {
	tags := nostr.Tags{{"d", d}, {"name", d}, {"relays", "wss://own.example"}}
	tags = append(tags, append(nostr.Tag{"clone", "https://own.example/" + k.rel(t, d)}, clone...))
	if len(maintainers) > 0 {
		tags = append(tags, append(nostr.Tag{"maintainers"}, maintainers...))
	}
	return k.sign(t, purgatory.KindAnnouncement, nostr.Now(), tags)
}

// pgState builds a 30618 from full ref names to object ids.
func pgState(t testing.TB, k pgKey, d string, at nostr.Timestamp, refs map[string]string, head string) *nostr.Event {
	tags := nostr.Tags{{"d", d}}
	for ref, oid := range refs {
		tags = append(tags, nostr.Tag{ref, oid})
	}
	if head != "" {
		tags = append(tags, nostr.Tag{"HEAD", "ref: refs/heads/" + head})
	}
	return k.sign(t, purgatory.KindState, at, tags)
}

func pgPR(t testing.TB, k pgKey, kind int, owner pgKey, d, commit, clone string, extra ...nostr.Tag) *nostr.Event {
	tags := nostr.Tags{{"a", fmt.Sprintf("30617:%s:%s", owner.pk, d)}, {"p", owner.pk}, {"c", commit}, {"clone", clone}, {"subject", "change"}}
	tags = append(tags, extra...)
	return k.sign(t, kind, nostr.Now(), tags)
}

// pgGitServer starts a smart-HTTP git server over a fresh root.
func pgGitServer(t testing.TB, delay time.Duration) *gitserver.Server {
	t.Helper()
	return gitserver.NewT(t, t.TempDir(), gitserver.Options{Delay: delay})
}

// deadServer accepts TCP connections and closes them at once, recording
// when each came: a git server that is down.
type deadServer struct {
	URL string
	ln  net.Listener

	mu sync.Mutex
	at []time.Time
}

func startDeadServer(t testing.TB) *deadServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &deadServer{URL: "http://" + ln.Addr().String(), ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.mu.Lock()
			d.at = append(d.at, time.Now())
			d.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return d
}

func (d *deadServer) connections() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}

// pgEnv is a purgatory running against a git directory and the own relay.
type pgEnv struct {
	P      *purgatory.Purgatory
	Reg    *prometheus.Registry
	Cfg    purgatory.Config
	GitDir string
	Own    *pgOwnRelay
}

func startPurgatory(t testing.TB, mut func(*purgatory.Config)) *pgEnv {
	t.Helper()
	own := startPgOwnRelay(t)
	cfg := purgatory.DefaultConfig()
	cfg.GitDir = t.TempDir()
	cfg.OwnDomain = "own.example:443"
	cfg.AllowPrivateAddresses = true
	cfg.GitCommandTimeout = 20 * time.Second
	if mut != nil {
		mut(&cfg)
	}
	logger := zap.NewNop()
	reg := prometheus.NewRegistry()
	p, err := purgatory.New(cfg, purgatory.Options{Publisher: wsPublisher{own.URL}, Logger: logger, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &pgEnv{P: p, Reg: reg, Cfg: cfg, GitDir: cfg.GitDir, Own: own}
}

// localRepo creates (or opens) owner's repository for d in the git directory.
func (e *pgEnv) localRepo(t testing.TB, owner pgKey, d string) *gitserver.Repo {
	t.Helper()
	path, err := gitx.RepoPath(e.GitDir, owner.pk, d)
	if err != nil {
		t.Fatal(err)
	}
	if gitx.IsRepo(path) {
		return gitserver.OpenRepo(path)
	}
	r, err := gitserver.InitBare(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *pgEnv) repoPath(t testing.TB, owner pgKey, d string) string {
	t.Helper()
	path, err := gitx.RepoPath(e.GitDir, owner.pk, d)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(path)
}

func pgWait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustCommit(t testing.TB, r *gitserver.Repo, branch, msg string) string {
	t.Helper()
	c, err := r.Commit(branch, msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustRefs(t testing.TB, r *gitserver.Repo) map[string]string {
	t.Helper()
	refs, err := r.Refs()
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// metric sums the samples of a gathered metric family whose labels include
// all of want.
func (e *pgEnv) metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	return testkit.Metric(t, e.Reg, name, want)
}
