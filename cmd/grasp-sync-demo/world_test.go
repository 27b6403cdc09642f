package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/bench"
)

// envRunMain makes the test binary run grasp-sync-demo's main with its
// arguments: the world test starts the command as a process of its own,
// stopped by a real signal.
const envRunMain = "GRASP_SYNC_DEMO_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(run(append([]string{"grasp-sync-demo"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// syncBuffer is an output written by a process and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorldSyncsWithTheRealBinary starts `grasp-sync-demo world`, runs the
// real grasp-sync binary with exactly the arguments it prints, and waits
// for the world to report every event on its own relay; a synced
// repository is served by the sidecar's git server. SIGTERM stops the
// sidecar and SIGINT the world, each exiting 0, and the world's
// temporary directory is gone.
func TestWorldSyncsWithTheRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end, builds grasp-sync")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	timeout := 3 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	bin, err := bench.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// Port 0: the system picks the sidecar's ports, tests run side by side.
	var worldOut, sidecarLog syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("world:\n%s\ngrasp-sync:\n%s", worldOut.String(), sidecarLog.String())
		}
	})
	world := exec.Command(os.Args[0], "world", "--repos", "2", "--listen", "127.0.0.1:0", "--git-http-listen", "127.0.0.1:0")
	world.Env = append(os.Environ(), envRunMain+"=1")
	world.Stdout, world.Stderr = &worldOut, &worldOut
	if err := world.Start(); err != nil {
		t.Fatal(err)
	}
	worldDone := make(chan error, 1)
	go func() { worldDone <- world.Wait() }()
	defer func() {
		_ = world.Process.Kill()
		<-worldDone
	}()
	waitOutput(t, &worldOut, timeout, "the command line", "\n./grasp-sync run ")
	args := commandArgs(t, worldOut.String())
	dir := field(t, worldOut.String(), `(?m)^  temp dir +(\S+)`)
	repo := field(t, worldOut.String(), `(?m)^git clone http://[^/]+/(\S+)$`)

	sidecar := exec.Command(bin, args...)
	sidecar.Stdout, sidecar.Stderr = &sidecarLog, &sidecarLog
	if err := sidecar.Start(); err != nil {
		t.Fatal(err)
	}
	sidecarDone := make(chan error, 1)
	go func() { sidecarDone <- sidecar.Wait() }()
	defer func() {
		_ = sidecar.Process.Kill()
		<-sidecarDone
	}()
	testkit.WaitFor(t, timeout, "the world to report every event synced", func() bool {
		select {
		case err := <-sidecarDone:
			sidecarDone <- err
			t.Fatalf("grasp-sync exited: %v", err)
		default:
		}
		return strings.Contains(worldOut.String(), "events are on the own relay: synced")
	})

	// The printed command serves the synced repositories too.
	gitAddr := field(t, sidecarLog.String(), `serving the git directory read-only[^\n]*"listen": "([^"]+)"`)
	out, err := exec.Command("git", "ls-remote", "http://"+gitAddr+"/"+repo).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "refs/heads/main") {
		t.Errorf("git ls-remote of %s from the sidecar: %v\n%s", repo, err, out)
	}

	if err := sidecar.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(sidecarDone, timeout); err != nil {
		t.Errorf("grasp-sync after SIGTERM: %v", err)
	}
	if err := world.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(worldDone, timeout); err != nil {
		t.Errorf("world after SIGINT: %v", err)
	}
	if !strings.Contains(worldOut.String(), "stopped: relays and git server closed, "+dir+" removed") {
		t.Error("world output does not end with its stop")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind: %v", dir, err)
	}
}

func waitOutput(t *testing.T, out *syncBuffer, timeout time.Duration, what, want string) {
	t.Helper()
	testkit.WaitFor(t, timeout, "the world to print "+what, func() bool { return strings.Contains(out.String(), want) })
}

func waitExit(done chan error, timeout time.Duration) error {
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(timeout):
		return errors.New("did not exit")
	}
}

// field returns the first group of re in out.
func field(t *testing.T, out, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, out)
	}
	return m[1]
}

// commandArgs reads the printed command line as a POSIX shell would
// (words, single quotes) and returns its arguments after ./grasp-sync.
func commandArgs(t *testing.T, out string) []string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "./grasp-sync run ") {
			continue
		}
		var words []string
		var cur strings.Builder
		inWord, quoted := false, false
		for _, r := range line {
			switch {
			case r == '\'':
				quoted, inWord = !quoted, true
			case r == ' ' && !quoted:
				if inWord {
					words = append(words, cur.String())
					cur.Reset()
				}
				inWord = false
			default:
				cur.WriteRune(r)
				inWord = true
			}
		}
		if quoted {
			t.Fatalf("unbalanced quote in %q", line)
		}
		if inWord {
			words = append(words, cur.String())
		}
		return words[1:]
	}
	t.Fatalf("no ./grasp-sync run line in:\n%s", out)
	return nil
}
