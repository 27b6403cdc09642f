// Package bench is the end-to-end benchmark behind `grasp-sync-demo bench`.
//
// On 127.0.0.1 only, it starts R remote khatru relays (harness relays:
// NIP-77 on, strfry-like REQ cap of 500) holding a generated universe of N
// NIP-34 repositories with E events, and an own relay (GRASP-like policy)
// that already hosts the repositories' announcements. It then measures, one
// after the other:
//
//   - own-relay-ingest: the own relay's ingest rate alone (one connection,
//     the sidecar's publish window, events in created_at order);
//   - sidecar: a grasp-sync process syncing a fresh own relay until it holds
//     every event (wall time, events/s, wire bytes, CPU seconds, peak RSS);
//   - sidecar-resync: a second grasp-sync process on the converged own
//     relay, until every relay finished its historic sync ("nothing
//     changed");
//   - sidecar-req-only: the first run with negentropy disabled (REQ paging);
//   - baseline: the simplest relay-to-relay copy, per remote a NIP-77 diff
//     against the own relay's events, REQ of the missing ids in batches of
//     500 and publishing them (the naive copy);
//   - strfry-sync (with Options.Strfry, where every relay is a strfry
//     process): strfry's own `strfry sync --dir down`, the peer to beat.
//
// The sidecar runs as a separate process (the grasp-sync binary, `run`
// subcommand) so its CPU and memory are its own: CPU seconds come from the
// process's rusage, peak RSS from its maximum resident set size. Wire bytes
// are WebSocket payload bytes counted by the harness relays' proxies.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Profile is the size of a benchmark universe.
type Profile struct {
	// Name identifies the profile in reports.
	Name string `json:"name"`
	// Events is the total number of events (announcements included).
	Events int `json:"events"`
	// Relays is the number of remote relays.
	Relays int `json:"relays"`
	// Repos is the number of repositories.
	Repos int `json:"repos"`
	// Forge shapes the events like a busy forge (harness
	// UniverseOptions.Forge): half roots, half discussion under them.
	Forge bool `json:"forge,omitempty"`
}

// Profiles are the named profiles of issue 8, plus "one-relay" (the
// issue-5 historic sync of 100,000 events from a single relay) and
// "forge" (issue 16: half the events roots, half discussion under them).
var Profiles = map[string]Profile{
	"small":     {Name: "small", Events: 10_000, Relays: 3, Repos: 200},
	"medium":    {Name: "medium", Events: 100_000, Relays: 10, Repos: 2_000},
	"large":     {Name: "large", Events: 1_000_000, Relays: 20, Repos: 10_000},
	"one-relay": {Name: "one-relay", Events: 100_000, Relays: 1, Repos: 2_000},
	"forge":     {Name: "forge", Events: 10_000, Relays: 5, Repos: 100, Forge: true},
}

// Resized returns p with the given sizes in place of its own (zero keeps
// a size), named "<name>-custom" when anything changed.
func (p Profile) Resized(events, relays, repos int) Profile {
	q := p
	if events > 0 {
		q.Events = events
	}
	if relays > 0 {
		q.Relays = relays
	}
	if repos > 0 {
		q.Repos = repos
	}
	if q != p {
		q.Name = p.Name + "-custom"
	}
	return q
}

// ProfileNames returns the names of Profiles, sorted by size.
func ProfileNames() []string {
	names := make([]string, 0, len(Profiles))
	for n := range Profiles {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := Profiles[names[i]], Profiles[names[j]]
		if a.Events != b.Events {
			return a.Events < b.Events
		}
		return a.Relays > b.Relays
	})
	return names
}

// Run names, in the order they are measured.
const (
	RunIngest  = "own-relay-ingest"
	RunSidecar = "sidecar"
	RunResync  = "sidecar-resync"
	// RunState is the sidecar run with a state directory; RunRestart a new
	// process on its converged own relay and its state directory.
	RunState    = "sidecar-state"
	RunRestart  = "state-restart"
	RunReqOnly  = "sidecar-req-only"
	RunBaseline = "baseline"
	// RunStrfrySync is strfry's own `strfry sync --dir down` from every
	// remote (concurrently) into a fresh own strfry: only with
	// Options.Strfry.
	RunStrfrySync = "strfry-sync"
)

// AllRuns lists every run in measurement order.
var AllRuns = []string{RunIngest, RunSidecar, RunResync, RunState, RunRestart, RunReqOnly, RunBaseline, RunStrfrySync}

// Defaults of Options.
const (
	DefaultSeed    = 8
	DefaultTimeout = 10 * time.Minute
	DefaultWindow  = 200 // the sidecar's default publisher window
)

// ErrNotConverged is returned (wrapped) when a run did not reach its goal
// before Options.Timeout.
var ErrNotConverged = errors.New("bench: run did not converge")

// Options configure a benchmark.
type Options struct {
	Profile Profile
	// Seed makes the universe deterministic; default DefaultSeed.
	Seed uint64
	// Binary is the grasp-sync executable run as the sidecar. Required
	// when a sidecar run is selected.
	Binary string
	// WorkDir receives the sidecars' logs; default a new temporary
	// directory, removed afterwards.
	WorkDir string
	// Runs selects runs by name (AllRuns); empty means all. The resync run
	// needs the sidecar run.
	Runs []string
	// Timeout bounds each run; default DefaultTimeout.
	Timeout time.Duration
	// BatchWindow, when set, is the sidecar's sync.batch_window (the
	// self-subscriber batch window); 0 leaves the sidecar's default, as
	// every other setting: the bench measures what operators run.
	BatchWindow time.Duration
	// Delay is the one-way latency of every remote relay (harness
	// Faults.Latency; in front of a strfry, a netdelay proxy): remotes
	// Delay away, a round trip 2×Delay. The own relay stays local, beside
	// the sidecar. 0: loopback.
	Delay time.Duration
	// Window is the publish window of own-relay-ingest and the baseline;
	// default DefaultWindow.
	Window int
	// SidecarArgs are extra flags for `grasp-sync run` (e.g.
	// "--limits.relay-event-rate=100000").
	SidecarArgs []string
	// CPUProfile, when set, makes the sidecar run write a Go CPU profile to
	// this file (the sidecar is started as `grasp-sync run --cpuprofile
	// FILE`).
	CPUProfile string
	// MemProfile, when set, makes the sidecar run write Go heap profiles:
	// MemProfile (live heap at exit, and allocations) and MemProfile.peak
	// (near the highest heap); the resync run writes MemProfile.resync and
	// MemProfile.resync.peak.
	MemProfile string
	// Strfry, when set, is the path of a strfry binary: the remote relays
	// and the own relays are strfry processes (strfry's defaults that
	// matter to a sync peer: REQ cap 500, NIP-77 on; the own relay has no
	// write policy) loaded with `strfry import`, in place of the test
	// kit's khatru relays, and the strfry-sync run is possible. Wire bytes
	// are not counted (strfry has no counting proxy in front; Delay puts a
	// TCP one, netdelay, in front of each remote strfry).
	Strfry string
	// Progress receives one line per phase; nil discards.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Profile.Events < 2*o.Profile.Repos || o.Profile.Repos < 1 || o.Profile.Relays < 1 {
		return fmt.Errorf("bench: profile needs repos >= 1, relays >= 1, events >= 2*repos (got %+v)", o.Profile)
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if len(o.Runs) == 0 {
		o.Runs = AllRuns
		if o.Strfry == "" {
			o.Runs = AllRuns[:len(AllRuns)-1]
		}
	}
	if o.wants(RunStrfrySync) && o.Strfry == "" {
		return fmt.Errorf("bench: run %s needs a strfry binary (Options.Strfry)", RunStrfrySync)
	}
	for _, r := range o.Runs {
		if !contains(AllRuns, r) {
			return fmt.Errorf("bench: unknown run %q (want one of %s)", r, strings.Join(AllRuns, ", "))
		}
	}
	if o.wants(RunResync) && !o.wants(RunSidecar) {
		return fmt.Errorf("bench: run %s needs run %s", RunResync, RunSidecar)
	}
	if o.wants(RunRestart) && !o.wants(RunState) {
		return fmt.Errorf("bench: run %s needs run %s", RunRestart, RunState)
	}
	if (o.wants(RunSidecar) || o.wants(RunReqOnly) || o.wants(RunState)) && o.Binary == "" {
		return errors.New("bench: Options.Binary (the grasp-sync executable) is required for sidecar runs")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

func (o *Options) wants(run string) bool { return contains(o.Runs, run) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Result is one measured run.
type Result struct {
	Name string `json:"name"`
	// Converged is false when the run timed out; the other figures then
	// describe the partial run.
	Converged bool `json:"converged"`
	// Events is the number of events the own relay gained.
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// Wire bytes from the syncing client's point of view (WebSocket
	// payloads), to the remote relays and to the own relay.
	RemoteSent     int64 `json:"remote_bytes_sent"`
	RemoteReceived int64 `json:"remote_bytes_received"`
	OwnSent        int64 `json:"own_bytes_sent"`
	OwnReceived    int64 `json:"own_bytes_received"`
	// RemoteSentByType and RemoteReceivedByType split RemoteSent and
	// RemoteReceived by message type (REQ, NEG-OPEN, EVENT, ...).
	RemoteSentByType     map[string]int64 `json:"remote_bytes_sent_by_type,omitempty"`
	RemoteReceivedByType map[string]int64 `json:"remote_bytes_received_by_type,omitempty"`
	// RemoteNegOpenMsg is the part of the NEG-OPEN bytes that is the
	// initial negentropy message (the rest is filters).
	RemoteNegOpenMsg int64 `json:"remote_neg_open_msg_bytes,omitempty"`
	// RemoteRequestsMax is the most requests (REQ, NEG-OPEN, AUTH) one
	// remote relay received, what its request budget
	// (health.request_burst, health.request_rate) has to cover.
	RemoteRequestsMax int `json:"remote_requests_max,omitempty"`
	// BytesPerEvent is all wire bytes divided by Options.Profile.Events.
	BytesPerEvent float64 `json:"bytes_per_event"`
	// Sidecar process figures (sidecar runs only).
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
	// EventsReceived is the sum of the sidecar's per-relay received counts
	// (duplicates across relays included).
	EventsReceived uint64 `json:"events_received,omitempty"`
	// EventsNew is the sum of the events that were new when they came
	// from a relay (the sidecar's /status events_new): EventsReceived less
	// what was asked for again or had from another relay first.
	EventsNew uint64 `json:"events_new,omitempty"`
	// Relays are each remote relay's received and new counts.
	Relays []RelayEvents `json:"relays,omitempty"`
	// CPUPerEventMicros is CPUSeconds over the profile's events;
	// CPUPerEventExclVerifyMicros subtracts the estimated signature
	// verification (Report.VerifyMicros × Events: one check per new event).
	CPUPerEventMicros           float64 `json:"cpu_per_event_us,omitempty"`
	CPUPerEventExclVerifyMicros float64 `json:"cpu_per_event_excl_verify_us,omitempty"`
	// Retried counts events the simple copy had to publish again after the
	// own relay refused them for arriving before what they reference.
	// BenchCPUSeconds is the benchmark process's own CPU time over the run
	// (rusage of self: the in-process remote and own relays, the copy of
	// own-relay-ingest): with the sidecar's, whether a run was bound by
	// the machine's cores.
	BenchCPUSeconds float64 `json:"bench_cpu_seconds,omitempty"`
	// SidecarMetrics are a few of the sidecar's counters at the end of the
	// run (name{labels} → value), those the binary exports.
	SidecarMetrics map[string]float64 `json:"sidecar_metrics,omitempty"`
	Retried        int                `json:"retried,omitempty"`
	Note           string             `json:"note,omitempty"`
	// State-directory runs: the store file's size after the run, the time
	// until /readyz (restart), and the events the own relay was sent again
	// (restart; EVENT messages it received).
	StateBytes   int64   `json:"state_bytes,omitempty"`
	ReadySeconds float64 `json:"ready_seconds,omitempty"`
	Republished  int     `json:"republished,omitempty"`
}

// WireBytes is the sum of every byte counter.
func (r Result) WireBytes() int64 {
	return r.RemoteSent + r.RemoteReceived + r.OwnSent + r.OwnReceived
}

// RelayEvents is what one remote relay sent the sidecar: events received
// and, of them, new when they came (/status events_received, events_new).
type RelayEvents struct {
	URL      string `json:"url"`
	Received uint64 `json:"received"`
	New      uint64 `json:"new"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memory_gib"`
	OS        string `json:"os"`
	GoVersion string `json:"go_version"`
}

// Report is the whole benchmark result.
type Report struct {
	Profile Profile `json:"profile"`
	Seed    uint64  `json:"seed"`
	// Delay is Options.Delay: the remote relays' one-way latency.
	Delay   time.Duration `json:"delay_ns,omitempty"`
	Machine Machine       `json:"machine"`
	Started time.Time     `json:"started"`
	// Repos and Roots describe the generated universe; Expected is the
	// number of events the own relay must gain (all but announcements).
	Repos    int `json:"repos"`
	Roots    int `json:"roots"`
	Expected int `json:"expected"`
	// GenerateSeconds is the time to generate and sign the universe.
	GenerateSeconds float64 `json:"generate_seconds"`
	// VerifyMicros is the measured cost of one signature check (go-nostr
	// CheckSignature, this binary's build) on a sample of the universe.
	VerifyMicros float64  `json:"verify_us"`
	Runs         []Result `json:"runs"`
	Goals        []Goal   `json:"goals"`
}

// Run returns the result named name, if measured.
func (r *Report) Run(name string) (Result, bool) {
	for _, x := range r.Runs {
		if x.Name == name {
			return x, true
		}
	}
	return Result{}, false
}

// Run performs the benchmark. It returns the report of the runs measured
// so far together with an error when a run failed or did not converge.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "grasp-sync-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	rep := &Report{Profile: opts.Profile, Seed: opts.Seed, Delay: opts.Delay, Machine: describeMachine(), Started: time.Now().UTC()}
	p := opts.Progress

	fmt.Fprintf(p, "bench %s: %d events, %d repositories, %d remote relays (127.0.0.1 only, %s one-way delay)\n",
		opts.Profile.Name, opts.Profile.Events, opts.Profile.Repos, opts.Profile.Relays, opts.Delay)
	start := time.Now()
	w, err := newWorld(opts)
	if err != nil {
		return rep, err
	}
	defer w.close()
	rep.GenerateSeconds = time.Since(start).Seconds()
	rep.Repos, rep.Roots, rep.Expected = len(w.u.Repos), w.roots, len(w.rest)
	rep.VerifyMicros = measureVerify(w.rest)
	fmt.Fprintf(p, "  universe generated and loaded in %.1fs (%d root events; %d events to sync); signature check %.1f µs/event\n",
		rep.GenerateSeconds, w.roots, len(w.rest), rep.VerifyMicros)

	// mark is the benchmark's CPU time when the current run began.
	mark := selfCPU()
	record := func(res Result, err error) error {
		now := selfCPU()
		res.BenchCPUSeconds, mark = (now - mark).Seconds(), now
		if res.Name != "" {
			finish(&res, rep, opts.Profile.Events)
			rep.Runs = append(rep.Runs, res)
			fmt.Fprintf(p, "  %-18s %s\n", res.Name, res.summary())
		}
		return err
	}
	var own *ownRelay
	defer func() {
		if own != nil {
			own.Close()
		}
	}()
	if opts.wants(RunIngest) {
		mark = selfCPU()
		if err := record(w.ingest(ctx, opts)); err != nil {
			return rep, err
		}
	}
	if opts.wants(RunSidecar) {
		mark = selfCPU()
		var res Result
		res, own, err = w.sidecar(ctx, opts, RunSidecar, true, opts.CPUProfile, opts.MemProfile)
		if err := record(res, err); err != nil {
			return rep, err
		}
	}
	if opts.wants(RunResync) {
		mark = selfCPU()
		if err := record(w.resync(ctx, opts, own)); err != nil {
			return rep, err
		}
	}
	if own != nil {
		own.Close()
		own = nil
	}
	if opts.wants(RunState) {
		mark = selfCPU()
		if err := w.stateRuns(ctx, opts, record); err != nil {
			return rep, err
		}
	}
	if opts.wants(RunReqOnly) {
		mark = selfCPU()
		res, o, err := w.sidecar(ctx, opts, RunReqOnly, false, "", "")
		if o != nil {
			o.Close()
		}
		if err := record(res, err); err != nil {
			return rep, err
		}
	}
	if opts.wants(RunBaseline) {
		mark = selfCPU()
		if err := record(w.baseline(ctx, opts)); err != nil {
			return rep, err
		}
	}
	if opts.wants(RunStrfrySync) {
		mark = selfCPU()
		if err := record(w.strfrySync(ctx, opts)); err != nil {
			return rep, err
		}
	}
	rep.Goals = evaluateGoals(rep)
	return rep, nil
}

// finish fills the derived figures of res.
func finish(res *Result, rep *Report, events int) {
	if res.Seconds > 0 {
		res.EventsPerSec = float64(res.Events) / res.Seconds
	}
	if events > 0 {
		res.BytesPerEvent = float64(res.WireBytes()) / float64(events)
	}
	if res.CPUSeconds > 0 && events > 0 {
		res.CPUPerEventMicros = res.CPUSeconds * 1e6 / float64(events)
		// the handler checks the seen set before verifying, so each event
		// is verified about once however many relays sent it (the CPU
		// profile of the medium run agrees within 1 %)
		verify := rep.VerifyMicros * float64(res.Events)
		res.CPUPerEventExclVerifyMicros = max(0, (res.CPUSeconds*1e6-verify)/float64(events))
	}
}

func (r Result) summary() string {
	s := fmt.Sprintf("%d events in %.2fs (%.0f ev/s), wire %.1f MB (%.0f B/event)",
		r.Events, r.Seconds, r.EventsPerSec, float64(r.WireBytes())/1e6, r.BytesPerEvent)
	if r.CPUSeconds > 0 {
		s += fmt.Sprintf(", CPU %.2fs (%.1f µs/event, %.1f excl. verify), peak RSS %.0f MiB",
			r.CPUSeconds, r.CPUPerEventMicros, r.CPUPerEventExclVerifyMicros, float64(r.PeakRSSBytes)/(1<<20))
	}
	if r.BenchCPUSeconds > 0 {
		s += fmt.Sprintf(", bench process CPU %.2fs", r.BenchCPUSeconds)
	}
	if !r.Converged {
		s += " — NOT CONVERGED"
	}
	if r.Note != "" {
		s += " (" + r.Note + ")"
	}
	return s
}

func describeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
			}
		}
		m.MemoryGiB = (kb + 1<<19) >> 20
	}
	return m
}
