package neg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// Errors a session returns. Callers branch on them with errors.Is to cache
// NIP-77 support per relay: ErrUnsupported means the relay does not speak
// NIP-77; ErrBlocked, ErrRelay and a NEG-MSG all mean it does.
var (
	// ErrUnsupported: the relay answered NEG-OPEN with a NOTICE, or did not
	// answer within Options.InitialTimeout (then the error also matches
	// ErrTimeout).
	ErrUnsupported = errors.New("neg: relay does not support NIP-77")
	// ErrBlocked: NEG-ERR with a "blocked:" reason, such as strfry's
	// "blocked: too many query results". ReconcileSplit retries with
	// smaller time windows.
	ErrBlocked = errors.New("neg: relay refused the filter (blocked)")
	// ErrTimeout: no message from the relay within the initial or idle timeout.
	ErrTimeout = errors.New("neg: timeout waiting for relay")
	// ErrRelay: any other NEG-ERR; the error text carries the reason.
	ErrRelay = errors.New("neg: relay error")
	// ErrInvalidMessage: the relay sent a NEG-MSG that is malformed or that
	// made the protocol engine fail.
	ErrInvalidMessage = errors.New("neg: invalid message from relay")
	// ErrSessionClosed: the reply channel closed before the reconciliation
	// finished (the connection ended or the relay dropped the session), or
	// the relay answered NEG-ERR "CLOSED" / "closed: …" (khatru lost the
	// session: it answers NEG-OPEN before storing it, or expired it after
	// 7 s idle). ReconcileSplit retries such a session.
	ErrSessionClosed = errors.New("neg: session closed by relay or connection")
	// ErrLimit: the session went past Options.MaxRounds or Options.MaxIDs.
	ErrLimit = errors.New("neg: session limit exceeded")
	// ErrInvalidItem: an id given to ItemFromHex is not 64 hex characters.
	ErrInvalidItem = errors.New("neg: invalid item")
	// ErrInvalidOptions: Options.Validate failed.
	ErrInvalidOptions = errors.New("neg: invalid options")
)

// Conn is what a session needs from a relay connection; *relay.Conn
// implements it.
type Conn interface {
	// NegOpen registers subID, sends ["NEG-OPEN", subID, filter, msgHex]
	// and returns a channel that receives every NEG-MSG/NEG-ERR for subID,
	// plus any NOTICE the relay sends while the session is open, until
	// NegClose is called or the connection ends (then the channel is
	// closed).
	NegOpen(ctx context.Context, subID string, filter nostr.Filter, msgHex string) (<-chan relay.NegReply, error)
	// NegMsg sends ["NEG-MSG", subID, msgHex].
	NegMsg(ctx context.Context, subID string, msgHex string) error
	// NegClose sends ["NEG-CLOSE", subID] best effort and unregisters subID.
	NegClose(subID string)
}

// Settings are the user settings of every session: the part of the
// configuration's negentropy section this package reads. Each carries its
// YAML key and help text (flag, environment variable and documentation
// are derived from them).
type Settings struct {
	// FrameLimit is the largest message we send, in binary bytes; 0 means
	// unlimited, otherwise at least 4096. Default 60,000 (strfry refuses
	// inbound frames over 131,072 bytes of JSON).
	FrameLimit int `yaml:"frame_limit" help:"Largest NEG-MSG we send, in binary bytes before hex (strfry refuses frames over 131072 bytes of hex)."`
	// InitialTimeout is how long to wait for the first answer to NEG-OPEN
	// before deciding the relay does not support NIP-77. Default 10 s.
	InitialTimeout time.Duration `yaml:"initial_timeout" help:"Wait for the first answer to NEG-OPEN; no answer means unsupported."`
	// IdleTimeout is how long to wait for each later message. Default 30 s.
	IdleTimeout time.Duration `yaml:"idle_timeout" help:"Wait for each further NEG-MSG."`
}

// MinFrameLimit is the least FrameLimit but 0 (unlimited), and the least
// the configuration accepts.
const MinFrameLimit = 4096

// DefaultSettings returns the documented defaults.
func DefaultSettings() Settings {
	return Settings{FrameLimit: 60_000, InitialTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key. The configuration requires a frame limit (no 0).
func (s Settings) Validate() error {
	v := setting.Checks{}
	if s.FrameLimit < MinFrameLimit {
		v.Fail("frame_limit", "must be >= "+strconv.Itoa(MinFrameLimit), s.FrameLimit)
	}
	v.Positive("initial_timeout", s.InitialTimeout)
	v.Positive("idle_timeout", s.IdleTimeout)
	return v.Err()
}

// Options bound a session. Start from DefaultOptions.
type Options struct {
	Settings
	// MaxInboundHex is the largest NEG-MSG we accept, in hex characters.
	// Default 2 MiB (1 MiB binary; strfry replies reach ~1 MB of hex).
	MaxInboundHex int
	// MaxRounds caps the NEG-MSG round trips of one session. Default 1,000.
	MaxRounds int
	// MaxIDs caps the need plus have ids one session collects. Default 2,000,000.
	MaxIDs int
	// ClosedResendDelay is how long to wait before sending the first
	// NEG-MSG again when the relay answered it with NEG-ERR "CLOSED"
	// (khatru's race between answering NEG-OPEN and storing the session).
	// Default 100 ms.
	ClosedResendDelay time.Duration
	// SessionRetries is how often ReconcileSplit restarts a window whose
	// session ended with ErrSessionClosed. Default 2.
	SessionRetries int
	// MinWindow is the smallest time window ReconcileSplit splits down to
	// (whole seconds). Default 1 minute.
	MinWindow time.Duration
	// Clock times the timeouts and delays above and gives ReconcileSplit
	// the upper end of a filter without until. Nil means clock.Real{}.
	Clock clock.Clock
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Settings:          DefaultSettings(),
		MaxInboundHex:     2 << 20,
		MaxRounds:         1_000,
		MaxIDs:            2_000_000,
		SessionRetries:    2,
		ClosedResendDelay: 100 * time.Millisecond,
		MinWindow:         time.Minute,
	}
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case o.FrameLimit != 0 && o.FrameLimit < MinFrameLimit:
		return fmt.Errorf("%w: FrameLimit %d: must be 0 (unlimited) or at least 4096", ErrInvalidOptions, o.FrameLimit)
	case o.MaxInboundHex <= 0:
		return fmt.Errorf("%w: MaxInboundHex %d: must be positive", ErrInvalidOptions, o.MaxInboundHex)
	case o.InitialTimeout <= 0:
		return fmt.Errorf("%w: InitialTimeout %s: must be positive", ErrInvalidOptions, o.InitialTimeout)
	case o.IdleTimeout <= 0:
		return fmt.Errorf("%w: IdleTimeout %s: must be positive", ErrInvalidOptions, o.IdleTimeout)
	case o.MaxRounds <= 0:
		return fmt.Errorf("%w: MaxRounds %d: must be positive", ErrInvalidOptions, o.MaxRounds)
	case o.MaxIDs <= 0:
		return fmt.Errorf("%w: MaxIDs %d: must be positive", ErrInvalidOptions, o.MaxIDs)
	case o.ClosedResendDelay < 0:
		return fmt.Errorf("%w: ClosedResendDelay %s: must not be negative", ErrInvalidOptions, o.ClosedResendDelay)
	case o.SessionRetries < 0:
		return fmt.Errorf("%w: SessionRetries %d: must not be negative", ErrInvalidOptions, o.SessionRetries)
	case o.MinWindow < time.Second:
		return fmt.Errorf("%w: MinWindow %s: must be at least 1s", ErrInvalidOptions, o.MinWindow)
	}
	return nil
}

// Stats describe one or more sessions.
type Stats struct {
	// Sessions is the number of NEG-OPENs sent.
	Sessions int
	// Rounds is the number of NEG-MSGs received from the relay.
	Rounds int
	// BytesSent and BytesReceived count message payloads in binary bytes
	// (half their hex length).
	BytesSent, BytesReceived int
	// Duration is the wall time spent.
	Duration time.Duration
}

func (s *Stats) add(o Stats) {
	s.Sessions += o.Sessions
	s.Rounds += o.Rounds
	s.BytesSent += o.BytesSent
	s.BytesReceived += o.BytesReceived
	s.Duration += o.Duration
}

// Result is what reconciliation learned.
type Result struct {
	// Need are hex ids the relay has and we do not: fetch them. Sorted,
	// without duplicates.
	Need []string
	// Have are hex ids we have and the relay lacks. Sorted, without duplicates.
	Have []string
	Stats
}

// Reconcile runs one negentropy session for filter against the relay behind
// c, as the client, to the end, and returns the ids to fetch and the ids
// the relay lacks. It sends NEG-CLOSE on every exit path. The engine checks
// every relay message as it reads it (a malformed one is ErrInvalidMessage)
// and a panic in it would be contained, so a hostile relay costs one
// session. On error the partial Result is returned for its Stats only.
func Reconcile(ctx context.Context, c Conn, subID string, filter nostr.Filter, local *Storage, opt Options) (res Result, err error) {
	clk := opt.clock()
	start := clk.Now()
	defer func() { res.Duration = clk.Now().Sub(start) }()
	if err := opt.Validate(); err != nil {
		return res, err
	}
	if subID == "" || len(subID) > 64 {
		return res, fmt.Errorf("%w: subscription id %q must have 1 to 64 characters", ErrInvalidOptions, subID)
	}

	eng, err := NewClient(local, opt.FrameLimit, opt.MaxIDs)
	if err != nil {
		return res, err
	}
	var first string
	if err := protect(func() error {
		first = eng.Initiate()
		return nil
	}); err != nil {
		return res, fmt.Errorf("neg: start: %w", err)
	}

	var ch <-chan relay.NegReply
	ch, err = c.NegOpen(ctx, subID, filter, first)
	if err != nil {
		return res, fmt.Errorf("neg: open %s: %w", subID, err)
	}
	defer c.NegClose(subID)
	res.Sessions = 1
	res.BytesSent += len(first) / 2

	timer := clk.NewTimer(opt.InitialTimeout)
	defer timer.Stop()
	answered := false
	resent := false
	var lastOut string
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-timer.C():
			if !answered {
				return res, fmt.Errorf("%w: %w: no answer to NEG-OPEN within %s", ErrUnsupported, ErrTimeout, opt.InitialTimeout)
			}
			return res, fmt.Errorf("%w: no NEG-MSG within %s after round %d", ErrTimeout, opt.IdleTimeout, res.Rounds)
		case r, ok := <-ch:
			if !ok {
				return res, fmt.Errorf("%w: after %d rounds", ErrSessionClosed, res.Rounds)
			}
			switch {
			case r.Err != "":
				switch relay.ReasonPrefix(r.Err) {
				case relay.ReasonBlocked:
					return res, fmt.Errorf("%w: %s", ErrBlocked, r.Err)
				case relay.ReasonAuthRequired:
					return res, fmt.Errorf("%w: %w: %s", ErrRelay, relay.ErrAuthRequired, r.Err)
				}
				if r.Err == "CLOSED" || strings.HasPrefix(r.Err, "closed:") {
					if res.Rounds == 1 && !resent {
						// khatru v0.19.1 answers NEG-OPEN before it stores
						// the session, so our first NEG-MSG can arrive too
						// early. The session exists a moment later and the
						// server engine keeps no state between messages:
						// send the same message once more.
						resent = true
						if err := waitCtx(ctx, clk, opt.ClosedResendDelay); err != nil {
							return res, err
						}
						if err := c.NegMsg(ctx, subID, lastOut); err != nil {
							return res, fmt.Errorf("neg: resend NEG-MSG: %w", err)
						}
						res.BytesSent += len(lastOut) / 2
						timer.Reset(opt.IdleTimeout)
						continue
					}
					// The relay forgot or expired the session; a new one may work.
					return res, fmt.Errorf("%w: %w: %s", ErrRelay, ErrSessionClosed, r.Err)
				}
				return res, fmt.Errorf("%w: %s", ErrRelay, r.Err)
			case r.Notice != "":
				if !answered {
					return res, fmt.Errorf("%w: NOTICE %q", ErrUnsupported, r.Notice)
				}
				continue // unrelated notice mid-session; keep the idle deadline
			}
			answered = true
			res.Rounds++
			res.BytesReceived += len(r.Msg) / 2
			if len(r.Msg) > opt.MaxInboundHex {
				return res, fmt.Errorf("%w: %d hex characters, limit %d", ErrInvalidMessage, len(r.Msg), opt.MaxInboundHex)
			}
			// The engine checks the message as it reads it: every
			// malformation is an ErrInvalidMessage; protect is a second line.
			var out string
			if err := protect(func() (err error) {
				out, err = eng.Reconcile(r.Msg)
				return err
			}); err != nil {
				if errors.Is(err, ErrLimit) {
					return res, err
				}
				if !errors.Is(err, ErrInvalidMessage) {
					err = fmt.Errorf("%w: %w", ErrInvalidMessage, err)
				}
				return res, err
			}
			if out == "" { // reconciliation complete
				res.Need, res.Have = eng.Result()
				slices.Sort(res.Need)
				slices.Sort(res.Have)
				return res, nil
			}
			if res.Rounds >= opt.MaxRounds {
				return res, fmt.Errorf("%w: more than %d rounds", ErrLimit, opt.MaxRounds)
			}
			lastOut = out
			if err := c.NegMsg(ctx, subID, lastOut); err != nil {
				return res, fmt.Errorf("neg: send NEG-MSG: %w", err)
			}
			res.BytesSent += len(out) / 2
			timer.Reset(opt.IdleTimeout)
		}
	}
}

// waitCtx waits for d or until ctx ends.
func waitCtx(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// clock returns o.Clock, or the wall clock when it is nil.
func (o Options) clock() clock.Clock {
	if o.Clock == nil {
		return clock.Real{}
	}
	return o.Clock
}

// protect runs f and turns a panic into an error.
func protect(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("protocol engine panic: %v", p)
		}
	}()
	return f()
}
