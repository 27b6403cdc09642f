package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// Process settings of the sidecar runs.
const (
	pollInterval = 100 * time.Millisecond
	// stopGrace is the sidecar's shutdown_grace; the process is killed
	// when it has not exited stopGrace after SIGTERM plus a margin.
	stopGrace = 5 * time.Second
)

// proc is a running grasp-sync process.
type proc struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	logf   *os.File
	waited chan struct{}
	err    error
	client *http.Client
}

// sidecarArgs are the flags of one sidecar run.
func sidecarArgs(opts Options, ownURL, listen string, negentropy bool) []string {
	args := []string{
		"--own-relay", ownURL,
		"--listen", listen,
		"--dial.allow", "127.0.0.0/8",
		"--shutdown-grace", stopGrace.String(),
		"--log.level", "warn",
		fmt.Sprintf("--negentropy.enabled=%t", negentropy),
	}
	if opts.BatchWindow > 0 {
		args = append(args, "--sync.batch-window", opts.BatchWindow.String())
	}
	return append(args, opts.SidecarArgs...)
}

// startSidecar starts `grasp-sync run` against ownURL, with the hidden
// --cpuprofile/--memprofile flags when a profile path is set.
func startSidecar(opts Options, name, ownURL string, negentropy bool, cpuProfile, memProfile string) (*proc, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"run"}
	if cpuProfile != "" {
		args = append(args, "--cpuprofile", cpuProfile)
	}
	if memProfile != "" {
		args = append(args, "--memprofile", memProfile)
	}
	args = append(args, sidecarArgs(opts, ownURL, listen, negentropy)...)
	logf, err := os.Create(filepath.Join(opts.WorkDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cmd := exec.Command(opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench: start %s: %w", opts.Binary, err)
	}
	p := &proc{cmd: cmd, base: "http://" + listen, logf: logf, waited: make(chan struct{}), client: &http.Client{Timeout: 5 * time.Second}}
	go func() {
		p.err = cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// cleanEnv is the environment without GRASP_SYNC_* settings, so only the
// benchmark's flags configure the sidecar.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if len(kv) >= 11 && kv[:11] == "GRASP_SYNC_" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: pick a port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// exited reports whether the process ended (and why).
func (p *proc) exited() (bool, error) {
	select {
	case <-p.waited:
		return true, p.err
	default:
		return false, nil
	}
}

// status fetches /status.
func (p *proc) status(ctx context.Context) (status.Snapshot, error) {
	var st status.Snapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("bench: /status: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// reportedCounters are the sidecar counters a run reports (those the
// binary exports): where the remote EVENT bytes went.
var reportedCounters = []string{
	"ngit_sync_negentropy_events_discovered_total",
	"ngit_sync_negentropy_events_fetched_total",
	"ngit_sync_negentropy_fetch_skipped_total",
	"ngit_sync_negentropy_fetch_claim_failed_total",
}

// counters reads reportedCounters from /metrics (nil when it cannot).
func (p *proc) counters(ctx context.Context) map[string]float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range reportedCounters {
			if !strings.HasPrefix(line, name) {
				continue
			}
			sp := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[sp+1:], 64)
			if sp < 0 || err != nil {
				continue
			}
			out[line[:sp]] += v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stop sends SIGTERM, waits for the exit and returns the process's CPU
// time (user + system) and peak resident set size in bytes.
//
// The peak RSS is the process's own high-water mark (/proc/PID/status
// VmHWM, read just before SIGTERM). The rusage of a child is not usable for
// this on Linux: exec records the high-water mark of the memory it
// replaces, and a child forked from this large benchmark process starts out
// sharing its memory, so rusage reports the benchmark's own peak.
func (p *proc) stop() (cpu time.Duration, maxRSS int64, err error) {
	defer p.logf.Close()
	hwm := vmHWM(p.cmd.Process.Pid)
	if done, _ := p.exited(); !done {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(2*stopGrace + 5*time.Second)
		select {
		case <-p.waited:
			t.Stop()
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.waited
			err = fmt.Errorf("bench: sidecar did not stop within %s of SIGTERM", 2*stopGrace+5*time.Second)
		}
	}
	ps := p.cmd.ProcessState
	if ps == nil {
		return 0, 0, fmt.Errorf("bench: sidecar has no exit state: %w", p.err)
	}
	cpu = ps.UserTime() + ps.SystemTime()
	if hwm > 0 {
		maxRSS = hwm
	} else if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		maxRSS = int64(ru.Maxrss) * 1024 // kilobytes on Linux; see above
	}
	if err == nil && p.err != nil {
		err = fmt.Errorf("bench: sidecar exited: %w (log: %s)", p.err, p.logf.Name())
	}
	return cpu, maxRSS, err
}

// waitSettled waits until /status shows w settled on two polls in a row;
// it returns the last status read.
func (p *proc) waitSettled(ctx context.Context, timeout time.Duration, w *world) (status.Snapshot, error) {
	var last status.Snapshot
	stable := 0
	err := p.wait(ctx, timeout, func() bool {
		st, err := p.status(ctx)
		if err != nil {
			return false
		}
		last = st
		if w.settled(st) {
			stable++
		} else {
			stable = 0
		}
		return stable >= 2
	})
	return last, err
}

// wait polls cond every pollInterval until it holds, the process exits,
// timeout passes or ctx ends.
func (p *proc) wait(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if cond() {
			return nil
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("bench: sidecar exited early: %v (log: %s)", err, p.logf.Name())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w within %s", ErrNotConverged, timeout)
		case <-tick.C:
		}
	}
}

// sidecar runs a grasp-sync process against a fresh own relay until the
// relay holds every event. It returns the own relay, still running.
func (w *world) sidecar(ctx context.Context, opts Options, name string, negentropy bool, cpuProfile, memProfile string) (Result, *ownRelay, error) {
	own, err := w.newOwn()
	if err != nil {
		return Result{}, nil, err
	}
	res := Result{Name: name}
	if !negentropy {
		res.Note = "negentropy disabled: REQ paging"
	}
	w.resetStats(own)
	start := time.Now()
	p, err := startSidecar(opts, name, own.URL(), negentropy, cpuProfile, memProfile)
	if err != nil {
		return res, own, err
	}
	waitErr := p.wait(ctx, opts.Timeout, func() bool { return own.gained(w) >= len(w.rest) })
	res.Seconds = time.Since(start).Seconds()
	res.Events = own.gained(w)
	res.Converged = waitErr == nil
	w.collectBytes(&res, own)
	if st, err := p.status(ctx); err == nil {
		res.addRelays(st.Relays)
	}
	res.SidecarMetrics = p.counters(ctx)
	cpu, rss, stopErr := p.stop()
	res.CPUSeconds, res.PeakRSSBytes = cpu.Seconds(), rss
	if waitErr != nil {
		return res, own, fmt.Errorf("bench: %s: %d of %d events: %w", name, res.Events, len(w.rest), waitErr)
	}
	return res, own, stopErr
}

// resync runs a second grasp-sync process on the converged own relay
// ("nothing changed") until every remote relay finished its historic sync
// and nothing is pending or being published.
func (w *world) resync(ctx context.Context, opts Options, own *ownRelay) (Result, error) {
	res := Result{Name: RunResync, Note: "new process on the converged own relay"}
	if own == nil {
		return res, fmt.Errorf("bench: %s needs the converged own relay of %s", RunResync, RunSidecar)
	}
	before := own.gained(w)
	w.resetStats(own)
	start := time.Now()
	mem := ""
	if opts.MemProfile != "" {
		mem = opts.MemProfile + ".resync"
	}
	p, err := startSidecar(opts, RunResync, own.URL(), true, "", mem)
	if err != nil {
		return res, err
	}
	last, waitErr := p.waitSettled(ctx, opts.Timeout, w)
	res.Seconds = time.Since(start).Seconds()
	res.Events = own.gained(w) - before
	res.Converged = waitErr == nil
	w.collectBytes(&res, own)
	res.addRelays(last.Relays)
	cpu, rss, stopErr := p.stop()
	res.CPUSeconds, res.PeakRSSBytes = cpu.Seconds(), rss
	if waitErr != nil {
		return res, fmt.Errorf("bench: %s: %w (last status: %d relays, %d repos, %d roots, %d pending)",
			RunResync, waitErr, len(last.Relays), last.Repositories, last.RootEvents, last.PendingBatches)
	}
	return res, stopErr
}

// settled reports whether a sidecar knows every repository and root event,
// tracks every remote relay, and has finished their historic syncs with
// nothing pending, queued or in flight.
func (w *world) settled(st status.Snapshot) bool {
	if !st.Ready || st.Repositories < len(w.u.Repos) || st.RootEvents < w.roots || len(st.Relays) < len(w.remotes) {
		return false
	}
	if st.PendingBatches > 0 || st.Publisher.Queued > 0 || st.Publisher.InFlight > 0 {
		return false
	}
	for _, r := range st.Relays {
		if r.State != "connected" || r.PendingBatches > 0 || r.ReposPending > 0 || r.RootsPending > 0 {
			return false
		}
	}
	return true
}

// addRelays adds the relays' received and new counts of a /status to res.
func (res *Result) addRelays(rs []status.Relay) {
	for _, r := range rs {
		res.EventsReceived += r.EventsReceived
		res.EventsNew += r.EventsNew
		res.Relays = append(res.Relays, RelayEvents{URL: r.URL, Received: r.EventsReceived, New: r.EventsNew})
	}
}
