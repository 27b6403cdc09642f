package strfrypolicy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// session is a plugin serving over pipes, as strfry runs it.
type session struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan error
}

// start serves p; read replaces its reading of the relay (nil: nothing
// stored, read at once).
func start(t *testing.T, p *Plugin, read func(ctx context.Context) error) *session {
	t.Helper()
	if read == nil {
		read = func(context.Context) error { return nil }
	}
	p.read = read
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, lines: make(chan string, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		err := p.Serve(ctx, inR, outW)
		outW.Close()
		s.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { inW.Close(); cancel(); <-s.done })
	return s
}

func testPlugin(wait time.Duration) *Plugin {
	return New(Config{Settings: Settings{Wait: wait}, ServiceDomain: domain,
		ReconnectBase: time.Millisecond, ReconnectMax: time.Millisecond}, nil, nil)
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// request renders a request of typ for ev with strfry's fields.
func request(typ string, ev *nostr.Event, extra ...string) string {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	fields := append([]string{
		fmt.Sprintf(`"type":%q`, typ), `"event":` + string(b),
		`"receivedAt":1760000000`, `"sourceType":"IP4"`, `"sourceInfo":"127.0.0.1"`,
	}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

// answer reads the next answer line.
func (s *session) answer() string {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.t.Fatal("the plugin's output ended")
		}
		return line
	case <-time.After(20 * time.Second):
		s.t.Fatal("no answer")
	}
	return ""
}

// expect reads the next answer and compares it, byte for byte, with
// strfry's answer shape.
func (s *session) expect(id, action, msg string) {
	s.t.Helper()
	want := fmt.Sprintf(`{"id":%q,"action":%q}`, id, action)
	if msg != "" {
		want = fmt.Sprintf(`{"id":%q,"action":%q,"msg":%q}`, id, action, msg)
	}
	if got := s.answer(); got != want {
		s.t.Fatalf("answer\n got %s\nwant %s", got, want)
	}
}

func TestAnswersNewRequests(t *testing.T) {
	s := start(t, testPlugin(time.Minute), nil)
	alice, bob := signed.NewKey(), signed.NewKey()
	ann := hosted(alice, "repo")
	s.send(request(TypeNew, ann))
	s.expect(ann.ID, ActionAccept, "")
	foreign := bob.Announcement("x", signed.WithClone("https://"+domain+"/"+bob.Npub()+"/x.git"),
		signed.WithRelays("wss://relay.example.org"))
	s.send(request(TypeNew, foreign))
	s.expect(foreign.ID, ActionReject, ReasonNotListed)
	// Every source is decided alike; unknown fields, top-level and in the
	// event, and the authed field are ignored.
	for _, src := range []string{"IP6", "Import", "Stream", "Sync", "Stored"} {
		issue := bob.Issue(alice.RepoAddress("repo"), src)
		s.send(request(TypeNew, issue, `"authed":"`+bob.PubKey+`"`, `"future":{"x":[1,2]}`,
			fmt.Sprintf(`"sourceType":%q`, src)))
		s.expect(issue.ID, ActionAccept, "")
		other := bob.Issue(bob.RepoAddress("x"), src)
		line := request(TypeNew, other)
		line = strings.Replace(line, `"kind":`, `"extra":{"deep":[true,null,3.5]},"kind":`, 1)
		s.send(line)
		s.expect(other.ID, ActionReject, ReasonUnrelated)
	}
	s.in.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("Serve after the input ended: %v, want nil", err)
	}
	s.done <- nil // for the cleanup
	if line, ok := <-s.lines; ok {
		t.Fatalf("unexpected output %q", line)
	}
}

func TestLookbackRequestsAreRememberedAndNotAnswered(t *testing.T) {
	s := start(t, testPlugin(time.Minute), nil)
	alice, bob := signed.NewKey(), signed.NewKey()
	ann := hosted(alice, "repo")
	issue := bob.Issue(alice.RepoAddress("repo"), "old")
	s.send(request(TypeLookback, ann))
	s.send(request(TypeLookback, issue))
	reply := alice.Reply(issue)
	s.send(request(TypeNew, reply))
	// The first answer is the reply's: the lookback requests got none, and
	// made the repository and its issue known.
	s.expect(reply.ID, ActionAccept, "")
}

func TestMalformedRequests(t *testing.T) {
	s := start(t, testPlugin(time.Minute), nil)
	id := strings.Repeat("ab", 32)
	// Not JSON, no id to answer: logged, no answer (strfry never sends one).
	s.send(`this is not a request`)
	s.send(`{"type":"new"}`)
	s.send(`{"type":"new","event":{"kind":1}}`)
	// Not JSON, with an event id: rejected.
	s.send(`{"type":"new","event":{"id":"` + id + `","kind":1,"tags":[[`)
	s.expect(id, ActionReject, `invalid: malformed request: request is not JSON: unexpected end of JSON input`)
	// JSON whose event does not decode (a field of the wrong type).
	s.send(`{"type":"new","event":{"id":"` + id + `","kind":"one","tags":[]}}`)
	ans := s.answer()
	if !strings.HasPrefix(ans, `{"id":"`+id+`","action":"reject","msg":"invalid: malformed request: event does not decode`) {
		t.Fatalf("answer %s", ans)
	}
	s.send(`{"type":"new","event":{"id":"` + id + `","tags":[["a",1]]}}`)
	if ans := s.answer(); !strings.Contains(ans, `"action":"reject","msg":"invalid: malformed request`) {
		t.Fatalf("answer %s", ans)
	}
	// Unknown and missing types.
	ev := signed.NewKey().Reply(signed.NewKey().Issue("30617:x:y", "z"))
	s.send(request("mystery", ev))
	s.expect(ev.ID, ActionReject, `error: unknown write-policy request type "mystery"`)
	s.send(strings.Replace(request(TypeNew, ev), `"type":"new",`, ``, 1))
	s.expect(ev.ID, ActionReject, `error: unknown write-policy request type ""`)
	// Still serving.
	ann := hosted(signed.NewKey(), "after")
	s.send(request(TypeNew, ann))
	s.expect(ann.ID, ActionAccept, "")
}

func TestRequestsWhileTheRelayIsRead(t *testing.T) {
	release := make(chan struct{})
	s := start(t, testPlugin(50*time.Millisecond), func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	alice := signed.NewKey()
	ann := hosted(alice, "repo")
	// An announcement needs nothing stored: answered at once.
	s.send(request(TypeNew, ann))
	s.expect(ann.ID, ActionAccept, "")
	// Anything else waits for the read, Wait at most, then is refused.
	issue := alice.Issue(alice.RepoAddress("repo"), "early")
	s.send(request(TypeNew, issue))
	s.expect(issue.ID, ActionReject, ReasonLoading)
	close(release)
	issue2 := alice.Issue(alice.RepoAddress("repo"), "later")
	s.send(request(TypeNew, issue2))
	s.expect(issue2.ID, ActionAccept, "")
}

func TestRequestsAfterAFailedRead(t *testing.T) {
	attempts := make(chan struct{}, 10)
	release := make(chan struct{})
	s := start(t, testPlugin(time.Hour), func(ctx context.Context) error {
		attempts <- struct{}{}
		if len(attempts) == 1 {
			return errors.New("relay unreachable")
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	alice := signed.NewKey()
	ann := hosted(alice, "repo")
	s.send(request(TypeNew, ann))
	s.expect(ann.ID, ActionAccept, "")
	// The first read failed: refused without waiting (Wait is an hour).
	issue := alice.Issue(alice.RepoAddress("repo"), "x")
	s.send(request(TypeNew, issue))
	s.expect(issue.ID, ActionReject, ReasonLoading)
	close(release)
	s.send(request(TypeNew, issue))
	if ans := s.answer(); ans != fmt.Sprintf(`{"id":%q,"action":"accept"}`, issue.ID) &&
		ans != fmt.Sprintf(`{"id":%q,"action":"reject","msg":%q}`, issue.ID, ReasonLoading) {
		t.Fatalf("answer %s", ans)
	}
	// Once read, accepted.
	for i := 0; ; i++ {
		s.send(request(TypeNew, issue))
		if s.answer() == fmt.Sprintf(`{"id":%q,"action":"accept"}`, issue.ID) {
			break
		}
		if i == 1000 {
			t.Fatal("never accepted after the read succeeded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The relay's stored announcements and roots, read at start through REQ
// paging, decide as if the plugin had accepted them itself: how it
// recovers its sets after a restart.
func TestReadsTheRelaysStoredEvents(t *testing.T) {
	r, err := harness.StartRelay(harness.RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := alice.RepoAddress("repo")
	var issues []*nostr.Event
	for i := range 7 {
		issues = append(issues, bob.Issue(repo, fmt.Sprint("issue ", i), signed.WithCreatedAt(nostr.Now()-nostr.Timestamp(100*i))))
	}
	foreignAnn := bob.Announcement("foreign", signed.WithRelays("wss://elsewhere.example"))
	foreignIssue := alice.Issue(bob.RepoAddress("foreign"), "elsewhere")
	r.Inject(append(issues, hosted(alice, "repo", signed.WithMaintainers(bob.PubKey)), foreignAnn, foreignIssue)...)

	p := New(Config{Settings: Settings{Wait: time.Minute}, OwnRelay: r.URL(), ServiceDomain: domain,
		RelayOptions: relay.DefaultOptions(), ConnectTimeout: 10 * time.Second, PageSize: 3, EOSETimeout: 10 * time.Second,
		ReconnectBase: 10 * time.Millisecond, ReconnectMax: time.Second}, nil, nil)
	s := start(t, p, p.readRelay)
	for _, ev := range []*nostr.Event{alice.Reply(issues[6]), bob.State("repo"), alice.Comment(issues[0], nil)} {
		s.send(request(TypeNew, ev))
		s.expect(ev.ID, ActionAccept, "")
	}
	for _, ev := range []*nostr.Event{alice.Reply(foreignIssue), bob.State("foreign")} {
		s.send(request(TypeNew, ev))
		if ans := s.answer(); !strings.Contains(ans, `"action":"reject"`) {
			t.Fatalf("about a foreign repository: %s", ans)
		}
	}
	if repos, roots := p.Rules().Counts(); repos != 1 || roots != 7 {
		t.Fatalf("read %d repositories and %d roots, want 1 and 7", repos, roots)
	}
}
