//go:build linux

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/bench"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// limitFileSize sets the file-size limit (RLIMIT_FSIZE, soft and hard) of
// the running process pid to max bytes, as `prlimit --pid PID --fsize=N`
// does: from then on a write that would end beyond max bytes of a file
// fails with EFBIG (Go ignores the SIGXFSZ that comes with it).
func limitFileSize(pid int, max uint64) error {
	lim := syscall.Rlimit{Cur: max, Max: max}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("prlimit(%d, RLIMIT_FSIZE, %d): %w", pid, max, errno)
	}
	return nil
}

// TestStateWritesFailingAlertFires: a real grasp-sync process whose state
// store stops being writable (its file-size limit lowered below the store's
// size once it has written the store, as a full disk would) counts the
// failed flushes, and the real Prometheus scraping it fires
// GraspSyncStateWritesFailing (deploy/prometheus/alerts.yml, fastRules).
// Prometheus sees the error series at 0 before the first failure, as it
// would in production.
func TestStateWritesFailingAlertFires(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	prometheusBinary(t) // skips before the build when there is none
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bench.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	own := ownRelay(t)
	alice := signed.NewKey()
	mustPublish(t, own, repoFor(alice, "proj", own))
	stateDir := t.TempDir()
	p := startBinaryOn(t, bin, freeListen(t), "sidecar.log",
		"--own-relay", own.URL(), "--dial.allow", "127.0.0.0/8", "--git-dir", t.TempDir(),
		"--state-dir", stateDir, "--state.flush-interval", "100ms",
		"--health.tick", "200ms", "--shutdown-grace", "2s", "--log.level", "warn")
	base := startPrometheus(t, fastRules(t, t.TempDir()), strings.TrimPrefix(p.base, "http://"))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the sidecar exports and what Prometheus saw of it.
		if resp, err := http.Get(p.base + "/metrics"); err != nil {
			t.Logf("sidecar /metrics: %v", err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "ngit_sync_state_flushes_total") || strings.HasPrefix(l, "ngit_sync_ready") {
					t.Logf("sidecar: %s", l)
				}
			}
		}
		for _, q := range []string{`up`, `ngit_sync_state_flushes_total`} {
			res, err := promQuery(t, base, q)
			t.Logf("prometheus %s: %v %v", q, res, err)
		}
	})

	// Prometheus has scraped a successful flush and no failed one.
	testkit.WaitFor(t, 60*time.Second, "Prometheus seeing a successful state flush and no failed one", func() bool {
		ok, err1 := promQuery(t, base, `ngit_sync_state_flushes_total{job="grasp-sync",result="ok"} > 0`)
		bad, err2 := promQuery(t, base, `ngit_sync_state_flushes_total{job="grasp-sync",result="error"} == 0`)
		return err1 == nil && err2 == nil && len(ok) == 1 && len(bad) == 1
	})
	if st := alertStates(t, base); st["GraspSyncStateWritesFailing"] != "" {
		t.Fatalf("GraspSyncStateWritesFailing is %q before any failed write", st["GraspSyncStateWritesFailing"])
	}
	info, err := os.Stat(filepath.Join(stateDir, statestore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// Below the file's size, so every page write past the first fails.
	if err := limitFileSize(p.cmd.Process.Pid, 4096); err != nil {
		t.Fatal(err)
	}
	t.Logf("state file %d bytes; file-size limit now 4096", info.Size())

	// Something to write: new events on the own relay enter the local
	// index, whose journal the next flush writes.
	addr := alice.RepoAddress("proj")
	for i := 0; i < 3; i++ {
		mustPublish(t, own, alice.Issue(addr, fmt.Sprintf("issue %d", i)))
	}
	var last map[string]string
	testkit.WaitFor(t, 60*time.Second, "GraspSyncStateWritesFailing firing", func() bool {
		last = alertStates(t, base)
		return last["GraspSyncStateWritesFailing"] == "firing"
	})
	mfs := scrapeFamilies(t, p.base)
	if !hasSeries(mfs, seriesRef{Name: "ngit_sync_state_flushes_total", Equals: map[string]string{"result": "error"}}) {
		t.Fatal("no ngit_sync_state_flushes_total{result=\"error\"}")
	}
	for _, m := range mfs["ngit_sync_state_flushes_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "error" && m.GetCounter().GetValue() < 1 {
			t.Errorf("state_flushes_total{result=\"error\"} = %v, want the failed writes counted", m.GetCounter().GetValue())
		}
	}
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "file too large") {
		t.Errorf("the log does not say why the state writes fail (file too large):\n%s", tail(string(b), 3000))
	}
	t.Logf("alert states: %v", last)
}
