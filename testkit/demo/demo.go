// Package demo runs grasp-sync end to end on 127.0.0.1: an own relay and
// two remote relays (khatru, in-process), seeded with NIP-34 repositories,
// and, when git is installed, a git server whose commits the sidecar
// fetches before it releases state and PR events (purgatory); synced by a
// real sidecar, with progress and a summary of real counts, or kept running
// alone (World) for the real grasp-sync binary.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// Options tune the demo.
type Options struct {
	// Repos is the number of repositories seeded on the remotes (besides
	// the one found only through discovery).
	Repos int
	// Timeout bounds the whole run; the progress lines and the summary
	// count from the same start.
	Timeout time.Duration
	// Progress is how often progress is printed.
	Progress time.Duration
	// Log receives the sidecar's log (nil: discarded).
	Log *zap.Logger
	// Hold is how long the purgatory holds a state event once the relays
	// are synced (purgatory.synced_delay), long enough to watch one wait
	// for its commit; 0 means a second.
	Hold time.Duration
}

// DefaultOptions are the defaults of `grasp-sync-demo` (its demo command).
func DefaultOptions() Options {
	return Options{Repos: 4, Timeout: 50 * time.Second, Progress: 500 * time.Millisecond}
}

// Summary is what the demo measured.
type Summary struct {
	Expected int
	Arrived  int
	// Received counts events as the remotes sent them: an event both
	// remotes hold is received twice.
	Received   uint64
	Published  uint64
	Duplicates uint64
	Rejected   uint64
	Elapsed    time.Duration
	Relays     []status.Relay
	// Git is set when git was available and purgatory ran.
	Git bool
	// Held is whether the watched state event was seen held in purgatory;
	// Released whether it reached the own relay after its commit was
	// fetched into the own git directory.
	Held, Released bool
	// GitRequests counts requests the git server answered.
	GitRequests int
}

// world is the relays and the events the demo expects to see synced.
type world struct {
	own, a, b *harness.Relay
	git       *gitWorld // nil without git
	expected  []*nostr.Event
}

// Run performs the demo, printing to out. It returns an error when the own
// relay did not receive every expected event in time.
func Run(ctx context.Context, out io.Writer, opts Options) (Summary, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	// One clock for the timeout, the progress lines and the summary, so a
	// timeout says the same time as the summary above it.
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	fmt.Fprintln(out, "grasp-sync demo: everything runs on 127.0.0.1")
	w, err := startWorld()
	if err != nil {
		return Summary{}, err
	}
	defer w.close()
	if err := w.seed(ctx, opts.Repos); err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(out, "  own relay     %s  (GRASP policy: hosts %d announced repositories)\n", w.own.URL(), w.own.Count(nostr.Filter{Kinds: []int{signed.KindAnnouncement}}))
	fmt.Fprintf(out, "  remote A      %s  (%d events, NIP-77 on)\n", w.a.URL(), w.a.Len())
	fmt.Fprintf(out, "  remote B      %s  (%d events, REQ capped at 500)\n", w.b.URL(), w.b.Len())
	if w.git != nil {
		fmt.Fprintf(out, "  git server    %s  (another GRASP service's clone URLs: the commits of every repository)\n", w.git.server.URL)
		fmt.Fprintf(out, "  own git dir   %s  (empty: the sidecar creates the repositories and fetches into them)\n", w.git.dir)
	} else {
		fmt.Fprintln(out, "  git           not installed: purgatory off, state and PR events are published as they come")
	}
	fmt.Fprintf(out, "  to sync       %d events the own relay does not have yet\n\n", len(w.expected))

	cfg := config.Default()
	cfg.OwnRelay = w.own.URL()
	cfg.Listen = "127.0.0.1:0"
	cfg.Dial.Allow = []string{"127.0.0.0/8"}
	cfg.Sync.BatchWindow = 200 * time.Millisecond
	cfg.Health.Tick = 200 * time.Millisecond
	cfg.Log.ProgressInterval = time.Second
	if w.git != nil {
		cfg.GitDir = w.git.dir
		cfg.ServiceDomain = w.own.Addr()
		cfg.Purgatory.CreateMissingRepos = true
		// Long enough to watch a state event wait for its commit.
		cfg.Purgatory.SyncedDelay = time.Second
		if opts.Hold > 0 {
			cfg.Purgatory.SyncedDelay = opts.Hold
		}
		cfg.Purgatory.OwnRelayDelay = 100 * time.Millisecond
		cfg.Purgatory.Loop = 50 * time.Millisecond
	}
	reg := prometheus.NewRegistry()
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: opts.Log, Registry: reg, Version: "demo"})
	if err != nil {
		return Summary{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(runCtx) }()

	sum := Summary{Expected: len(w.expected), Git: w.git != nil}
	watch := w.watchState(runCtx, sc, start)
	tick := time.NewTicker(opts.Progress)
	defer tick.Stop()
	for sum.Arrived < len(w.expected) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
			continue
		case <-tick.C:
		}
		watch.print(out, w, &sum)
		sum.Arrived = w.arrived()
		st := sc.Status()
		fmt.Fprintf(out, "  %5.1fs  own relay has %d/%d  received %d (%d new)  held for git %d  relays connected %d/%d  rejected %d\n",
			time.Since(start).Seconds(), sum.Arrived, len(w.expected), received(st), st.Publisher.Accepted,
			st.Purgatory.Events, connected(st), len(st.Relays), st.Publisher.Rejected)
	}
	elapsed := time.Since(start)
	st := sc.Status()
	stop()
	runErr := <-done
	watch.print(out, w, &sum)
	sum.Arrived, sum.Elapsed, sum.Relays = w.arrived(), elapsed, st.Relays
	sum.Received, sum.Published, sum.Duplicates, sum.Rejected = received(st), st.Publisher.Accepted, st.Publisher.Duplicates, st.Publisher.Rejected
	if w.git != nil {
		sum.GitRequests = int(w.git.server.Stats().Requests)
	}
	printSummary(out, w, sum)
	if sum.Arrived < sum.Expected {
		// The same numbers as the summary's last line.
		return sum, fmt.Errorf("timed out after %.1fs (--timeout %s): the own relay holds %d of the %d expected events", elapsed.Seconds(), opts.Timeout, sum.Arrived, sum.Expected)
	}
	if w.git != nil && !sum.Released {
		return sum, fmt.Errorf("the %s never reached the own relay after a git fetch", w.git.watched)
	}
	return sum, runErr
}

// stateWatch follows the watched state event: when purgatory first held
// it, when it reached the own relay with its commit in the own git
// directory. Polled often, so a short hold is seen.
type stateWatch struct {
	mu               sync.Mutex
	heldAt, released time.Duration // 0: not yet
	printedHeld      bool
	printedReleased  bool
}

func (w *world) watchState(ctx context.Context, sc *sidecar.Sidecar, start time.Time) *stateWatch {
	sw := &stateWatch{}
	if w.git == nil || sc.Purgatory() == nil {
		return sw
	}
	ws := w.git.watched
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			held := sc.Purgatory().Has(ws.event.ID)
			released := !held && w.own.Has(ws.event.ID) && w.git.has(ws.repo, ws.commit)
			sw.mu.Lock()
			if held && sw.heldAt == 0 {
				sw.heldAt = time.Since(start)
			}
			if released {
				sw.released = time.Since(start)
			}
			sw.mu.Unlock()
			if released {
				return
			}
		}
	}()
	return sw
}

// print writes the hold and the release once each, and records them in sum.
func (sw *stateWatch) print(out io.Writer, w *world, sum *Summary) {
	if w.git == nil {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	ws := w.git.watched
	if sw.heldAt > 0 && !sw.printedHeld {
		sw.printedHeld, sum.Held = true, true
		fmt.Fprintf(out, "  %5.1fs  purgatory holds the %s: commit not in the own git directory yet\n", sw.heldAt.Seconds(), ws)
	}
	if sw.released > 0 && !sw.printedReleased {
		sw.printedReleased, sum.Released = true, true
		fmt.Fprintf(out, "  %5.1fs  released: %s fetched from the git server into %s, state event published\n",
			sw.released.Seconds(), short(ws.commit), filepath.Join(w.git.dir, ws.repo))
	}
}

// received sums the events the remotes sent (copies included).
func received(st status.Snapshot) uint64 {
	var n uint64
	for _, r := range st.Relays {
		n += r.EventsReceived
	}
	return n
}

func connected(st status.Snapshot) int {
	n := 0
	for _, r := range st.Relays {
		if r.State == "connected" || r.State == "syncing" || r.State == "connected_historic_sync_failures" {
			n++
		}
	}
	return n
}

func printSummary(out io.Writer, w *world, s Summary) {
	fmt.Fprintf(out, "\nsummary (%.1fs)\n", s.Elapsed.Seconds())
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  relay\tstate\tevents received\tnew when they came\trepos\troot events")
	names := map[string]string{w.a.URL(): "remote A", w.b.URL(): "remote B"}
	if w.git != nil {
		// A clone URL's host is taken for a GRASP service, whose relay is
		// tried too; this git server has none.
		names["ws://"+w.git.server.Host()] = "git server (tried as a relay; has none)"
	}
	for _, r := range s.Relays {
		name := names[r.URL]
		if name == "" {
			name = r.URL
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\n", name, r.State, r.EventsReceived, r.EventsNew, r.ReposConfirmed, r.RootsConfirmed)
	}
	tw.Flush()
	fmt.Fprintf(out, "  received %d events in all: an event both remotes hold arrives twice, and announcements the own relay has arrive too\n", s.Received)
	fmt.Fprintf(out, "  published into the own relay: %d new (accepted), %d already there, %d rejected\n", s.Published, s.Duplicates, s.Rejected)
	if s.Git {
		released := "not released"
		if s.Released {
			released = "released after its commit was fetched"
		}
		fmt.Fprintf(out, "  purgatory: state and PR events waited for their commits (the git server answered %d requests); the %s: %s\n",
			s.GitRequests, w.git.watched, released)
	}
	fmt.Fprintf(out, "  own relay now holds %d of the %d expected events\n", s.Arrived, s.Expected)
}

func startWorld() (*world, error) {
	own, err := harness.StartRelay(harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy()})
	if err != nil {
		return nil, err
	}
	a, err := harness.StartRelay(harness.RelayOptions{Name: "remote A", Negentropy: true})
	if err != nil {
		own.Close()
		return nil, err
	}
	b, err := harness.StartRelay(harness.RelayOptions{Name: "remote B", ReqCap: 500})
	if err != nil {
		own.Close()
		a.Close()
		return nil, err
	}
	g, err := startGit()
	if err != nil {
		own.Close()
		a.Close()
		b.Close()
		return nil, err
	}
	return &world{own: own, a: a, b: b, git: g}, nil
}

func (w *world) close() {
	w.own.Close()
	w.a.Close()
	w.b.Close()
	w.git.close()
}

// arrived counts expected events present on the own relay.
func (w *world) arrived() int {
	n := 0
	for _, ev := range w.expected {
		if w.own.Has(ev.ID) {
			n++
		}
	}
	return n
}

// seed creates n repositories hosted by the own relay and listing one or
// both remotes, each with a state, patches, issues, a PR with an update,
// statuses and comments on the remotes; plus one repository the own relay
// learns of only through remote A, whose events live on remote B.
func (w *world) seed(ctx context.Context, n int) error {
	if n < 1 {
		return errors.New("demo: need at least one repository")
	}
	maintainers := []*signed.Key{signed.NewKey(), signed.NewKey()}
	contributors := []*signed.Key{signed.NewKey(), signed.NewKey(), signed.NewKey()}
	var ownAnns []*nostr.Event
	base := time.Now().Add(-30 * 24 * time.Hour)
	at := func(i int) signed.Option { return signed.At(base.Add(time.Duration(i) * time.Hour)) }
	clock := 0
	next := func() signed.Option { clock++; return at(clock) }
	for i := 0; i < n; i++ {
		owner := maintainers[i%len(maintainers)]
		d := fmt.Sprintf("demo-repo-%d", i+1)
		remotes := []*harness.Relay{w.a, w.b}
		if i%3 == 1 {
			remotes = []*harness.Relay{w.a}
		} else if i%3 == 2 {
			remotes = []*harness.Relay{w.b}
		}
		c, err := w.commits(owner, d)
		if err != nil {
			return err
		}
		ann := announce(owner, d, w.own, remotes, c.clone, next())
		ownAnns = append(ownAnns, ann)
		evs := repoEvents(owner, contributors, ann, d, c, next)
		if i == 0 && w.git != nil {
			w.git.watched = &watchedState{repo: owner.Npub() + "/" + d + ".git", commit: c.main, event: evs[0]}
		}
		for _, r := range remotes {
			r.Inject(ann)
			r.Inject(evs...)
		}
		w.expected = append(w.expected, evs...)
	}
	// Discovery: remote A knows a repository that lists the own relay and
	// remote B; its discussion lives on B.
	owner := contributors[0]
	d := "discovered-repo"
	c, err := w.commits(owner, d)
	if err != nil {
		return err
	}
	ann := announce(owner, d, w.own, []*harness.Relay{w.b}, c.clone, next())
	evs := repoEvents(owner, contributors, ann, d, c, next)
	w.a.Inject(ann)
	w.b.Inject(ann)
	w.b.Inject(evs...)
	w.expected = append(w.expected, ann)
	w.expected = append(w.expected, evs...)

	if err := harness.Publish(ctx, w.own.URL(), ownAnns...); err != nil {
		return fmt.Errorf("demo: seed own relay: %w", err)
	}
	slices.SortFunc(w.expected, func(x, y *nostr.Event) int { return int(x.CreatedAt) - int(y.CreatedAt) })
	return nil
}

// commits are the real commits of repository d on the git server, or
// made-up ids without git.
func (w *world) commits(owner *signed.Key, d string) (repoCommits, error) {
	if w.git != nil {
		c, err := w.git.commits(owner, d)
		if err != nil {
			return c, fmt.Errorf("demo: git server: %w", err)
		}
		return c, nil
	}
	return repoCommits{
		main: fmt.Sprintf("%040x", len(d)*7919), pr: fmt.Sprintf("%040x", len(d)*104729),
		prUpdate: fmt.Sprintf("%040x", len(d)*1299709),
	}, nil
}

func announce(owner *signed.Key, d string, own *harness.Relay, remotes []*harness.Relay, clone string, opt signed.Option) *nostr.Event {
	relays := []string{own.URL()}
	clones := []string{signed.DefaultCloneURL(own.URL(), owner.Npub(), d)}
	if clone != "" {
		clones = append(clones, clone)
	}
	for _, r := range remotes {
		relays = append(relays, r.URL())
	}
	return owner.Announcement(d, signed.WithRelays(relays...), signed.WithClone(clones...),
		signed.WithDescription("a repository synced by the grasp-sync demo"), opt)
}

// repoEvents builds the discussion of one repository.
// The state event comes first.
func repoEvents(owner *signed.Key, contributors []*signed.Key, ann *nostr.Event, d string, c repoCommits, next func() signed.Option) []*nostr.Event {
	addr := owner.RepoAddress(d)
	state := owner.State(d, signed.WithRef("refs/heads/main", c.main), signed.WithHEAD("main"), next())
	evs := []*nostr.Event{state}
	for i, c := range contributors {
		patch := c.Patch(addr, next())
		reply := c.PatchReply(addr, patch, nil, next())
		issue := c.Issue(addr, fmt.Sprintf("issue %d in %s", i+1, d), next())
		comment := owner.Comment(issue, nil, next())
		answer := c.Comment(issue, comment, next())
		applied := owner.Status(signed.KindStatusApplied, patch, next())
		evs = append(evs, patch, reply, issue, comment, answer, applied)
	}
	var clone []signed.Option
	if c.clone != "" {
		clone = append(clone, signed.WithClone(c.clone))
	}
	pr := contributors[0].PR(addr, c.pr, append(clone, next())...)
	update := contributors[0].PRUpdate(addr, pr, c.prUpdate, append(clone, next())...)
	evs = append(evs, pr, update, owner.Comment(ann, nil, next()))
	return evs
}
