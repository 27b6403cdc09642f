package neg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

func fixedSet(items []Item) func(nostr.Filter) negentropy.Storage {
	s := ourStorage(items)
	return func(nostr.Filter) negentropy.Storage { return s }
}

func TestReconcile(t *testing.T) {
	for _, n := range []int{0, 1, 100, 10_000} {
		for _, diff := range []float64{0, 0.001, 0.5} {
			for _, limit := range []int{0, 4096, 60_000} {
				t.Run(fmt.Sprintf("n=%d/diff=%g/limit=%d", n, diff, limit), func(t *testing.T) {
					d := makeDataset(uint64(n)*7+uint64(diff*1e4), n, diff)
					conn := newFakeConn(fixedSet(d.server), 0) // relay replies unlimited, like strfry's large frames
					opt := testOptions()
					opt.FrameLimit = limit
					res, err := Reconcile(context.Background(), conn, "s1", nostr.Filter{}, ourStorage(d.client), opt)
					if err != nil {
						t.Fatalf("Reconcile: %v", err)
					}
					if !slices.Equal(res.Need, d.need) || !slices.Equal(res.Have, d.have) {
						t.Fatalf("need/have = %d/%d ids, want %d/%d", len(res.Need), len(res.Have), len(d.need), len(d.have))
					}
					if res.Sessions != 1 || res.Rounds < 1 || res.BytesSent == 0 || res.BytesReceived == 0 || res.Duration <= 0 {
						t.Errorf("stats = %+v", res.Stats)
					}
					if got := conn.closedIDs(); !slices.Equal(got, []string{"s1"}) {
						t.Errorf("NEG-CLOSE sent for %v, want [s1]", got)
					}
				})
			}
		}
	}
}

func TestReconcileConcurrentSessions(t *testing.T) {
	d := makeDataset(21, 3000, 0.05)
	conn := newFakeConn(fixedSet(d.server), 0)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Reconcile(context.Background(), conn, fmt.Sprintf("sub-%d", i), nostr.Filter{}, ourStorage(d.client), testOptions())
			if err == nil && (!slices.Equal(res.Need, d.need) || !slices.Equal(res.Have, d.have)) {
				err = fmt.Errorf("session %d: wrong need/have", i)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := conn.openSessions(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

func TestReconcileHostileRelay(t *testing.T) {
	d := makeDataset(31, 2000, 0.1)
	big := "61" + strings.Repeat("00", 1<<20) // 2 MiB + 2 hex characters
	tests := []struct {
		name    string
		handle  func(f *fakeConn) func(*fakeSession, int, string) step
		opt     func(*Options)
		want    []error
		notWant []error
	}{
		{
			name:   "crafted 14-byte NEG-MSG",
			handle: replyAt(0, relay.NegReply{Msg: crafted}),
			want:   []error{ErrInvalidMessage},
		},
		{
			name:   "crafted message mid-session",
			handle: replyAt(1, relay.NegReply{Msg: crafted}),
			want:   []error{ErrInvalidMessage},
		},
		{
			name:   "odd-length hex",
			handle: replyAt(0, relay.NegReply{Msg: "610"}),
			want:   []error{ErrInvalidMessage},
		},
		{
			name:   "non-hex characters",
			handle: replyAt(0, relay.NegReply{Msg: "61xyz0"}),
			want:   []error{ErrInvalidMessage},
		},
		{
			name:   "message far above the inbound bound",
			handle: replyAt(0, relay.NegReply{Msg: big}),
			want:   []error{ErrInvalidMessage},
		},
		{
			name:    "NEG-ERR blocked",
			handle:  replyAt(0, relay.NegReply{Err: "blocked: too many query results"}),
			want:    []error{ErrBlocked},
			notWant: []error{ErrUnsupported, ErrRelay},
		},
		{
			name:    "NEG-ERR other reason",
			handle:  replyAt(1, relay.NegReply{Err: "PROTOCOL-ERROR"}),
			want:    []error{ErrRelay},
			notWant: []error{ErrUnsupported, ErrBlocked},
		},
		{
			name:   "NOTICE on open: unsupported",
			handle: replyAt(0, relay.NegReply{Notice: "ERROR: bad msg: unknown cmd"}),
			want:   []error{ErrUnsupported},
		},
		{
			name:   "silence on open: unsupported",
			handle: replyAt(0),
			opt:    func(o *Options) { o.InitialTimeout = 50 * time.Millisecond },
			want:   []error{ErrUnsupported, ErrTimeout},
		},
		{
			name:    "silence mid-session: timeout, still supported",
			handle:  replyAt(1),
			opt:     func(o *Options) { o.IdleTimeout = 50 * time.Millisecond },
			want:    []error{ErrTimeout},
			notWant: []error{ErrUnsupported},
		},
		{
			name: "session dropped mid-way (khatru idle drop)",
			handle: func(f *fakeConn) func(*fakeSession, int, string) step {
				return func(s *fakeSession, round int, msg string) step {
					if round == 1 {
						return step{close: true}
					}
					return f.serve(s, msg)
				}
			},
			want: []error{ErrSessionClosed},
		},
		{
			name: "notice mid-session is ignored",
			handle: func(f *fakeConn) func(*fakeSession, int, string) step {
				return func(s *fakeSession, round int, msg string) step {
					st := f.serve(s, msg)
					if round == 1 {
						st.replies = append([]relay.NegReply{{Notice: "slow down"}}, st.replies...)
					}
					return st
				}
			},
		},
		{
			name: "round limit",
			opt: func(o *Options) {
				o.MaxRounds = 1
			},
			want: []error{ErrLimit},
		},
		{
			name: "id limit",
			opt: func(o *Options) {
				o.MaxIDs = 10
			},
			want: []error{ErrLimit},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := newFakeConn(fixedSet(d.server), 0)
			if tt.handle != nil {
				conn.handle = tt.handle(conn)
			}
			opt := testOptions()
			opt.FrameLimit = 4096 // several rounds
			if tt.opt != nil {
				tt.opt(&opt)
			}
			res, err := Reconcile(context.Background(), conn, "h", nostr.Filter{}, ourStorage(d.client), opt)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				if !slices.Equal(res.Need, d.need) {
					t.Errorf("need %d ids, want %d", len(res.Need), len(d.need))
				}
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("err = %v, want %v", err, w)
				}
			}
			for _, w := range tt.notWant {
				if errors.Is(err, w) {
					t.Errorf("err = %v, must not match %v", err, w)
				}
			}
			if got := conn.closedIDs(); !slices.Equal(got, []string{"h"}) {
				t.Errorf("NEG-CLOSE sent for %v, want [h]", got)
			}
		})
	}
}

// replyAt answers honestly before round `at`, then sends replies (none:
// silence) at round `at` and stays silent after.
func replyAt(at int, replies ...relay.NegReply) func(f *fakeConn) func(*fakeSession, int, string) step {
	return func(f *fakeConn) func(*fakeSession, int, string) step {
		return func(s *fakeSession, round int, msg string) step {
			switch {
			case round < at:
				return f.serve(s, msg)
			case round == at:
				return step{replies: replies}
			default:
				return step{}
			}
		}
	}
}

// TestReconcileTimeoutOnTheClock: the initial timeout runs on
// Options.Clock: a relay silent on NEG-OPEN is given up on when the clock
// passes a day-long InitialTimeout, and not before.
func TestReconcileTimeoutOnTheClock(t *testing.T) {
	d := makeDataset(43, 100, 0.1)
	conn := newFakeConn(fixedSet(d.server), 0)
	conn.handle = replyAt(0)(conn)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	opt := testOptions()
	opt.InitialTimeout = 24 * time.Hour
	opt.Clock = clk
	done := make(chan error, 1)
	go func() {
		_, err := Reconcile(context.Background(), conn, "c", nostr.Filter{}, ourStorage(d.client), opt)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); clk.Waiters() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Reconcile set no timer on the clock within 10s")
		}
	}
	clk.Advance(opt.InitialTimeout - time.Second)
	select {
	case err := <-done:
		t.Fatalf("Reconcile ended before the timeout: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("Reconcile = %v, want %v and %v", err, ErrUnsupported, ErrTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reconcile did not time out when the clock passed InitialTimeout")
	}
}

func TestReconcileContextCanceled(t *testing.T) {
	d := makeDataset(41, 100, 0.1)
	conn := newFakeConn(fixedSet(d.server), 0)
	conn.handle = replyAt(0)(conn) // silence
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Reconcile(ctx, conn, "c", nostr.Filter{}, ourStorage(d.client), testOptions())
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reconcile did not return after cancel")
	}
	if got := conn.closedIDs(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("NEG-CLOSE sent for %v, want [c]", got)
	}
}

func TestProtectContainsPanic(t *testing.T) {
	err := protect(func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("err = %v, want a contained panic", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []func(*Options){
		func(o *Options) { o.FrameLimit = 100 },
		func(o *Options) { o.MaxInboundHex = 0 },
		func(o *Options) { o.InitialTimeout = 0 },
		func(o *Options) { o.IdleTimeout = -1 },
		func(o *Options) { o.MaxRounds = 0 },
		func(o *Options) { o.MaxIDs = 0 },
		func(o *Options) { o.MinWindow = time.Millisecond },
		func(o *Options) { o.SessionRetries = -1 },
	}
	for i, f := range bad {
		o := DefaultOptions()
		f(&o)
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("case %d: err = %v, want ErrInvalidOptions", i, err)
		}
	}
	_, err := Reconcile(context.Background(), newFakeConn(nil, 0), "", nostr.Filter{}, NewStorage(nil), DefaultOptions())
	if !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("empty subscription id: err = %v", err)
	}
}

// TestReconcileResendsAfterKhatruClosed: khatru can answer the first NEG-MSG
// with "CLOSED" because it stores the session only after answering
// NEG-OPEN; the same message sent again succeeds.
func TestReconcileResendsAfterKhatruClosed(t *testing.T) {
	d := makeDataset(52, 2000, 0.1)
	conn := newFakeConn(fixedSet(d.server), 0)
	conn.handle = func(s *fakeSession, round int, msg string) step {
		if round == 1 {
			return step{replies: []relay.NegReply{{Err: "CLOSED"}}}
		}
		return conn.serve(s, msg)
	}
	opt := testOptions()
	opt.FrameLimit = 4096
	opt.ClosedResendDelay = time.Millisecond
	res, err := Reconcile(context.Background(), conn, "x", nostr.Filter{}, ourStorage(d.client), opt)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if !slices.Equal(res.Need, d.need) || !slices.Equal(res.Have, d.have) {
		t.Fatalf("need/have = %d/%d, want %d/%d", len(res.Need), len(res.Have), len(d.need), len(d.have))
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	msgs := conn.ended[0].msgs
	if len(msgs) < 3 || msgs[1] != msgs[2] {
		t.Errorf("the first NEG-MSG was not sent again unchanged")
	}
}

func TestSupport(t *testing.T) {
	d := makeDataset(71, 100, 0.1)
	tests := []struct {
		name   string
		handle func(f *fakeConn) func(*fakeSession, int, string) step
		opt    func(*Options)
		want   SupportState
	}{
		{"honest relay", nil, nil, Supported},
		{"NEG-ERR blocked", replyAt(0, relay.NegReply{Err: "blocked: too many query results"}), nil, Supported},
		{"NEG-ERR other", replyAt(0, relay.NegReply{Err: "error: nope"}), nil, Supported},
		{"NOTICE", replyAt(0, relay.NegReply{Notice: "unknown message"}), nil, NotSupported},
		{"silence", replyAt(0), func(o *Options) { o.InitialTimeout = 20 * time.Millisecond }, NotSupported},
		{"connection lost before an answer", func(f *fakeConn) func(*fakeSession, int, string) step {
			return func(*fakeSession, int, string) step { return step{close: true} }
		}, nil, SupportUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := newFakeConn(fixedSet(d.server), 0)
			if tt.handle != nil {
				conn.handle = tt.handle(conn)
			}
			opt := testOptions()
			if tt.opt != nil {
				tt.opt(&opt)
			}
			_, err := Reconcile(context.Background(), conn, "s", nostr.Filter{}, ourStorage(d.client), opt)
			if got := Support(err); got != tt.want {
				t.Errorf("Support(%v) = %s, want %s", err, got, tt.want)
			}
		})
	}
	if got := Support(context.Canceled); got != SupportUnknown {
		t.Errorf("Support(context.Canceled) = %s", got)
	}
}
