package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// Goal thresholds of issue 8, tightened by issue 16 (the sidecar no longer
// checks the signatures the own relay checks: its CPU per event counts
// everything, and it keeps the own relay's ingest saturated).
const (
	GoalEventsPerSec      = 5000
	GoalIngestRatio       = 0.9
	GoalCPUPerEventMicros = 60
	GoalPeakRSSBytes      = 150 << 20
	GoalResyncSeconds     = 5
	GoalResyncBytesRatio  = 0.01
	GoalBaselineRatio     = 1.5
)

// Goal is one issue-8 goal with the measured figure.
type Goal struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// evaluateGoals compares the measured runs with the issue-8 goals (those
// whose runs were measured).
func evaluateGoals(rep *Report) []Goal {
	var goals []Goal
	sc, haveSC := rep.Run(RunSidecar)
	if haveSC {
		g := Goal{Name: "convergence rate", Target: fmt.Sprintf(">= %d events/s or >= %.0f%% of own-relay-ingest", GoalEventsPerSec, 100*GoalIngestRatio),
			Measured: fmt.Sprintf("%.0f events/s", sc.EventsPerSec)}
		g.Met = sc.EventsPerSec >= GoalEventsPerSec
		if ing, ok := rep.Run(RunIngest); ok {
			g.Measured += fmt.Sprintf(" (own relay ingest alone %.0f events/s, %.0f%%)", ing.EventsPerSec, 100*sc.EventsPerSec/ing.EventsPerSec)
			if !g.Met && sc.EventsPerSec >= GoalIngestRatio*ing.EventsPerSec {
				g.Met = true
				g.Measured += ": ingest-bound"
			}
		}
		goals = append(goals,
			g,
			Goal{Name: "sidecar CPU per event, everything included", Target: fmt.Sprintf("<= %d µs", GoalCPUPerEventMicros),
				Measured: fmt.Sprintf("%.1f µs", sc.CPUPerEventMicros),
				Met:      sc.CPUPerEventMicros <= GoalCPUPerEventMicros},
			Goal{Name: "sidecar peak RSS", Target: fmt.Sprintf("<= %d MiB", GoalPeakRSSBytes>>20),
				Measured: fmt.Sprintf("%.0f MiB", float64(sc.PeakRSSBytes)/(1<<20)),
				Met:      sc.PeakRSSBytes <= GoalPeakRSSBytes},
		)
	}
	if rs, ok := rep.Run(RunResync); ok && haveSC {
		ratio := float64(rs.WireBytes()) / float64(max(1, sc.WireBytes()))
		remoteRatio := float64(rs.RemoteSent+rs.RemoteReceived) / float64(max(1, sc.RemoteSent+sc.RemoteReceived))
		goals = append(goals,
			Goal{Name: "nothing-changed re-sync time", Target: fmt.Sprintf("< %d s", GoalResyncSeconds),
				Measured: fmt.Sprintf("%.2f s", rs.Seconds), Met: rs.Seconds < GoalResyncSeconds},
			Goal{Name: "nothing-changed re-sync bytes", Target: fmt.Sprintf("<= %.0f%% of the first run", 100*GoalResyncBytesRatio),
				Measured: fmt.Sprintf("%.2f%% of all bytes (%.2f%% of remote-relay bytes; own relay read back %.1f MB)",
					100*ratio, 100*remoteRatio, float64(rs.OwnReceived)/1e6),
				Met: ratio <= GoalResyncBytesRatio},
		)
	}
	if rs, ok := rep.Run(RunResync); ok {
		if ro, ok := rep.Run(RunReqOnly); ok && ro.RemoteSent+ro.RemoteReceived > 0 {
			// Issue 5: a nothing-changed re-sync against a full REQ
			// re-download of the same set (the REQ-only run's remote bytes).
			ratio := float64(rs.RemoteSent+rs.RemoteReceived) / float64(ro.RemoteSent+ro.RemoteReceived)
			goals = append(goals, Goal{Name: "re-sync remote bytes vs full REQ re-download", Target: fmt.Sprintf("<= %.0f%%", 100*GoalResyncBytesRatio),
				Measured: fmt.Sprintf("%.2f%% (%.2f MB vs %.1f MB)", 100*ratio, float64(rs.RemoteSent+rs.RemoteReceived)/1e6, float64(ro.RemoteSent+ro.RemoteReceived)/1e6),
				Met:      ratio <= GoalResyncBytesRatio})
			// The reconciliation exchange alone: NEG-OPEN initial messages,
			// NEG-MSGs both ways, NEG-CLOSEs, without the filters.
			neg := rs.RemoteNegOpenMsg + rs.RemoteSentByType["NEG-MSG"] + rs.RemoteReceivedByType["NEG-MSG"] +
				rs.RemoteSentByType["NEG-CLOSE"] + rs.RemoteReceivedByType["NEG-ERR"]
			nratio := float64(neg) / float64(ro.RemoteSent+ro.RemoteReceived)
			goals = append(goals, Goal{Name: "re-sync negentropy exchange (no filters) vs full REQ re-download", Target: fmt.Sprintf("<= %.0f%%", 100*GoalResyncBytesRatio),
				Measured: fmt.Sprintf("%.2f%% (%.2f MB)", 100*nratio, float64(neg)/1e6), Met: nratio <= GoalResyncBytesRatio})
		}
	}
	goals = append(goals, stateGoals(rep)...)
	if bl, ok := rep.Run(RunBaseline); ok && haveSC && bl.Seconds > 0 {
		ratio := sc.Seconds / bl.Seconds
		goals = append(goals, Goal{Name: "sidecar vs plain relay-to-relay copy", Target: fmt.Sprintf("<= %.1f× wall time", GoalBaselineRatio),
			Measured: fmt.Sprintf("%.2f× (%.2f s vs %.2f s)", ratio, sc.Seconds, bl.Seconds), Met: ratio <= GoalBaselineRatio})
	}
	return goals
}

// WriteTable prints the report as text tables.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "profile %s: %d events (%d to sync), %d repositories, %d root events, %d remote relays, seed %d\n",
		rep.Profile.Name, rep.Profile.Events, rep.Expected, rep.Repos, rep.Roots, rep.Profile.Relays, rep.Seed)
	if rep.Delay > 0 {
		fmt.Fprintf(w, "remote relays %s away (one-way latency; a round trip %s)\n", rep.Delay, 2*rep.Delay)
	}
	fmt.Fprintf(w, "machine: %s, %d cores, %d GiB, %s, %s; signature check %.1f µs/event\n\n",
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.MemoryGiB, rep.Machine.OS, rep.Machine.GoVersion, rep.VerifyMicros)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tevents\tseconds\tevents/s\tremote MB out/in\town MB out/in\tbytes/event\tCPU s\tCPU µs/ev\texcl. verify\tpeak RSS MiB\tbench CPU s\t")
	for _, r := range rep.Runs {
		cpu, per, excl, rss, bcpu := "-", "-", "-", "-", "-"
		if r.BenchCPUSeconds > 0 {
			bcpu = fmt.Sprintf("%.2f", r.BenchCPUSeconds)
		}
		if r.CPUSeconds > 0 {
			cpu = fmt.Sprintf("%.2f", r.CPUSeconds)
			per = fmt.Sprintf("%.1f", r.CPUPerEventMicros)
			excl = fmt.Sprintf("%.1f", r.CPUPerEventExclVerifyMicros)
			rss = fmt.Sprintf("%.0f", float64(r.PeakRSSBytes)/(1<<20))
		}
		name := r.Name
		if !r.Converged {
			name += " (NOT CONVERGED)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.2f/%.2f\t%.2f/%.2f\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n",
			name, r.Events, r.Seconds, r.EventsPerSec,
			float64(r.RemoteSent)/1e6, float64(r.RemoteReceived)/1e6, float64(r.OwnSent)/1e6, float64(r.OwnReceived)/1e6,
			r.BytesPerEvent, cpu, per, excl, rss, bcpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nremote bytes by message type (sent / received):")
	for _, r := range rep.Runs {
		fmt.Fprintf(w, "  %s: %s / %s\n", r.Name, byType(r.RemoteSentByType), byType(r.RemoteReceivedByType))
	}
	fmt.Fprintln(w, "\nevents each remote relay sent the sidecar: received / new when they came:")
	for _, r := range rep.Runs {
		if r.EventsReceived > 0 {
			fmt.Fprintf(w, "  %s: %s\n", r.Name, relayEvents(r))
		}
	}
	fmt.Fprintln(w, "\nmost requests (REQ, NEG-OPEN, AUTH) one remote relay received:")
	for _, r := range rep.Runs {
		if r.RemoteRequestsMax > 0 {
			fmt.Fprintf(w, "  %s: %d\n", r.Name, r.RemoteRequestsMax)
		}
	}
	for _, r := range rep.Runs {
		if len(r.SidecarMetrics) > 0 {
			fmt.Fprintf(w, "  %s sidecar counters: %s\n", r.Name, metricList(r.SidecarMetrics))
		}
	}
	if len(rep.Goals) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "goal\ttarget\tmeasured\tmet")
	for _, g := range rep.Goals {
		met := "no"
		if g.Met {
			met = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Name, g.Target, g.Measured, met)
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteJSONFile writes the report as JSON to the file at path.
func (rep *Report) WriteJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return f.Close()
}

// byType formats a per-message-type byte count, largest first.
func byType(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.3f MB", k, float64(m[k])/1e6)
	}
	return strings.Join(parts, ", ")
}

// Issue 15 goals of a restart on the state directory.
const (
	GoalRestartReadySeconds = 1
	GoalRestartBytesRatio   = 0.01
)

// stateGoals compares the state-directory runs with issue 15's goals and
// reports the store's write cost against the memory-only run.
func stateGoals(rep *Report) []Goal {
	st, ok := rep.Run(RunState)
	if !ok {
		return nil
	}
	var goals []Goal
	if sc, ok := rep.Run(RunSidecar); ok && sc.Seconds > 0 && sc.CPUSeconds > 0 {
		goals = append(goals, Goal{Name: "state directory write cost in a first sync (vs memory-only)", Target: "reported",
			Measured: fmt.Sprintf("time %.2f× (%.2f s vs %.2f s), CPU %.2f× (%.2f s vs %.2f s); store %.1f MB, %.0f bytes/event",
				st.Seconds/sc.Seconds, st.Seconds, sc.Seconds, st.CPUSeconds/sc.CPUSeconds, st.CPUSeconds, sc.CPUSeconds,
				float64(st.StateBytes)/1e6, float64(st.StateBytes)/float64(max(1, rep.Profile.Events))),
			Met: true})
	}
	rs, ok := rep.Run(RunRestart)
	if !ok {
		return goals
	}
	own := float64(rs.OwnSent+rs.OwnReceived) / float64(max(1, st.OwnSent+st.OwnReceived))
	remote := float64(rs.RemoteSent+rs.RemoteReceived) / float64(max(1, st.RemoteSent+st.RemoteReceived))
	return append(goals,
		Goal{Name: "restart on the state directory: ready", Target: fmt.Sprintf("<= %d s", GoalRestartReadySeconds),
			Measured: fmt.Sprintf("%.2f s (settled %.2f s)", rs.ReadySeconds, rs.Seconds), Met: rs.ReadySeconds <= GoalRestartReadySeconds},
		Goal{Name: "restart: bytes with the own relay vs first sync", Target: fmt.Sprintf("<= %.0f%%", 100*GoalRestartBytesRatio),
			Measured: fmt.Sprintf("%.3f%% (%.1f kB)", 100*own, float64(rs.OwnSent+rs.OwnReceived)/1e3), Met: own <= GoalRestartBytesRatio},
		Goal{Name: "restart: bytes with the remotes vs first sync", Target: fmt.Sprintf("<= %.0f%%", 100*GoalRestartBytesRatio),
			Measured: fmt.Sprintf("%.2f%% (%.2f MB; REQ %.2f MB, NEG-OPEN %.2f MB)", 100*remote, float64(rs.RemoteSent+rs.RemoteReceived)/1e6,
				float64(rs.RemoteSentByType["REQ"])/1e6, float64(rs.RemoteSentByType["NEG-OPEN"])/1e6),
			Met: remote <= GoalRestartBytesRatio},
		Goal{Name: "restart: events published again", Target: "0",
			Measured: fmt.Sprintf("%d", rs.Republished), Met: rs.Republished == 0},
	)
}

// metricList prints counters as name{labels}=value, sorted.
func metricList(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.0f", k, m[k])
	}
	return strings.Join(parts, " ")
}

// relayEvents renders a run's events received and new, in all and per
// relay (by port: the relays are local), with received over new.
func relayEvents(r Result) string {
	ratio := func(recv, fresh uint64) string {
		if fresh == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", float64(recv)/float64(fresh))
	}
	parts := []string{fmt.Sprintf("all %d / %d (%s)", r.EventsReceived, r.EventsNew, ratio(r.EventsReceived, r.EventsNew))}
	for _, re := range r.Relays {
		name := re.URL
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[i:]
		}
		parts = append(parts, fmt.Sprintf("%s %d / %d", name, re.Received, re.New))
	}
	return strings.Join(parts, "; ")
}
