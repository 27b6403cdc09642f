// Package demo runs grasp-sync end to end on 127.0.0.1: an own relay and
// two remote relays (khatru, in-process), seeded with NIP-34 repositories,
// synced by a real sidecar, with progress and a summary of real counts.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/harness"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// Options tune the demo.
type Options struct {
	// Repos is the number of repositories seeded on the remotes (besides
	// the one found only through discovery).
	Repos int
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Progress is how often progress is printed.
	Progress time.Duration
	// Log receives the sidecar's log (nil: discarded).
	Log *zap.Logger
}

// DefaultOptions are the defaults of `grasp-sync-demo` (its demo command).
func DefaultOptions() Options {
	return Options{Repos: 4, Timeout: 50 * time.Second, Progress: 500 * time.Millisecond}
}

// Summary is what the demo measured.
type Summary struct {
	Expected   int
	Arrived    int
	Published  uint64
	Duplicates uint64
	Rejected   uint64
	Elapsed    time.Duration
	Relays     []status.Relay
}

// world is the relays and the events the demo expects to see synced.
type world struct {
	own, a, b *harness.Relay
	expected  []*nostr.Event
}

// Run performs the demo, printing to out. It returns an error when the own
// relay did not receive every expected event in time.
func Run(ctx context.Context, out io.Writer, opts Options) (Summary, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
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
	fmt.Fprintf(out, "  own relay     %s  (GRASP policy: hosts %d announced repositories)\n", w.own.URL(), w.own.Count(nostr.Filter{Kinds: []int{harness.KindAnnouncement}}))
	fmt.Fprintf(out, "  remote A      %s  (%d events, NIP-77 on)\n", w.a.URL(), w.a.Len())
	fmt.Fprintf(out, "  remote B      %s  (%d events, REQ capped at 500)\n", w.b.URL(), w.b.Len())
	fmt.Fprintf(out, "  to sync       %d events the own relay does not have yet\n\n", len(w.expected))

	cfg := config.Default()
	cfg.OwnRelay = w.own.URL()
	cfg.Listen = "127.0.0.1:0"
	cfg.Dial.Allow = []string{"127.0.0.0/8"}
	cfg.Sync.BatchWindow = 200 * time.Millisecond
	cfg.Health.Tick = 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: opts.Log, Registry: reg, Version: "demo"})
	if err != nil {
		return Summary{}, err
	}
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(runCtx) }()

	tick := time.NewTicker(opts.Progress)
	defer tick.Stop()
	var runErr error
	for arrived := 0; arrived < len(w.expected); {
		select {
		case <-ctx.Done():
			runErr = fmt.Errorf("timed out after %s with %d of %d events synced", opts.Timeout, arrived, len(w.expected))
		case <-tick.C:
			arrived = w.arrived()
			st := sc.Status()
			fmt.Fprintf(out, "  %5.1fs  synced %d/%d  relays connected %d/%d  published %d  rejected %d\n",
				time.Since(start).Seconds(), arrived, len(w.expected), connected(st), len(st.Relays), st.Publisher.Accepted, st.Publisher.Rejected)
			continue
		}
		break
	}
	elapsed := time.Since(start)
	st := sc.Status()
	stop()
	if err := <-done; err != nil && runErr == nil {
		runErr = err
	}
	sum := Summary{
		Expected: len(w.expected), Arrived: w.arrived(), Elapsed: elapsed, Relays: st.Relays,
		Published: st.Publisher.Accepted, Duplicates: st.Publisher.Duplicates, Rejected: st.Publisher.Rejected,
	}
	printSummary(out, w, sum)
	return sum, runErr
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
	fmt.Fprintln(tw, "  relay\tstate\tevents pulled\trepos\troot events")
	names := map[string]string{w.a.URL(): "remote A", w.b.URL(): "remote B"}
	for _, r := range s.Relays {
		name := names[r.URL]
		if name == "" {
			name = r.URL
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\n", name, r.State, r.EventsReceived, r.ReposConfirmed, r.RootsConfirmed)
	}
	tw.Flush()
	fmt.Fprintf(out, "  published into the own relay: %d accepted, %d already there, %d rejected\n", s.Published, s.Duplicates, s.Rejected)
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
	return &world{own: own, a: a, b: b}, nil
}

func (w *world) close() {
	w.own.Close()
	w.a.Close()
	w.b.Close()
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
	maintainers := []*harness.Key{harness.NewKey(), harness.NewKey()}
	contributors := []*harness.Key{harness.NewKey(), harness.NewKey(), harness.NewKey()}
	var ownAnns []*nostr.Event
	base := time.Now().Add(-30 * 24 * time.Hour)
	at := func(i int) harness.Option { return harness.At(base.Add(time.Duration(i) * time.Hour)) }
	clock := 0
	next := func() harness.Option { clock++; return at(clock) }
	for i := 0; i < n; i++ {
		owner := maintainers[i%len(maintainers)]
		d := fmt.Sprintf("demo-repo-%d", i+1)
		remotes := []*harness.Relay{w.a, w.b}
		if i%3 == 1 {
			remotes = []*harness.Relay{w.a}
		} else if i%3 == 2 {
			remotes = []*harness.Relay{w.b}
		}
		ann := announce(owner, d, w.own, remotes, next())
		ownAnns = append(ownAnns, ann)
		evs := repoEvents(owner, contributors, ann, d, next)
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
	ann := announce(owner, d, w.own, []*harness.Relay{w.b}, next())
	evs := repoEvents(owner, contributors, ann, d, next)
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

func announce(owner *harness.Key, d string, own *harness.Relay, remotes []*harness.Relay, opt harness.Option) *nostr.Event {
	relays := []string{own.URL()}
	clones := []string{harness.DefaultCloneURL(own.URL(), owner.Npub(), d)}
	for _, r := range remotes {
		relays = append(relays, r.URL())
	}
	return owner.Announcement(d, harness.WithRelays(relays...), harness.WithClone(clones...),
		harness.WithDescription("a repository synced by the grasp-sync demo"), opt)
}

// repoEvents builds the discussion of one repository.
func repoEvents(owner *harness.Key, contributors []*harness.Key, ann *nostr.Event, d string, next func() harness.Option) []*nostr.Event {
	addr := owner.RepoAddress(d)
	tip := fmt.Sprintf("%040x", len(d)*7919)
	state := owner.State(d, harness.WithRef("refs/heads/main", tip), harness.WithHEAD("main"), next())
	evs := []*nostr.Event{state}
	for i, c := range contributors {
		patch := c.Patch(addr, next())
		reply := c.PatchReply(addr, patch, nil, next())
		issue := c.Issue(addr, fmt.Sprintf("issue %d in %s", i+1, d), next())
		comment := owner.Comment(issue, nil, next())
		answer := c.Comment(issue, comment, next())
		applied := owner.Status(harness.KindStatusApplied, patch, next())
		evs = append(evs, patch, reply, issue, comment, answer, applied)
	}
	pr := contributors[0].PR(addr, fmt.Sprintf("%040x", len(d)*104729), next())
	update := contributors[0].PRUpdate(addr, pr, fmt.Sprintf("%040x", len(d)*1299709), next())
	evs = append(evs, pr, update, owner.Comment(ann, nil, next()))
	return evs
}
