package historic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestReadAuthUnansweredTimesOut: a relay that sends an AUTH challenge and
// never answers the AUTH fails the attempt after the timeout (relay.ErrAuthRequired,
// the deadline as cause) instead of holding every job on the connection; a
// caller that gives up first does not decide the attempt for the others.
func TestReadAuthUnansweredTimesOut(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "silent-auth", AuthChallengeOnConnect: true})
	ctx := context.Background()
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testkit.WaitFor(t, 10*time.Second, "the challenge", func() bool { return conn.Challenge() != "" })
	r.SetFaults(harness.Faults{Mute: true})

	sk := nostr.GeneratePrivateKey()
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ngit_sync_read_auth_total", Help: "h"}, []string{"relay", "result"})
	// The attempt's timeout is far above the impatient caller's 20 ms, so
	// the attempt is still running when that caller has given up, however
	// late this goroutine runs again on a loaded machine.
	const timeout = 3 * time.Second
	a := NewReadAuth(func(ev *nostr.Event) error { return ev.Sign(sk) }, timeout, counter, zap.NewNop())

	impatient, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := a.Ensure(impatient, conn); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient caller: %v, want its own deadline", err)
	}
	if err := a.Failed(conn); err != nil {
		t.Fatalf("the attempt failed with the first caller's context: %v", err)
	}
	start := time.Now()
	err = a.Ensure(ctx, conn)
	if !errors.Is(err, relay.ErrAuthRequired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered AUTH: %v, want relay.ErrAuthRequired after the timeout", err)
	}
	t.Logf("unanswered AUTH failed after %v (timeout %v)", time.Since(start).Round(time.Millisecond), timeout)
	if a.Failed(conn) == nil {
		t.Fatal("the failed attempt is not remembered for the connection")
	}
}
