package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// stateRuns measures the state directory (issue 15): a first sync with
// --state-dir (its write cost against the memory-only sidecar run), then a
// new process on the converged own relay and the same directory: time to
// ready, bytes with the own relay and the remotes, events sent again.
func (w *world) stateRuns(ctx context.Context, opts Options, record func(Result, error) error) error {
	dir := filepath.Join(opts.WorkDir, "state")
	so := opts
	so.SidecarArgs = append(slices.Clone(opts.SidecarArgs), "--state-dir", dir)
	res, own, err := w.sidecar(ctx, so, RunState, true, "", "")
	if own != nil {
		defer own.Close()
	}
	res.StateBytes = fileSize(filepath.Join(dir, "state.db"))
	res.Note = fmt.Sprintf("--state-dir: store %.1f MB, %.0f bytes/event", float64(res.StateBytes)/1e6,
		float64(res.StateBytes)/float64(max(1, own.Len())))
	if err := record(res, err); err != nil || !opts.wants(RunRestart) {
		return err
	}
	return record(w.restart(ctx, so, own, dir))
}

// restart starts a new process with the state directory on the converged
// own relay and waits until it is ready and every relay settled.
func (w *world) restart(ctx context.Context, opts Options, own *ownRelay, dir string) (Result, error) {
	res := Result{Name: RunRestart, Note: "new process on the converged own relay and its state directory"}
	before := own.gained(w)
	w.resetStats(own)
	start := time.Now()
	p, err := startSidecar(opts, RunRestart, own.URL(), true, "", "")
	if err != nil {
		return res, err
	}
	client := &http.Client{Timeout: time.Second}
	readyErr := p.wait(ctx, opts.Timeout, func() bool {
		resp, err := client.Get(p.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	res.ReadySeconds = time.Since(start).Seconds()
	var last status.Snapshot
	waitErr := readyErr
	if waitErr == nil {
		last, waitErr = p.waitSettled(ctx, opts.Timeout, w)
	}
	res.Seconds = time.Since(start).Seconds()
	res.Events = own.gained(w) - before
	res.Converged = waitErr == nil
	w.collectBytes(&res, own)
	res.Republished = own.Stats().Events
	if in := last.State.InUse; last.State.Events > 0 {
		per := func(b int64) float64 { return float64(b) / float64(last.State.Events) }
		res.Note += fmt.Sprintf("; store in use per local-index event: local index %.0f B, relays %.0f B, repos %.0f B, heads %.0f B (file %.0f B)",
			per(in["local"]), per(in["relays"]), per(in["repos"]), per(in["heads"]), last.State.BytesPerEvent)
	}
	res.addRelays(last.Relays)
	cpu, rss, stopErr := p.stop()
	res.CPUSeconds, res.PeakRSSBytes = cpu.Seconds(), rss
	res.StateBytes = fileSize(filepath.Join(dir, "state.db"))
	if waitErr != nil {
		return res, fmt.Errorf("bench: %s: %w (last status: %d relays, %d repos, %d roots, %d pending)",
			RunRestart, waitErr, len(last.Relays), last.Repositories, last.RootEvents, last.PendingBatches)
	}
	return res, stopErr
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
