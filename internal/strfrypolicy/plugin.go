package strfrypolicy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// Settings are the plugin's own settings (the configuration's
// strfry_policy section).
type Settings struct {
	Wait time.Duration `yaml:"wait" help:"How long grasp-sync strfry-policy holds strfry's request about an event other than an announcement while its first read of the relay's stored announcements and root events runs (at its start): past it, and after a failed read until one succeeds, the event is rejected with \"error: the relay's repositories are still being read\". Keep it below strfry's relay.writePolicy.timeoutSeconds (10s by default), past which strfry restarts the plugin."`
}

// DefaultSettings returns the defaults.
func DefaultSettings() Settings { return Settings{Wait: 5 * time.Second} }

// Validate reports every invalid setting, keyed by its YAML key.
func (s Settings) Validate() error {
	v := setting.Checks{}
	v.Positive("wait", s.Wait)
	return v.Err()
}

// Config is what the plugin needs: its settings, the service it decides
// for, and how it reads the relay's stored events at start.
type Config struct {
	Settings
	// OwnRelay is the relay the plugin serves (strfry itself), read once at
	// start for the announcements and root events it holds.
	OwnRelay string
	// ServiceDomain and HostAll are the sidecar's hosting rule
	// (nip34.Hosted): the plugin accepts the announcements the sidecar
	// syncs. An empty ServiceDomain accepts every announcement, as HostAll.
	ServiceDomain string
	HostAll       bool
	// RelayOptions, ConnectTimeout, PageSize, EOSETimeout and
	// ReconnectBase/Max are the own relay's connection and paging, as the
	// sidecar's self-subscription has them.
	RelayOptions   relay.Options
	ConnectTimeout time.Duration
	PageSize       int
	EOSETimeout    time.Duration
	ReconnectBase  time.Duration
	ReconnectMax   time.Duration
}

// MaxLine bounds one request line (strfry's events.maxEventSize is 64 KiB
// by default; the event travels inside the request).
const MaxLine = 16 << 20

// Plugin answers strfry's requests by the Rules.
type Plugin struct {
	cfg   Config
	rules *Rules
	log   *zap.Logger
	clock clock.Clock
	// loaded is closed once the relay's stored events were read, tried
	// once the first attempt to read them ended.
	loaded, tried chan struct{}
	// read reads the relay's stored events into the rules (readRelay; a
	// test replaces it).
	read func(ctx context.Context) error

	accepted, rejected atomic.Int64
}

// New returns the plugin; log receives its log (never standard output).
func New(cfg Config, log *zap.Logger, clk clock.Clock) *Plugin {
	if log == nil {
		log = zap.NewNop()
	}
	if clk == nil {
		clk = clock.Real{}
	}
	p := &Plugin{cfg: cfg, rules: NewRules(cfg.ServiceDomain, cfg.HostAll), log: log, clock: clk, loaded: make(chan struct{}), tried: make(chan struct{})}
	p.read = p.readRelay
	return p
}

// Rules are the plugin's rules and what they accepted.
func (p *Plugin) Rules() *Rules { return p.rules }

// Serve reads requests from in, one JSON object a line, and writes one
// answer a line to out for each "new" request (and for every request it
// cannot read but finds an event id in), until in ends or ctx is done.
// Nothing else is written to out. It reads the relay's stored events
// meanwhile. It returns nil when in ended.
func (p *Plugin) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.load(ctx) }()
	defer func() { cancel(); <-done }()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- readLines(ctx, in, lines) }()
	w := bufio.NewWriter(out)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			p.log.Info("strfry closed the plugin's input; exiting",
				zap.Int64("accepted", p.accepted.Load()), zap.Int64("rejected", p.rejected.Load()))
			return err
		case line := <-lines:
			a, ok := p.handle(ctx, line)
			if !ok {
				continue
			}
			b, err := json.Marshal(a)
			if err != nil {
				return err
			}
			w.Write(b)
			w.WriteByte('\n')
			if err := w.Flush(); err != nil {
				return fmt.Errorf("writing the answer: %w", err)
			}
		}
	}
}

// readLines sends every line of in to lines until in ends (nil) or fails.
// A line longer than MaxLine is skipped with an error logged by the
// caller's handle (it is sent truncated, which does not parse).
func readLines(ctx context.Context, in io.Reader, lines chan<- []byte) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			select {
			case lines <- line:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line without its newline, at most MaxLine bytes of it.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) <= MaxLine {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}

// handle decides about one request line; ok is false when no answer is
// due (a lookback request, or a line without a recognisable event id).
func (p *Plugin) handle(ctx context.Context, line []byte) (Answer, bool) {
	req := parseLine(line)
	if req.err != nil {
		if req.id == "" {
			p.log.Error("request line without an event id; no answer possible", zap.Error(req.err), zap.Int("bytes", len(line)))
			return Answer{}, false
		}
		p.log.Warn("malformed request", zap.String("id", req.id), zap.Error(req.err))
		return p.reject(req.id, "invalid: malformed request: "+req.err.Error()), true
	}
	switch req.typ {
	case TypeNew:
	case TypeLookback:
		if p.waitLoaded(ctx, req.ev) {
			p.rules.Remember(req.ev)
		}
		return Answer{}, false
	default:
		p.log.Warn("unknown request type", zap.String("type", req.typ), zap.String("id", req.id))
		return p.reject(req.id, fmt.Sprintf("error: unknown write-policy request type %q", req.typ)), true
	}
	if !p.waitLoaded(ctx, req.ev) {
		return p.reject(req.id, ReasonLoading), true
	}
	accept, reason := p.rules.Decide(req.ev)
	if !accept {
		p.log.Debug("rejected", zap.String("id", req.id), zap.Int("kind", req.ev.Kind), zap.String("reason", reason))
		return p.reject(req.id, reason), true
	}
	p.accepted.Add(1)
	p.log.Debug("accepted", zap.String("id", req.id), zap.Int("kind", req.ev.Kind))
	return Answer{ID: req.id, Action: ActionAccept}, true
}

func (p *Plugin) reject(id, reason string) Answer {
	p.rejected.Add(1)
	return Answer{ID: id, Action: ActionReject, Msg: reason}
}

// waitLoaded reports whether ev can be decided: it is an announcement, or
// the relay's stored events were read. While the first attempt to read
// them runs, it waits for it, Wait at most; after a failed one it does not
// wait (the relay may be unreachable for long: strfry is not held up
// event after event).
func (p *Plugin) waitLoaded(ctx context.Context, ev *nostr.Event) bool {
	if !NeedsState(ev) || closed(p.loaded) {
		return true
	}
	if !closed(p.tried) {
		select {
		case <-p.loaded:
		case <-p.tried:
		case <-p.clock.After(p.cfg.Wait):
		case <-ctx.Done():
		}
	}
	return closed(p.loaded)
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
