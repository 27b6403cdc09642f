package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/netdelay"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/grasp-sync/grasp-sync/testkit/strfry"
)

// Relay settings of the benchmark world.
const (
	// remoteReqCap is strfry's default maxFilterLimit.
	remoteReqCap = 500
	// logLimit keeps the harness proxies' message logs small: a benchmark
	// reads counters, not logs.
	logLimit = 1000
	// fetchBatch is the number of ids per REQ in the baseline.
	fetchBatch = 500
	// maxRetryPasses bounds the baseline's re-publishing of refused events.
	maxRetryPasses = 5
)

// world is the remote relays holding the universe.
type world struct {
	opts    Options
	u       *signed.Universe
	remotes []node
	anns    []*nostr.Event // what the own relay hosts from the start
	rest    []*nostr.Event // what it must gain, in created_at order
	roots   int
}

// ownRelay is the operator's relay: NIP-77 on, hosting every announcement
// of the universe (the test kit's relay with a GRASP-like policy, or an
// open strfry).
type ownRelay struct{ node }

// node is a relay of the benchmark world: the test kit's in-process
// khatru relay, or a strfry process (Options.Strfry).
type node interface {
	URL() string
	// Len is the number of events the relay holds (-1: it did not answer).
	Len() int
	// ResetStats and Stats are the wire counters of the test kit's relays;
	// a strfry has none (zero).
	ResetStats()
	Stats() harness.Stats
	Close() error
	load(ctx context.Context, evs []*nostr.Event) error
}

type khatruNode struct{ *harness.Relay }

func (k khatruNode) load(_ context.Context, evs []*nostr.Event) error {
	k.Inject(evs...)
	return nil
}

type strfryNode struct{ *strfry.Relay }

func (strfryNode) ResetStats()          {}
func (strfryNode) Stats() harness.Stats { return harness.Stats{} }
func (s strfryNode) load(ctx context.Context, evs []*nostr.Event) error {
	return s.Import(ctx, evs)
}

// delayedNode is a strfry reached through a netdelay proxy (Options.Delay):
// its URL is the proxy's.
type delayedNode struct {
	strfryNode
	p *netdelay.Proxy
}

func (d delayedNode) URL() string { return "ws://" + d.p.Addr() }

func (d delayedNode) Close() error {
	perr := d.p.Close()
	return errors.Join(d.strfryNode.Close(), perr)
}

// startNode starts a relay of the world: a strfry process in a new
// directory under the work directory when Options.Strfry is set, else the
// test kit's relay with opts.
func (w *world) startNode(name string, ro harness.RelayOptions) (node, error) {
	if w.opts.Strfry != "" {
		dir, err := os.MkdirTemp(w.opts.WorkDir, "strfry-"+strings.ReplaceAll(name, " ", "-")+"-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		r, err := strfry.Start(context.Background(), w.opts.Strfry, dir)
		if err != nil {
			return nil, fmt.Errorf("bench: start %s relay: %w", name, err)
		}
		if d := ro.Faults.Latency; d > 0 {
			p, err := netdelay.Start(strings.TrimPrefix(r.URL(), "ws://"), d)
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("bench: %s relay's delay: %w", name, err)
			}
			return delayedNode{strfryNode{r}, p}, nil
		}
		return strfryNode{r}, nil
	}
	ro.Name, ro.LogLimit = name, logLimit
	r, err := harness.StartRelay(ro)
	if err != nil {
		return nil, fmt.Errorf("bench: start %s relay: %w", name, err)
	}
	return khatruNode{r}, nil
}

func newWorld(opts Options) (*world, error) {
	w := &world{opts: opts}
	var urls []string
	for i := 0; i < opts.Profile.Relays; i++ {
		r, err := w.startNode(fmt.Sprintf("remote %d", i+1), harness.RelayOptions{
			Negentropy: true, ReqCap: remoteReqCap, Faults: harness.Faults{Latency: opts.Delay},
		})
		if err != nil {
			w.close()
			return nil, err
		}
		w.remotes = append(w.remotes, r)
		urls = append(urls, r.URL())
	}
	u, err := signed.NewUniverse(signed.UniverseOptions{
		Seed: opts.Seed, Repos: opts.Profile.Repos, Relays: urls, Events: opts.Profile.Events,
		Forge: opts.Profile.Forge,
	})
	if err != nil {
		w.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	w.u = u
	for _, r := range w.remotes {
		if err := r.load(context.Background(), u.ForRelay(r.URL())); err != nil {
			w.close()
			return nil, fmt.Errorf("bench: load remote relay: %w", err)
		}
	}
	for _, repo := range u.Repos {
		w.anns = append(w.anns, repo.Announcement)
		w.roots += len(repo.Roots)
	}
	for _, ev := range u.Events {
		if ev.Kind != signed.KindAnnouncement {
			w.rest = append(w.rest, ev)
		}
	}
	return w, nil
}

func (w *world) close() {
	for _, r := range w.remotes {
		r.Close()
	}
}

// newOwn starts a fresh own relay hosting the announcements.
func (w *world) newOwn() (*ownRelay, error) {
	r, err := w.startNode("own", harness.RelayOptions{Policy: harness.GraspPolicy(), Negentropy: true})
	if err != nil {
		return nil, err
	}
	if err := r.load(context.Background(), w.anns); err != nil {
		r.Close()
		return nil, fmt.Errorf("bench: load own relay: %w", err)
	}
	return &ownRelay{r}, nil
}

// gained is how many events the own relay holds beyond the announcements.
func (o *ownRelay) gained(w *world) int { return o.Len() - len(w.anns) }

func (w *world) resetStats(own *ownRelay) {
	for _, r := range w.remotes {
		r.ResetStats()
	}
	if own != nil {
		own.ResetStats()
	}
}

// collectBytes fills res's wire counters. A relay's BytesIn is what the
// client sent.
func (w *world) collectBytes(res *Result, own *ownRelay) {
	for _, r := range w.remotes {
		st := r.Stats()
		res.RemoteSent += st.BytesIn
		res.RemoteReceived += st.BytesOut
		res.RemoteSentByType = addBytes(res.RemoteSentByType, st.ReceivedBytes)
		res.RemoteReceivedByType = addBytes(res.RemoteReceivedByType, st.SentBytes)
		res.RemoteNegOpenMsg += st.NegOpenMsgBytes
		res.RemoteRequestsMax = max(res.RemoteRequestsMax, st.Reqs+st.NegOpens+st.Received["AUTH"])
	}
	if own != nil {
		st := own.Stats()
		res.OwnSent += st.BytesIn
		res.OwnReceived += st.BytesOut
	}
}

func addBytes(dst, src map[string]int64) map[string]int64 {
	if dst == nil {
		dst = make(map[string]int64, len(src))
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// ingest measures the own relay's ingest rate alone.
func (w *world) ingest(ctx context.Context, opts Options) (Result, error) {
	own, err := w.newOwn()
	if err != nil {
		return Result{}, err
	}
	defer own.Close()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	res := Result{Name: RunIngest}
	w.resetStats(own)
	start := time.Now()
	retried, err := publishAll(ctx, own.URL(), opts.Window, w.rest)
	res.Seconds = time.Since(start).Seconds()
	res.Retried = retried
	res.Events = own.gained(w)
	res.Converged = err == nil && res.Events == len(w.rest)
	w.collectBytes(&res, own)
	res.Note = fmt.Sprintf("one connection, window %d", opts.Window)
	if err == nil && !res.Converged {
		err = fmt.Errorf("%w: own relay took %d of %d events", ErrNotConverged, res.Events, len(w.rest))
	}
	return res, err
}

// publishAll publishes evs with a window of EVENTs in flight and publishes
// the refused ones again (khatru stores a window's events concurrently, so
// a reply may arrive before its root) until all are stored or a pass makes
// no progress. It returns how many were published again.
func publishAll(ctx context.Context, url string, window int, evs []*nostr.Event) (int, error) {
	retried := 0
	for pass := 0; len(evs) > 0; pass++ {
		again, err := refusedBy(harness.PublishWindow(ctx, url, window, evs...), evs)
		if err != nil {
			return retried, fmt.Errorf("bench: publish to %s: %w", url, err)
		}
		if len(again) == 0 {
			return retried, nil
		}
		if pass == maxRetryPasses || len(again) == len(evs) {
			return retried, fmt.Errorf("bench: publish to %s: %d events refused, e.g. %s", url, len(again), again[0].ID)
		}
		slices.SortFunc(again, func(a, b *nostr.Event) int { return int(a.CreatedAt) - int(b.CreatedAt) })
		retried += len(again)
		evs = again
	}
	return retried, nil
}

// flatten returns the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// baseline copies every remote's events into a fresh own relay the
// simplest way: per remote (concurrently), a NIP-77 diff against the own
// relay's events, then REQ by ids in batches and publish each batch.
func (w *world) baseline(ctx context.Context, opts Options) (Result, error) {
	own, err := w.newOwn()
	if err != nil {
		return Result{}, err
	}
	defer own.Close()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	res := Result{Name: RunBaseline}
	w.resetStats(own)
	start := time.Now()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		retried int
	)
	for _, r := range w.remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := copyRelay(ctx, r.URL(), own.URL(), opts.Window)
			mu.Lock()
			defer mu.Unlock()
			retried += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Retried = retried
	res.Events = own.gained(w)
	err = errors.Join(errs...)
	res.Converged = err == nil && res.Events == len(w.rest)
	w.collectBytes(&res, own)
	res.Note = fmt.Sprintf("NIP-77 diff + REQ by ids (%d per REQ) + publish, one goroutine per remote", fetchBatch)
	if err == nil && !res.Converged {
		err = fmt.Errorf("%w: baseline copied %d of %d events", ErrNotConverged, res.Events, len(w.rest))
	}
	return res, err
}

// copyRelay is the naive copy: reconcile src against dst's events, fetch
// what dst lacks, publish it.
func copyRelay(ctx context.Context, src, dst string, window int) (int, error) {
	dc, err := harness.Dial(ctx, dst)
	if err != nil {
		return 0, fmt.Errorf("bench: baseline: %w", err)
	}
	have, err := dc.Req(ctx, "have", nostr.Filter{})
	dc.Close()
	if err != nil {
		return 0, fmt.Errorf("bench: baseline: read %s: %w", dst, err)
	}
	sc, err := harness.Dial(ctx, src)
	if err != nil {
		return 0, fmt.Errorf("bench: baseline: %w", err)
	}
	defer sc.Close()
	need, _, err := sc.Negentropy(ctx, "diff", nostr.Filter{}, have.Events)
	if err != nil {
		return 0, fmt.Errorf("bench: baseline: reconcile %s: %w", src, err)
	}
	var later []*nostr.Event
	for i := 0; i < len(need); i += fetchBatch {
		ids := need[i:min(i+fetchBatch, len(need))]
		sub := fmt.Sprintf("ids-%d", i/fetchBatch)
		got, err := sc.Req(ctx, sub, nostr.Filter{IDs: ids})
		if err != nil {
			return 0, fmt.Errorf("bench: baseline: fetch from %s: %w", src, err)
		}
		if err := sc.CloseSub(ctx, sub); err != nil {
			return 0, fmt.Errorf("bench: baseline: %w", err)
		}
		evs := got.Events
		slices.SortFunc(evs, func(a, b *nostr.Event) int { return int(a.CreatedAt) - int(b.CreatedAt) })
		refused, err := refusedBy(harness.PublishWindow(ctx, dst, window, evs...), evs)
		if err != nil {
			return 0, fmt.Errorf("bench: baseline: publish to %s: %w", dst, err)
		}
		later = append(later, refused...)
	}
	// what arrived before what it references goes once more at the end
	n, err := publishAll(ctx, dst, window, later)
	return len(later) + n, err
}

// refusedBy returns the events of evs that err (from PublishWindow) says
// were refused, or err itself when it is not only refusals.
func refusedBy(err error, evs []*nostr.Event) ([]*nostr.Event, error) {
	if err == nil {
		return nil, nil
	}
	byID := make(map[string]*nostr.Event, len(evs))
	for _, ev := range evs {
		byID[ev.ID] = ev
	}
	var out []*nostr.Event
	for _, e := range flatten(err) {
		var rej *harness.RejectedError
		if !errors.As(e, &rej) {
			return nil, e
		}
		if ev := byID[rej.ID]; ev != nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// measureVerify returns the CPU cost of one signature check in
// microseconds, measured on up to 2,000 events as CPU time of one thread (so
// other processes competing for the cores do not inflate it).
func measureVerify(evs []*nostr.Event) float64 {
	n := min(len(evs), 2000)
	if n == 0 {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	for _, ev := range evs[:n] {
		if ok, err := ev.CheckSignature(); !ok || err != nil {
			return 0
		}
	}
	return float64((threadCPU() - start).Nanoseconds()) / 1e3 / float64(n)
}
