package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"gopkg.in/yaml.v3"

	"github.com/grasp-sync/grasp-sync/internal/strfrypolicy"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/bench"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// policyDomain is the service domain of the strfry-policy scenarios.
const policyDomain = "git.grasp.test"

// policyAnnouncement is d by k, listing policyDomain in clone and relays
// (and relays, when given, in relays too).
func policyAnnouncement(k *signed.Key, d string, relays ...string) *nostr.Event {
	return k.Announcement(d,
		signed.WithClone("https://"+policyDomain+"/"+k.Npub()+"/"+d+".git"),
		signed.WithRelays(append([]string{"wss://" + policyDomain}, relays...)...))
}

// policyRequest is strfry's request line for ev.
func policyRequest(t *testing.T, typ string, ev *nostr.Event) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"type": typ, "event": ev, "receivedAt": time.Now().Unix(),
		"sourceType": "IP4", "sourceInfo": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// envWithout is the test's environment without GRASP_SYNC_* variables,
// plus add.
func envWithout(add ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GRASP_SYNC_") {
			env = append(env, kv)
		}
	}
	return append(env, add...)
}

// TestStrfryPolicyProcess runs `grasp-sync strfry-policy` as strfry does:
// a process configured by GRASP_SYNC_* variables, one request a line on
// its standard input, one answer a line on its standard output and its log
// on standard error. It reads the own relay's stored announcement and root
// at start, answers every new request (and nothing else) on stdout, and
// exits 0 when its input ends.
func TestStrfryPolicyProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bench.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// Without a service domain it refuses to start, naming the setting.
	cmd := exec.CommandContext(ctx, bin, "strfry-policy")
	cmd.Env = envWithout("GRASP_SYNC_OWN_RELAY=ws://127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("strfry-policy without a service domain exited 0")
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "--service-domain, GRASP_SYNC_SERVICE_DOMAIN") {
		t.Fatalf("stdout %q, stderr %q: want nothing on stdout and the setting named on stderr", stdout.String(), stderr.String())
	}

	own := harness.Start(t, harness.RelayOptions{Name: "own"})
	alice, bob := signed.NewKey(), signed.NewKey()
	addr := alice.RepoAddress("proj")
	stored := bob.Issue(addr, "stored before the plugin started")
	own.Inject(policyAnnouncement(alice, "proj"), stored)

	cmd = exec.CommandContext(ctx, bin, "strfry-policy")
	cmd.Env = envWithout("GRASP_SYNC_OWN_RELAY="+own.URL(), "GRASP_SYNC_SERVICE_DOMAIN="+policyDomain,
		"GRASP_SYNC_LOG_LEVEL=debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := bufio.NewScanner(out)
	answer := func(ev *nostr.Event) strfrypolicy.Answer {
		t.Helper()
		if _, err := stdin.Write(policyRequest(t, strfrypolicy.TypeNew, ev)); err != nil {
			t.Fatal(err)
		}
		if !answers.Scan() {
			t.Fatalf("no answer for kind %d (stderr: %s)", ev.Kind, stderr.String())
		}
		var a strfrypolicy.Answer
		dec := json.NewDecoder(bytes.NewReader(answers.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.ID != ev.ID {
			t.Fatalf("answer %q for %s: %v", answers.Text(), ev.ID, err)
		}
		return a
	}
	foreign := bob.Announcement("elsewhere", signed.WithClone("https://"+policyDomain+"/"+bob.Npub()+"/elsewhere.git"))
	for _, c := range []struct {
		name   string
		ev     *nostr.Event
		action string
		msg    string
	}{
		{"a reply to the stored issue", alice.Reply(stored), "accept", ""},
		{"the owner's state", alice.State("proj", signed.WithRef("refs/heads/main", signed.FakeCommit("m"))), "accept", ""},
		{"an announcement listing the service only in clone", foreign, "reject", strfrypolicy.ReasonNotListed},
		{"an issue of that repository", alice.Issue(bob.RepoAddress("elsewhere"), "x"), "reject", strfrypolicy.ReasonUnrelated},
		{"a note about nothing", bob.Reply(bob.Issue("30617:x:y", "z")), "reject", strfrypolicy.ReasonUnrelated},
		{"a new hosted announcement", policyAnnouncement(bob, "new"), "accept", ""},
		{"an issue of it", alice.Issue(bob.RepoAddress("new"), "y"), "accept", ""},
	} {
		if a := answer(c.ev); a.Action != c.action || a.Msg != c.msg {
			t.Errorf("%s: %s %q, want %s %q", c.name, a.Action, a.Msg, c.action, c.msg)
		}
	}
	// A lookback request (strfry before 0.9.5) gets no answer: the next
	// line answers the next new request.
	if _, err := stdin.Write(policyRequest(t, strfrypolicy.TypeLookback, bob.Issue(addr, "old"))); err != nil {
		t.Fatal(err)
	}
	if a := answer(bob.Reply(stored)); a.Action != "accept" {
		t.Errorf("after a lookback request: %+v", a)
	}
	stdin.Close()
	if answers.Scan() {
		t.Errorf("output after the last answer: %q", answers.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after the input ended: %v (stderr: %s)", err, stderr.String())
	}
	// The log went to stderr, one JSON object a line, and says what it read.
	sawRead := false
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("stderr line is not a JSON log entry: %q", line)
		}
		if entry["msg"] == "read the relay's repositories" {
			sawRead = entry["repositories"] == float64(1) && entry["root_events"] == float64(1)
		}
	}
	if !sawRead {
		t.Errorf("no log line saying 1 repository and 1 root were read:\n%s", stderr.String())
	}
}

// strfryProc is a strfry relay a test runs.
type strfryProc struct {
	cmd  *exec.Cmd
	url  string
	log  *syncBuffer
	done chan struct{}
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the
// test's reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// installPlugin installs bin as strfry's write-policy plugin into dir with
// deploy/docker-compose.yml's plugin-init script (the Kubernetes init
// container runs the same), its paths moved from the image's to bin and
// dir; it returns the wrapper's path, which deploy/strfry.conf names.
func installPlugin(t *testing.T, bin, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Entrypoint []string `yaml:"entrypoint"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	ep := compose.Services["plugin-init"].Entrypoint
	if len(ep) != 3 || ep[0] != "sh" || ep[1] != "-ec" {
		t.Fatalf("plugin-init's entrypoint %q is not sh -ec SCRIPT", ep)
	}
	script := strings.ReplaceAll(ep[2], "/usr/local/bin/grasp-sync", bin)
	script = strings.ReplaceAll(script, "/plugin/", dir+"/")
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("plugin-init's script: %v\n%s", err, out)
	}
	return dir + "/grasp-sync-strfry-policy"
}

// startStrfry runs strfry's relay with deploy/strfry.conf on 127.0.0.1:port
// and its database in db, the write policy being plugin configured by env
// (strfry passes its environment on to the plugin).
func startStrfry(t *testing.T, strfry, plugin, db string, port int, env ...string) *strfryProc {
	t.Helper()
	cmd := exec.Command(strfry, "--config=../deploy/strfry.conf",
		"--set", "db="+db+"/", "--set", "relay.bind=127.0.0.1", "--set", fmt.Sprintf("relay.port=%d", port),
		// deploy/strfry.conf's map is 10 TB of address space; 1 GiB is plenty here.
		"--set", "dbParams.mapsize=1073741824",
		"--set", "relay.writePolicy.plugin="+plugin, "relay")
	cmd.Env = envWithout(env...)
	p := &strfryProc{cmd: cmd, url: fmt.Sprintf("ws://127.0.0.1:%d", port), log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			l := p.log.String()
			if len(l) > 8000 {
				l = l[len(l)-8000:]
			}
			t.Logf("strfry's log (tail):\n%s", l)
		}
	})
	testkit.WaitFor(t, 30*time.Second, "strfry listening", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

// stop ends strfry (SIGTERM; it ends its plugin) and waits for it.
func (p *strfryProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// publishTo publishes ev to url on a fresh connection and returns strfry's
// OK.
func publishTo(t *testing.T, url string, ev *nostr.Event) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := harness.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, reason, err := c.Publish(ctx, ev)
	if err != nil {
		t.Fatalf("publish kind %d to %s: %v", ev.Kind, url, err)
	}
	return ok, reason
}

// holds reports which of ids url holds.
func holds(t *testing.T, url string, ids ...string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := harness.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Req(ctx, "holds", nostr.Filter{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, ev := range res.Events {
		out[ev.ID] = true
	}
	return out
}

// TestStrfryWithPolicyPlugin runs a real strfry (GRASP_SYNC_STRFRY: the
// path of its binary) with deploy/strfry.conf and grasp-sync strfry-policy
// as its write policy, installed by docker-compose.yml's plugin-init
// script. strfry accepts the hosted announcement and refuses
// a foreign one with the plugin's reason, accepts an issue and a state of
// the hosted repository and refuses an unrelated note; restarted on its
// database (a new plugin process, which reads the stored announcement and
// issue from strfry), it still accepts events about the repository. Then a
// sidecar syncs a repository's events from a khatru remote into it.
func TestStrfryWithPolicyPlugin(t *testing.T) {
	strfry := os.Getenv("GRASP_SYNC_STRFRY")
	if strfry == "" {
		t.Skip("GRASP_SYNC_STRFRY is not set (the path of a strfry binary): the test with a real strfry is skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := bench.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("ws://127.0.0.1:%d", port)
	env := []string{"GRASP_SYNC_OWN_RELAY=" + url, "GRASP_SYNC_SERVICE_DOMAIN=" + policyDomain}
	db := t.TempDir()
	plugin := installPlugin(t, bin, t.TempDir())

	alice, bob := signed.NewKey(), signed.NewKey()
	addr := alice.RepoAddress("proj")
	ann := policyAnnouncement(alice, "proj")
	issue := bob.Issue(addr, "stored")
	first := startStrfry(t, strfry, plugin, db, port, env...)
	expect := func(name string, ev *nostr.Event, wantOK bool, wantReason string) {
		t.Helper()
		ok, reason := publishTo(t, url, ev)
		if ok != wantOK || (wantReason != "" && reason != wantReason) {
			t.Errorf("%s: OK %v %q, want %v %q", name, ok, reason, wantOK, wantReason)
		}
	}
	expect("the hosted announcement", ann, true, "")
	expect("an announcement listing the service only in clone",
		bob.Announcement("elsewhere", signed.WithClone("https://"+policyDomain+"/"+bob.Npub()+"/elsewhere.git"),
			signed.WithRelays("wss://relay.example.org")),
		false, strfrypolicy.ReasonNotListed)
	expect("an issue of the hosted repository", issue, true, "")
	expect("the owner's state", alice.State("proj", signed.WithRef("refs/heads/main", signed.FakeCommit("1"))), true, "")
	expect("a stranger's state", bob.State("proj"), false, strfrypolicy.ReasonStateForeign)
	expect("an issue of a repository not hosted here", bob.Issue(bob.RepoAddress("elsewhere"), "x"), false, strfrypolicy.ReasonUnrelated)
	expect("an unrelated note", bob.Reply(bob.Issue("30617:x:y", "z")), false, strfrypolicy.ReasonUnrelated)
	if got := holds(t, url, ann.ID, issue.ID); !got[ann.ID] || !got[issue.ID] {
		t.Fatalf("strfry holds %v of the announcement and the issue", got)
	}
	// grasp-sync check sees the write policy strfry's NIP-11 cannot state.
	if out, err := exec.CommandContext(ctx, bin, "check", "--own-relay", url).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "write policy      refuses an event about no repository (blocked:") ||
		strings.Contains(string(out), "looks open") {
		t.Errorf("grasp-sync check on strfry with the plugin (%v):\n%s", err, out)
	}

	// Restarted: strfry starts a new plugin at the first write, which reads
	// the stored announcement and issue from strfry.
	first.stop()
	startStrfry(t, strfry, plugin, db, port, env...)
	expect("after the restart, a reply to the stored issue", alice.Reply(issue), true, "")
	expect("after the restart, a new issue", bob.Issue(addr, "new"), true, "")
	expect("after the restart, the owner's newer state",
		alice.State("proj", signed.WithRef("refs/heads/main", signed.FakeCommit("2")), signed.WithCreatedAt(nostr.Now()+1)), true, "")
	expect("after the restart, an unrelated note", bob.Reply(bob.Issue("30617:x:y", "w")), false, strfrypolicy.ReasonUnrelated)

	// The sidecar syncs a repository's events from a remote into strfry.
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	synced := policyAnnouncement(bob, "synced", remote.URL())
	expect("an announcement naming the remote", synced, true, "")
	remoteIssue := alice.Issue(bob.RepoAddress("synced"), "from the remote")
	remoteEvents := []*nostr.Event{synced, remoteIssue, bob.Comment(remoteIssue, nil), alice.Reply(remoteIssue)}
	remote.Inject(remoteEvents...)
	cfg := fastConfig(remote)
	cfg.OwnRelay = url
	cfg.ServiceDomain = policyDomain
	startSidecar(t, cfg)
	ids := make([]string, len(remoteEvents))
	for i, ev := range remoteEvents {
		ids[i] = ev.ID
	}
	testkit.WaitFor(t, syncTimeout, "the remote's events in strfry", func() bool { return len(holds(t, url, ids...)) == len(ids) })
}
