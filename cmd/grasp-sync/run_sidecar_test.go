package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// The production engine, wired by run, against a real relay: it becomes
// ready, serves its status and stops cleanly on SIGTERM.
func TestRunRealSidecar(t *testing.T) {
	relayURL := startOwnRelay(t, false)
	h := newHarness(t)
	h.env.newEngine = newSidecarEngine
	addr := freeAddr(t)
	code := make(chan int, 1)
	go func() {
		code <- h.run("run", "--own-relay", relayURL, "--listen", addr, "--log.level", "debug",
			"--sync.batch-window", "50ms", "--health.tick", "50ms")
	}()
	base := "http://" + addr
	testkit.WaitFor(t, 10*time.Second, "/readyz 200", func() bool {
		select {
		case c := <-code:
			t.Fatalf("run exited early with %d:\n%s", c, h.stderr)
		default:
		}
		c, _, err := httpGet(base + "/readyz")
		return err == nil && c == 200
	})
	c, body, err := httpGet(base + "/status")
	if err != nil || c != 200 || !strings.Contains(body, `"url": "`+relayURL+`"`) || !strings.Contains(body, `"ready": true`) {
		t.Errorf("/status: %d %v\n%s", c, err, body)
	}
	_, metrics, _ := httpGet(base + "/metrics")
	if !strings.Contains(metrics, "ngit_sync_build_info{") {
		t.Error("/metrics lacks build info")
	}

	h.signals <- syscall.SIGTERM
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d:\n%s", c, h.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not stop after SIGTERM:\n%s", h.stderr)
	}
	select {
	case c := <-h.exits:
		t.Errorf("exit(%d) called", c)
	default:
	}
}
