package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/bench"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// binProc is a grasp-sync process started by a test.
type binProc struct {
	cmd  *exec.Cmd
	base string
	log  string
	done chan struct{}
}

func startBinary(t *testing.T, bin, logName string, args ...string) *binProc {
	t.Helper()
	return startBinaryOn(t, bin, freeListen(t), logName, args...)
}

// freeListen returns a loopback address nothing listens on.
func freeListen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBinaryOn runs `grasp-sync run --listen listen args...`, its output
// going to logName in a temporary directory. The output reaches the file
// through a pipe, written by this process: a file-size limit set on the
// child does not cut its log.
func startBinaryOn(t *testing.T, bin, listen, logName string, args ...string) *binProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), logName)
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"run", "--listen", listen}, args...)...)
	out := struct{ io.Writer }{logf} // not an *os.File: exec copies through a pipe
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second // a git child still holding the pipe does not stall Wait
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GRASP_SYNC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &binProc{cmd: cmd, base: "http://" + listen, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s (tail):\n%s", logName, b)
		}
	})
	return p
}

func (p *binProc) status() (status.Snapshot, bool) {
	var st status.Snapshot
	resp, err := http.Get(p.base + "/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil
}

func (p *binProc) ready() bool {
	resp, err := http.Get(p.base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// persistedHeld opens the state store of a stopped sidecar and returns the
// intake time of every held event.
func persistedHeld(t *testing.T, dir, own string) map[string]time.Time {
	t.Helper()
	s, err := statestore.Open(statestore.Options{Config: statestore.Config{Dir: dir}, OwnRelay: own})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Outcome() != statestore.Resumed {
		t.Fatalf("store after kill -9: %s, want resumed", s.Outcome())
	}
	held, err := s.LoadPurgatory()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, h := range held {
		out[h.Event.ID] = h.Added
	}
	return out
}

// TestKill9DuringFirstSync: a real grasp-sync process killed with SIGKILL in
// the middle of its first sync leaves a store that opens; restarted on it,
// the sidecar converges with nothing lost, and the events purgatory held
// (their git data cannot be fetched) are held again with their original
// intake times, so their 30-minute expiry is not reset.
func TestKill9DuringFirstSync(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bench.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), Negentropy: true})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true, ReqCap: 500})
	alice, bob := signed.NewKey(), signed.NewKey()
	deadClone := "http://127.0.0.1:1/" + alice.Npub() + "/proj.git" // nothing listens: git data never arrives
	repo := alice.Announcement("proj", signed.WithRelays(own.URL(), remote.URL()), signed.WithClone("http://"+own.Addr()+"/"+alice.Npub()+"/proj.git", deadClone))
	mustPublish(t, own, repo)
	addr := alice.RepoAddress("proj")
	held := []*nostr.Event{
		alice.State("proj", signed.WithRef("refs/heads/main", strings.Repeat("1", 40)), signed.WithHEAD("main")),
		bob.PR(addr, strings.Repeat("2", 40), signed.WithClone(deadClone)),
		bob.PR(addr, strings.Repeat("3", 40), signed.WithClone(deadClone), signed.WithContent("second PR")),
	}
	bulk := []*nostr.Event{repo}
	roots, perRoot := scaled(40, 10), 100
	for i := 0; i < roots; i++ {
		issue := bob.Issue(addr, fmt.Sprintf("issue %d", i))
		bulk = append(bulk, issue)
		for j := 0; j < perRoot; j++ {
			bulk = append(bulk, alice.Comment(issue, nil, signed.WithContent(fmt.Sprintf("comment %d on %d", j, i))))
		}
	}
	remote.Inject(append(bulk, held...)...)

	stateDir := t.TempDir()
	args := []string{
		"--own-relay", own.URL(), "--dial.allow", "127.0.0.0/8", "--git-dir", t.TempDir(),
		"--state-dir", stateDir, "--state.flush-interval", "100ms",
		"--sync.batch-window", "100ms", "--health.tick", "200ms", "--shutdown-grace", "5s", "--log.level", "info",
	}
	// The first run is slowed to 300 events/s from the remote so it can be
	// killed half-way.
	first := startBinary(t, bin, "first.log", append(args, "--limits.relay-event-rate", "300")...)
	// The kill comes once a flush that began after the purgatory held the
	// three events has committed (a commit seen after they were held, then
	// a later one: an fsync on a busy disk can take longer than many flush
	// intervals).
	var heldSince, flushMark time.Time
	testkit.WaitFor(t, 2*time.Minute, "purgatory holding the three events, saved, while the first sync is half-way", func() bool {
		st, ok := first.status()
		if !ok || st.Purgatory.Events != len(held) {
			return false
		}
		if heldSince.IsZero() {
			heldSince = time.Now()
		}
		if flushMark.IsZero() {
			if st.State.LastFlush.After(heldSince) {
				flushMark = st.State.LastFlush
			}
			return false
		}
		n := own.Len()
		return st.State.LastFlush.After(flushMark) && n > 200 && n < len(bulk)/2
	})
	if err := first.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	<-first.done
	onOwn := own.Len()
	t.Logf("killed with %d of %d events on the own relay", onOwn, len(bulk))
	ownNorm, err := relay.NormalizeURL(own.URL())
	if err != nil {
		t.Fatal(err)
	}
	before := persistedHeld(t, stateDir, ownNorm)
	if len(before) != len(held) {
		t.Fatalf("store after kill -9 holds %d purgatory events, want %d", len(before), len(held))
	}

	second := startBinary(t, bin, "second.log", args...)
	testkit.WaitFor(t, 2*time.Minute, "restarted sidecar ready", second.ready)
	if st, _ := second.status(); st.State.Outcome != string(statestore.Resumed) {
		t.Fatalf("restarted on a store found %q, want resumed", st.State.Outcome)
	}
	waitHas(t, own, bulk...)
	st, _ := second.status()
	if st.Purgatory.Events != len(held) {
		t.Fatalf("purgatory holds %d events after the restart, want %d", st.Purgatory.Events, len(held))
	}
	for _, ev := range held {
		if own.Has(ev.ID) {
			t.Fatalf("held event %s was published without its git data", ev.ID)
		}
	}
	second.cmd.Process.Signal(os.Interrupt)
	select {
	case <-second.done:
	case <-time.After(20 * time.Second):
		t.Fatal("restarted sidecar did not stop on SIGINT")
	}
	after := persistedHeld(t, stateDir, ownNorm)
	for id, at := range before {
		if got, ok := after[id]; !ok || !got.Equal(at) {
			t.Errorf("held event %s: intake %v after the restart, want the original %v", id, got, at)
		}
	}
}
