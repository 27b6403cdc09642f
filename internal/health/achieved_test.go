package health

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// dropAfter connects url, lets the connection achieve something when
// achieved is set, and drops it.
func dropAfter(tr *Tracker, url string, achieved bool) {
	tr.AttemptStarted(url)
	tr.Connected(url)
	if achieved {
		tr.Achieved(url)
	}
	tr.Failed(url, errors.New("read: EOF"))
}

// TestAchievedDropIsNoFailure: a connection that answered and then
// dropped counts as no failure: the failure count is cleared (also one
// built up before, with no stability period to wait) and the reconnect
// waits ReconnectWait, however often it happens. A connection that
// answered nothing still backs off, growing.
func TestAchievedDropIsNoFailure(t *testing.T) {
	tr, clk, _ := newTestTracker(t, func(c *Config) { c.ReconnectWait = 700 * time.Millisecond })
	tr.Track(relayA)
	for i := 0; i < 3; i++ { // dial failures: 5 s, 10 s, 20 s
		tr.AttemptStarted(relayA)
		tr.Failed(relayA, errors.New("connection refused"))
		_, w := tr.CanAttempt(relayA)
		clk.Advance(w)
	}
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	wantState(t, tr, relayA, Degraded) // recovered, not yet proven
	tr.Achieved(relayA)
	wantState(t, tr, relayA, Healthy)
	if f := tr.Snapshot()[0].Failures; f != 0 {
		t.Fatalf("failures %d after the connection answered, want 0", f)
	}
	tr.Failed(relayA, errors.New("read: EOF"))
	wantAttempt(t, tr, relayA, false, 700*time.Millisecond)
	wantState(t, tr, relayA, Disconnected)
	for i := 0; i < 10; i++ {
		clk.Advance(700 * time.Millisecond)
		dropAfter(tr, relayA, true)
		wantAttempt(t, tr, relayA, false, 700*time.Millisecond)
	}
	if f := tr.Snapshot()[0].Failures; f != 0 {
		t.Fatalf("failures %d after ten answering connections dropped", f)
	}
	// Connections that answer nothing are failures again: 5 s, 10 s.
	clk.Advance(700 * time.Millisecond)
	dropAfter(tr, relayA, false)
	wantAttempt(t, tr, relayA, false, 5*time.Second)
	clk.Advance(5 * time.Second)
	dropAfter(tr, relayA, false)
	wantAttempt(t, tr, relayA, false, 10*time.Second)
	wantState(t, tr, relayA, Degraded)
}

// TestAchievedOnlyWhileConnected: Achieved without a connection (before
// Connected, after the drop, for an untracked relay) changes nothing,
// and a new connection must answer again.
func TestAchievedOnlyWhileConnected(t *testing.T) {
	tr, clk, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Achieved(relayA)
	tr.Achieved("wss://untracked.example.com")
	tr.AttemptStarted(relayA)
	tr.Failed(relayA, errors.New("connection refused"))
	wantAttempt(t, tr, relayA, false, 5*time.Second)
	clk.Advance(5 * time.Second)
	dropAfter(tr, relayA, true)
	clk.Advance(time.Second)
	dropAfter(tr, relayA, false) // the last one's answers do not carry over
	wantAttempt(t, tr, relayA, false, 5*time.Second)
}

// TestAchievedHardFailure: a hard failure still counts after the
// connection answered: the relay goes on the naughty list.
func TestAchievedHardFailure(t *testing.T) {
	tr, _, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	tr.Achieved(relayA)
	tr.Failed(relayA, hardErr{})
	if h := tr.Snapshot()[0]; h.NaughtyUntil.IsZero() || h.Failures != 1 {
		t.Fatalf("hard failure after answering: %+v, want naughty with a failure", h)
	}
}

// hardErr is a failure ClassifyError calls hard (a handshake answered 404).
type hardErr struct{}

func (hardErr) Error() string        { return "not a websocket" }
func (hardErr) HandshakeStatus() int { return 404 }

// TestAchievedDropsLogPaced: a relay that keeps dropping connections that
// answered logs drops 1, 2, 4, 8 at INFO and its coming and going only
// for the first drop; the rest is DEBUG.
func TestAchievedDropsLogPaced(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	tr, clk, _ := newTestTracker(t, nil)
	tr.log = zap.New(core)
	tr.Track(relayA)
	for i := 0; i < 16; i++ {
		dropAfter(tr, relayA, true)
		tr.Tick()
		clk.Advance(2 * time.Second)
	}
	drops := logs.FilterMessageSnippet("dropped a connection").Len()
	changes := logs.FilterMessageSnippet("health changed").Len()
	if drops != 5 || changes > 4 {
		t.Errorf("%d drop lines (want 5: 1, 2, 4, 8, 16) and %d health changes (want a few) for 16 drops", drops, changes)
	}
}

// TestOnFirstAnswer: the hook calls achieved once per connection, at the
// first EVENT, EOSE, NEG-MSG or OK, and passes every frame on.
func TestOnFirstAnswer(t *testing.T) {
	var frames []string
	n := 0
	hook := OnFirstAnswer(func(label string, _ int) { frames = append(frames, label) }, func() { n++ })
	for _, l := range []string{"AUTH", "NOTICE", "CLOSED", "NEG-ERR"} {
		hook(l, 10)
	}
	if n != 0 {
		t.Fatalf("achieved %d times before any answer", n)
	}
	for _, l := range []string{"EOSE", "EVENT", "OK", "NEG-MSG"} {
		hook(l, 10)
	}
	if n != 1 || len(frames) != 8 {
		t.Fatalf("achieved %d times, %d frames passed on; want once and 8", n, len(frames))
	}
	OnFirstAnswer(nil, func() { n++ })("NEG-MSG", 1)
	if n != 2 {
		t.Fatal("a second connection's hook did not achieve")
	}
}

// TestDeliveredDropResumesSooner: a connection that answered and
// delivered events to a sync in progress (Delivered) is reconnected
// after ResumeWait; the next connection that only answers waits
// ReconnectWait again (Delivered is per connection), Delivered on a
// connection that answered nothing or after the drop changes nothing,
// and a hard failure still puts the relay on the naughty list.
func TestDeliveredDropResumesSooner(t *testing.T) {
	tr, clk, _ := newTestTracker(t, func(c *Config) {
		c.ReconnectWait, c.ResumeWait = 700*time.Millisecond, 50*time.Millisecond
	})
	tr.Track(relayA)
	delivered := func() {
		tr.AttemptStarted(relayA)
		tr.Connected(relayA)
		tr.Achieved(relayA)
		tr.Delivered(relayA)
		tr.Failed(relayA, errors.New("read: EOF"))
	}
	for i := 0; i < 5; i++ {
		delivered()
		wantAttempt(t, tr, relayA, false, 50*time.Millisecond)
		clk.Advance(50 * time.Millisecond)
	}
	dropAfter(tr, relayA, true)
	wantAttempt(t, tr, relayA, false, 700*time.Millisecond)
	clk.Advance(700 * time.Millisecond)

	// Delivered without an answer, or after the drop: a failure's backoff.
	tr.Delivered(relayA)
	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	tr.Delivered(relayA)
	tr.Failed(relayA, errors.New("read: EOF"))
	wantAttempt(t, tr, relayA, false, 5*time.Second)
	clk.Advance(5 * time.Second)

	tr.AttemptStarted(relayA)
	tr.Connected(relayA)
	tr.Achieved(relayA)
	tr.Delivered(relayA)
	tr.Failed(relayA, hardErr{})
	if h := tr.Snapshot()[0]; h.NaughtyUntil.IsZero() || h.Failures != 1 {
		t.Fatalf("hard failure after delivering: %+v, want naughty with a failure", h)
	}
}
