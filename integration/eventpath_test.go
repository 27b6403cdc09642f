package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

const modulePath = "github.com/grasp-sync/grasp-sync/"

// eventPath is the path of an event from a remote relay to the own relay,
// stage by stage (docs/ARCHITECTURE.md, "An event's path"). relay is the
// transport at both ends.
var eventPath = []string{"relay", "reposync | historic", "ingest", "publish", "relay"}

// TestLayoutPipelineImports: the event path's stages import (directly or
// through another package) nothing upstream of them, so none can call back
// up the path except through a value it was built with (the callback
// handed to publish.Publisher.Submit, the event.Releases queue).
func TestLayoutPipelineImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-json", "../internal/...").Output()
	if err != nil {
		t.Fatalf("go list -json ../internal/...: %v", err)
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
	}
	pkgs := map[string]pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, modulePath+"internal/")] = p
	}
	internal := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			if rest, ok := strings.CutPrefix(p, modulePath+"internal/"); ok {
				out = append(out, rest)
			}
		}
		return out
	}
	for _, c := range []struct {
		pkg string
		not []string
	}{
		{"relay", []string{"reposync", "historic", "discovery", "ingest", "publish", "purgatory"}},
		{"event", []string{"reposync", "historic", "discovery", "ingest", "publish", "purgatory"}},
		{"publish", []string{"ingest", "historic", "reposync", "discovery", "purgatory"}},
		{"ingest", []string{"historic", "reposync", "discovery", "purgatory"}},
		{"historic", []string{"reposync", "discovery"}},
		{"purgatory", []string{"ingest", "reposync", "historic", "discovery"}},
	} {
		p, ok := pkgs[c.pkg]
		if !ok {
			t.Errorf("internal/%s not found by go list", c.pkg)
			continue
		}
		deps := internal(p.Deps)
		for _, n := range c.not {
			if _, ok := pkgs[n]; !ok {
				t.Errorf("internal/%s not found by go list", n)
			}
			if slices.Contains(deps, n) {
				t.Errorf("internal/%s depends on internal/%s: it could call up the event path", c.pkg, n)
			}
		}
		t.Logf("%-9s imports %v; depends on none of %v", c.pkg, internal(p.Imports), c.not)
	}
	t.Logf("event path: %s", strings.Join(eventPath, " → "))
}

// handoff is one stack captured at a hand-off point of the event path.
type handoff struct {
	goroutine uint64
	funcs     []string // callee first
}

// capture records the calling goroutine's stack, without capture itself.
func capture() handoff {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var h handoff
	for {
		f, more := frames.Next()
		h.funcs = append(h.funcs, f.Function)
		if !more {
			break
		}
	}
	h.goroutine = goroutineID()
	return h
}

// goroutineID parses the calling goroutine's id from its stack's header
// ("goroutine 42 [running]:"); tests only, to tell goroutines apart.
func goroutineID() uint64 {
	var buf [64]byte
	s := string(buf[:runtime.Stack(buf[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	id, _ := strconv.ParseUint(s[:max(strings.IndexByte(s, ' '), 0)], 10, 64)
	return id
}

// pkgOf is the import path of a function name from runtime.Frame.
func pkgOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// short is fn without the module path.
func short(fn string) string { return strings.TrimPrefix(fn, modulePath) }

// modulePackages are the packages of this module on h's stack, short.
func (h handoff) modulePackages() []string {
	var out []string
	for _, fn := range h.funcs {
		if p := pkgOf(fn); strings.HasPrefix(p, modulePath) && !slices.Contains(out, short(p)) {
			out = append(out, short(p))
		}
	}
	return out
}

// has tells whether a frame of h's stack is fn (short) or a closure in it.
func (h handoff) has(fn string) bool {
	for _, f := range h.funcs {
		if s := short(f); s == fn || strings.HasPrefix(s, fn+".func") {
			return true
		}
	}
	return false
}

func (h handoff) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "goroutine %d:", h.goroutine)
	for _, fn := range h.funcs {
		if strings.HasPrefix(fn, modulePath) {
			fmt.Fprintf(&b, "\n\t\t%s", short(fn))
		}
	}
	return b.String()
}

// pathTrace holds the stacks captured for the traced events, by id.
type pathTrace struct {
	mu     sync.Mutex
	traced map[string]bool
	at     map[string]map[string]handoff // id → hand-off → stack
}

func (tr *pathTrace) note(id, point string, h handoff) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.traced[id] {
		return
	}
	if tr.at[id] == nil {
		tr.at[id] = map[string]handoff{}
	}
	if _, ok := tr.at[id][point]; !ok { // the first one: a resend's is the same
		tr.at[id][point] = h
	}
}

func (tr *pathTrace) get(id, point string) (handoff, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	h, ok := tr.at[id][point]
	return h, ok
}

// tracingPublisher is the handler's publisher (ingest.Deps.Publisher, the
// seam the wiring fills with *publish.Publisher): it records the stack of
// each Submit and of each result callback, then hands on to the real one.
type tracingPublisher struct {
	p  *publish.Publisher
	tr *pathTrace
}

func (tp tracingPublisher) wrap(ev *nostr.Event, done func(publish.Result)) func(publish.Result) {
	return func(r publish.Result) {
		tp.tr.note(ev.ID, "result", capture())
		if r.Outcome != publish.Accepted {
			tp.tr.note(ev.ID, "outcome "+r.Outcome.String(), handoff{})
		}
		if done != nil {
			done(r)
		}
	}
}

func (tp tracingPublisher) Submit(ctx context.Context, ev *nostr.Event, done func(publish.Result)) error {
	tp.tr.note(ev.ID, "submit", capture())
	return tp.p.Submit(ctx, ev, tp.wrap(ev, done))
}

func (tp tracingPublisher) SubmitRaw(ctx context.Context, ev *nostr.Event, raw []byte, done func(publish.Result)) error {
	tp.tr.note(ev.ID, "submit", capture())
	return tp.p.SubmitRaw(ctx, ev, raw, tp.wrap(ev, done))
}

func (tp tracingPublisher) Publish(ctx context.Context, ev *nostr.Event) (publish.Result, error) {
	return tp.p.Publish(ctx, ev)
}

// TestEventPathCallTrace runs two signed issues from a remote khatru relay
// to the own khatru relay through the stages wired as internal/sidecar
// wires them (publisher, ingest handler, sync engine), one stored on the
// remote before the start (its history), one published there after the
// sync (live, or a historic job if one is still running). It captures the
// stacks where the event is handed on: Submit (ingest → publish), the
// own connection's OK (relay.Options.OnOK on the publisher's connection),
// the result callback (publish → ingest) and a Stored listener
// (ingest.Deps.Stored, inside the fan-out of the outcome), and checks
// that each runs on the goroutine of its stage with no frame of a stage
// upstream of it below.
func TestEventPathCallTrace(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "path", own, remote)
	mustPublish(t, own, repo)
	history := bob.Issue(alice.RepoAddress("path"), "stored before the sync")
	remote.Inject(repo, history)
	live := bob.Issue(alice.RepoAddress("path"), "published after the sync")
	tr := &pathTrace{traced: map[string]bool{history.ID: true, live.ID: true}, at: map[string]map[string]handoff{}}

	// The wiring of internal/sidecar's New, without a purgatory (no git
	// directory), a state store or the outbound address policy (the relays
	// are on 127.0.0.1), and with the test's tracing publisher and Stored
	// listener: sidecar.Deps has no seam for them, and none is added for a
	// test.
	cfg := fastConfig(own)
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ropts := sidecar.RelayOptions(cfg)
	ownOpts := ropts
	ownOpts.CoalesceWrites = true
	ownOpts.OnOK = func(id string, _ bool, _ string) { tr.note(id, "ok", capture()) }
	pcfg := cfg.Publisher.Config
	pcfg.DialTimeout = cfg.Relay.ConnectTimeout
	pub, err := publish.New(pcfg, func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, own.URL(), ownOpts)
	}, nil, log.Named("publisher"), reg)
	if err != nil {
		t.Fatal(err)
	}
	local, err := localindex.New(localindex.DefaultOptions(), reg)
	if err != nil {
		t.Fatal(err)
	}
	icfg := ingest.DefaultConfig()
	icfg.VerifyConfig = cfg.Sync.VerifyConfig
	icfg.EventLimits = cfg.Limits.EventLimits
	icfg.RelayLimits = cfg.Limits.RelayLimits
	icfg.QueueLen = 2 * cfg.Limits.RelayQueue
	in, err := ingest.New(icfg, ingest.Deps{
		Publisher: tracingPublisher{p: pub, tr: tr}, Present: local,
		Stored: []func(*nostr.Event){func(ev *nostr.Event) { tr.note(ev.ID, "stored", capture()) }},
		Log:    log.Named("ingest"), Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ht, err := health.New(cfg.Health, clock.Real{}, reg, log) // named "health" by New, as in the sidecar
	if err != nil {
		t.Fatal(err)
	}
	scfg := reposync.DefaultConfig()
	scfg.OwnRelay = cfg.OwnRelay
	scfg.BatchWindow = cfg.Sync.BatchWindow
	scfg.EOSETimeout = cfg.Sync.EOSETimeout
	scfg.EmptyRelayCheck = cfg.Sync.EmptyRelayCheck
	scfg.ConsolidationWait = cfg.Sync.ConsolidationWait
	scfg.Tick = cfg.Health.Tick
	scfg.ConnectTimeout = cfg.Relay.ConnectTimeout
	dialOwn := func(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error) {
		opts.NoRaw = true
		return relay.Dial(ctx, url, opts)
	}
	eng, err := reposync.New(scfg, reposync.Deps{
		Log: log, Registry: reg, Health: ht, Dial: relay.Dial, DialOwn: dialOwn,
		RelayOptions: ropts, Ingest: in, LocalIndex: local,
	})
	if err != nil {
		t.Fatal(err)
	}

	// Run as Sidecar.Run does: the handler and the engine stop first, the
	// publisher after them.
	pubCtx, stopPub := context.WithCancel(context.Background())
	engCtx, stopEng := context.WithCancel(context.Background())
	var pubWG, engWG sync.WaitGroup
	pubWG.Add(1)
	go func() { defer pubWG.Done(); _ = pub.Run(pubCtx) }()
	engWG.Add(3)
	go func() { defer engWG.Done(); _ = in.Run(engCtx) }()
	go func() { defer engWG.Done(); _ = eng.Run(engCtx) }()
	go func() { defer engWG.Done(); _ = ht.Run(engCtx) }()
	t.Cleanup(func() {
		stopEng()
		engWG.Wait()
		stopPub()
		pubWG.Wait()
	})
	testkit.WaitFor(t, syncTimeout, "engine never became ready", func() bool { return eng.Ready() && pub.Connected() })

	waitHas(t, own, history)
	testkit.WaitFor(t, syncTimeout, "remote never confirmed the repository", func() bool {
		st := eng.Status()
		return len(st.Relays) == 1 && st.Relays[0].ReposConfirmed == 1
	})
	mustPublish(t, remote, live)
	waitHas(t, own, live)

	for _, c := range []struct {
		name string
		ev   *nostr.Event
	}{{"history", history}, {"live", live}} {
		t.Run(c.name, func(t *testing.T) {
			id := c.ev.ID
			testkit.WaitFor(t, syncTimeout, "the outcome's fan-out never reached the Stored listener", func() bool {
				_, ok := tr.get(id, "stored")
				return ok
			})
			checkPathTrace(t, tr, id)
		})
	}
}

// checkPathTrace checks the stacks captured for id and logs them.
func checkPathTrace(t *testing.T, tr *pathTrace, id string) {
	t.Helper()
	stack := map[string]handoff{}
	for _, point := range []string{"submit", "ok", "result", "stored"} {
		h, ok := tr.get(id, point)
		if !ok {
			t.Fatalf("no stack captured at %s", point)
		}
		stack[point] = h
	}
	for _, o := range []publish.Outcome{publish.Duplicate, publish.Rejected, publish.Held, publish.Dropped} {
		if _, ok := tr.get(id, "outcome "+o.String()); ok {
			t.Errorf("the own relay's outcome was %s, not accepted", o)
		}
	}
	upstream := func(of string) []string {
		switch of {
		case "ingest":
			return []string{"internal/relay", "internal/reposync", "internal/historic", "internal/discovery", "internal/trusted"}
		case "publish":
			return []string{"internal/reposync", "internal/historic", "internal/discovery", "internal/trusted", "internal/ingest"}
		}
		return []string{"internal/reposync", "internal/historic", "internal/discovery", "internal/trusted", "internal/ingest", "internal/publish"}
	}
	check := func(point string, only, must, notUp []string) {
		h := stack[point]
		for _, p := range h.modulePackages() {
			if !slices.Contains(only, p) {
				t.Errorf("%s: a frame of %s on the stack, only %v expected\n\t%s", point, p, only, h)
			}
			if slices.Contains(notUp, p) {
				t.Errorf("%s: %s is upstream of this stage", point, p)
			}
		}
		for _, fn := range must {
			if !h.has(fn) {
				t.Errorf("%s: no frame of %s\n\t%s", point, fn, h)
			}
		}
	}
	// ingest → publish: Submit runs on an ingest worker, whose goroutine
	// was started by Handler.Run: the reader that called Handle
	// (reposync's live reader or a historic job) is not below it.
	check("submit", []string{"internal/ingest", "integration"},
		[]string{"internal/ingest.(*Handler).Run", "internal/ingest.(*Handler).process", "internal/ingest.(*Handler).submit"},
		upstream("ingest"))
	// The OK is read by the own connection's reader goroutine, which hands
	// it to the publisher by a channel (relay.OKReply).
	check("ok", []string{"internal/relay", "integration"},
		[]string{"internal/relay.(*Conn).readLoop", "internal/relay.(*Conn).handleOK"}, upstream("relay"))
	// publish → ingest: the result callback is called by the publisher's
	// Run goroutine, with nothing of ingest or upstream below it.
	check("result", []string{"internal/publish", "integration"},
		[]string{"internal/publish.(*Publisher).Run", "internal/publish.(*runner).resolve"}, upstream("publish"))
	if h := stack["result"]; len(h.funcs) < 2 || short(h.funcs[1]) != "internal/publish.(*runner).resolve" {
		t.Errorf("result: the callback's caller is not publish.(*runner).resolve\n\t%s", h)
	}
	// The fan-out of the outcome runs in ingest's callback, on the same
	// publisher goroutine: it must not block.
	check("stored", []string{"internal/ingest", "internal/publish", "integration"},
		[]string{"internal/ingest.(*Handler).settle", "internal/publish.(*Publisher).Run"},
		[]string{"internal/relay", "internal/reposync", "internal/historic", "internal/discovery", "internal/trusted"})

	g := func(point string) uint64 { return stack[point].goroutine }
	if g("submit") == 0 || g("submit") == g("result") || g("ok") == g("result") || g("submit") == g("ok") {
		t.Errorf("goroutines: submit %d, ok %d, result %d: want three different ones", g("submit"), g("ok"), g("result"))
	}
	if g("stored") != g("result") {
		t.Errorf("the Stored listener ran on goroutine %d, the result callback on %d", g("stored"), g("result"))
	}
	for _, point := range []string{"submit", "ok", "result", "stored"} {
		t.Logf("%s: %s", point, stack[point])
	}
}
