// Package check is `grasp-sync check`: it probes the own relay (one REQ
// over internal/relay's client, NIP-42 AUTH when the relay asks for it and
// a key is configured, the NIP-11 document) and the git directory, and
// reports either every finding or the first fatal problem as one line.
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/gitserve"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
)

// DefaultTimeout bounds each probe (connect, REQ, NIP-11).
const DefaultTimeout = 10 * time.Second

// Check failures callers can branch on.
var (
	ErrOwnRelayUnreachable = errors.New("cannot connect to the own relay")
	ErrOwnRelayNotNostr    = errors.New("own relay does not answer as a Nostr relay")
	ErrGitDir              = errors.New("git directory unusable")
	ErrAuthRefused         = errors.New("own relay refused NIP-42 AUTH")
	ErrGitMissing          = errors.New("git is not usable")
)

// Report collects the lines check prints on success.
type Report struct {
	rows     [][2]string
	warnings []string
}

func (r *Report) add(k, format string, args ...any) {
	r.rows = append(r.rows, [2]string{k, fmt.Sprintf(format, args...)})
}

func (r *Report) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// Warn adds a warning of the caller's (the command line's own findings).
func (r *Report) Warn(format string, args ...any) { r.warn(format, args...) }

// Print writes the report as an aligned table.
func (r *Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "grasp-sync check: OK")
	for _, row := range r.rows {
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
	}
	for _, w := range r.warnings {
		fmt.Fprintf(tw, "  warning\t%s\n", w)
	}
	return tw.Flush()
}

// Run probes everything; the first fatal problem is returned as one line,
// problems that do not prevent running are warnings in the report. file is
// the configuration file the configuration came from ("" for none).
func Run(ctx context.Context, cfg *config.Config, timeout time.Duration, file string) (*Report, error) {
	rep := &Report{}
	if file == "" {
		rep.add("configuration", "valid (no config file)")
	} else {
		rep.add("configuration", "valid (config file %s)", file)
	}

	// WebSocket connect and one REQ.
	start := time.Now()
	connectCtx, cancel := context.WithTimeout(ctx, min(timeout, cfg.Relay.ConnectTimeout))
	conn, err := relay.Dial(connectCtx, cfg.OwnRelay, sidecar.RelayOptions(cfg))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrOwnRelayUnreachable, cfg.OwnRelay, dialProblem(err))
	}
	defer conn.Close()
	connected := time.Since(start)

	reqCtx, cancelReq := context.WithTimeout(ctx, timeout)
	defer cancelReq()
	probe, err := probeREQ(reqCtx, conn, cfg.Auth.Key)
	if errors.Is(err, ErrAuthRefused) {
		return nil, errors.New(oneLine(err))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrOwnRelayNotNostr, cfg.OwnRelay, oneLine(err))
	}
	rep.add("own relay", "%s connected in %s, REQ answered with %s", cfg.OwnRelay, roundLatency(connected), probe.answer)
	if probe.authedAs != "" {
		rep.add("NIP-42 AUTH", "accepted for %s", probe.authedAs)
	}
	if probe.authRequired {
		rep.warn("the relay requires NIP-42 AUTH to read but no key is configured (auth.key_file or %s)", config.EnvAuthKey)
	}

	// NIP-11: what the relay says about itself, compared with the settings.
	var nip11 *info
	if info, err := fetchInfo(reqCtx, cfg.OwnRelay); err != nil {
		rep.add("NIP-11", "unavailable")
		rep.warn("NIP-11 document: %s", strings.TrimPrefix(oneLine(rootCause(err)), "NIP-11: "))
	} else {
		nip11 = info
		describeInfo(rep, info, cfg)
		compareLimits(rep, info, cfg)
	}
	// Writes: does the relay take an event about no repository?
	describeOpenness(rep, nip11, probeWrites(ctx, conn, timeout))
	// NIP-77: served or not, capped or not, whatever NIP-11 says.
	probeNegentropy(ctx, rep, conn, cfg, advertisesNEG(nip11), timeout)
	// What will be synced: the announcements that name this service.
	probeHosted(ctx, rep, conn, cfg, timeout)

	// Git directory.
	if cfg.GitDir == "" {
		rep.add("git directory", "not configured: purgatory off, state and PR events are published as they come")
	} else {
		walkCtx, cancelWalk := context.WithTimeout(ctx, timeout)
		gd, err := checkGitDir(walkCtx, cfg.GitDir)
		cancelWalk()
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrGitDir, oneLine(err))
		}
		if len(gd.denied) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrGitDir, oneLine(gd.deniedProblem(cfg.GitDir)))
		}
		p := "on"
		if !cfg.PurgatoryActive() {
			p = "off (purgatory.enabled: false)"
		}
		rep.add("git directory", "%s writable (%d directories checked), purgatory %s", cfg.GitDir, gd.dirs, p)
		if !gd.complete {
			rep.warn("the git directory check stopped after %s at %d directories; the rest is unchecked", timeout, gd.dirs)
		}
		if cfg.PurgatoryActive() {
			v, err := gitVersion(reqCtx)
			if err != nil {
				return nil, fmt.Errorf("%w: purgatory runs git: %s", ErrGitMissing, oneLine(err))
			}
			rep.add("git", "%s", v)
		}
		if cfg.GitHTTP.Enabled() {
			// What the git server needs at start; its port is not tried (a
			// running sidecar holds it).
			if _, err := gitserve.New(cfg.GitHTTP, gitserve.Options{GitDir: cfg.GitDir}); err != nil {
				return nil, fmt.Errorf("%w: git_http.listen runs git http-backend: %s", ErrGitMissing, oneLine(err))
			}
			rep.add("git server", "%s: clones served read-only (git http-backend found)", cfg.GitHTTP.Listen)
		}
	}

	if cfg.Auth.Key.IsZero() {
		rep.add("NIP-42 key", "none")
	} else if pk, err := cfg.Auth.Key.PublicKey(); err == nil {
		rep.add("NIP-42 key", "loaded, public key %s", pk)
	}
	return rep, nil
}

// dialProblem says in a few words why the handshake failed.
func dialProblem(err error) string {
	var hs *relay.HandshakeError
	if errors.As(err, &hs) {
		return fmt.Sprintf("%v (HTTP %d)", relay.ErrNotWebsocket, hs.StatusCode)
	}
	return oneLine(rootCause(err))
}

// probeSubID is the subscription id of check's REQ.
const probeSubID = "grasp-sync-check"

// probeResult is what the REQ probe learnt.
type probeResult struct {
	// answer describes how the relay answered: EOSE or CLOSED "<reason>".
	answer string
	// authedAs is the public key accepted by NIP-42 AUTH, if AUTH happened.
	authedAs string
	// authRequired is set when the relay wanted AUTH and no key is configured.
	authRequired bool
}

// probeREQ sends a small REQ and waits for its EOSE or CLOSED: the proof
// that the other end speaks Nostr. When the relay closes it with
// auth-required: and a key is configured, it authenticates (NIP-42) and
// asks again, which proves the key is accepted.
func probeREQ(ctx context.Context, conn *relay.Conn, key config.SecretKey) (probeResult, error) {
	var res probeResult
	filters := nostr.Filters{{Kinds: []int{nip34.KindRepoAnnouncement}, Limit: 1}}
	subID := probeSubID
	for {
		answer, reason, err := awaitAnswer(ctx, conn, subID, filters)
		if err != nil || answer == "EOSE" {
			res.answer = answer
			return res, err
		}
		res.answer = fmt.Sprintf("CLOSED %q", reason)
		// A CLOSED still proves a Nostr relay.
		authNeeded := relay.ReasonPrefix(reason) == relay.ReasonAuthRequired
		if !authNeeded || res.authedAs != "" || conn.Challenge() == "" {
			res.authRequired = authNeeded && res.authedAs == ""
			return res, nil
		}
		if key.IsZero() {
			res.authRequired = true
			return res, nil
		}
		pk, err := key.PublicKey()
		if err != nil {
			return res, err
		}
		err = conn.Authenticate(ctx, key.Sign)
		var refused *relay.AuthRefusedError
		switch {
		case errors.As(err, &refused):
			return res, fmt.Errorf("%w: %s", ErrAuthRefused, refused.Reason)
		case err != nil && ctx.Err() != nil:
			return res, errors.New("no OK in answer to NIP-42 AUTH before the timeout")
		case err != nil:
			return res, err
		}
		res.authedAs = pk
		subID = probeSubID + "-authed"
	}
}

// awaitAnswer sends REQ subID and waits for its EOSE ("EOSE") or CLOSED
// ("CLOSED" and the reason). The subscription is not closed but drained
// until the connection closes, at the end of the check: no CLOSE comes
// before the write probe's event. khatru v0.19.1 broadcasts an event
// reading its listeners without the lock a CLOSE takes, a race inside
// the relay that the race detector reports in the tests that run one.
func awaitAnswer(ctx context.Context, conn *relay.Conn, subID string, filters nostr.Filters) (answer, reason string, err error) {
	return request(ctx, conn, subID, filters, nil, true)
}

// request sends a REQ, hands each event to onEvent (when not nil) and
// returns at its EOSE or CLOSED; the subscription is then closed, or,
// with keep, drained until the connection closes.
func request(ctx context.Context, conn *relay.Conn, subID string, filters nostr.Filters, onEvent func(*nostr.Event), keep bool) (answer, reason string, err error) {
	sub, err := conn.Subscribe(ctx, subID, filters)
	if err != nil {
		return "", "", fmt.Errorf("send REQ: %w", rootCause(err))
	}
	if keep {
		defer func() {
			go func() {
				for {
					select {
					case _, ok := <-sub.Messages():
						if !ok {
							return
						}
					case <-sub.Done(): // CLOSED, or the connection ended
						return
					}
				}
			}()
		}()
	} else {
		defer sub.Close()
	}
	for {
		select {
		case msg, ok := <-sub.Messages():
			switch {
			case !ok:
				return "", "", connEnded(conn)
			case msg.Type == relay.MsgEOSE:
				return "EOSE", "", nil
			case msg.Type == relay.MsgClosed:
				return "CLOSED", msg.Reason, nil
			case msg.Event != nil && onEvent != nil:
				onEvent(msg.Event)
			}
		case <-conn.Done():
			return "", "", connEnded(conn)
		case <-ctx.Done():
			return "", "", errors.New("no EOSE or CLOSED in answer to a REQ before the timeout")
		}
	}
}

func connEnded(conn *relay.Conn) error {
	if err := conn.Err(); err != nil {
		return err
	}
	return relay.ErrClosed
}

// info is the part of a NIP-11 document check reports besides the limits
// relay.ParseLimits reads. go-nostr's nip11 type has no supported_grasps,
// so it is decoded here.
type info struct {
	Name            string                     `json:"name"`
	Software        string                     `json:"software"`
	Version         string                     `json:"version"`
	SupportedNIPs   []any                      `json:"supported_nips"`
	SupportedGrasps []any                      `json:"supported_grasps"`
	Limitation      map[string]json.RawMessage `json:"limitation"`
	limits          relay.Limits
}

func fetchInfo(ctx context.Context, relayURL string) (*info, error) {
	doc, err := relay.FetchInfo(ctx, nil, relayURL)
	if err != nil {
		return nil, err
	}
	var i info
	if err := json.Unmarshal(doc, &i); err != nil {
		return nil, fmt.Errorf("not a NIP-11 JSON document: %w", err)
	}
	if i.limits, err = relay.ParseLimits(doc); err != nil {
		return nil, err
	}
	return &i, nil
}

// flag reads a boolean of the limitation object; anything else is false.
func (i *info) flag(name string) bool {
	var b bool
	_ = json.Unmarshal(i.Limitation[name], &b)
	return b
}

func (i *info) supportsNIP(n int) bool {
	for _, v := range i.SupportedNIPs {
		if fmt.Sprint(v) == fmt.Sprint(n) {
			return true
		}
	}
	return false
}

func joinAny(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func describeInfo(rep *Report, info *info, cfg *config.Config) {
	name := info.Name
	if name == "" {
		name = "(no name)"
	}
	sw := info.Software
	if info.Version != "" {
		sw += " " + info.Version
	}
	if sw == "" {
		sw = "(not stated)"
	}
	rep.add("NIP-11", "%q, software %s", name, sw)
	nips := joinAny(info.SupportedNIPs)
	if nips == "" {
		nips = "(not stated)"
	}
	rep.add("supported_nips", "%s", nips)
	grasps := joinAny(info.SupportedGrasps)
	if grasps == "" {
		grasps = "(none stated)"
	}
	rep.add("supported_grasps", "%s", grasps)
	if info.Limitation != nil {
		l := info.limits
		authRequired := info.flag("auth_required")
		rep.add("limitation", "max_subscriptions=%d max_filters=%d max_limit=%d max_message_length=%d auth_required=%t restricted_writes=%t",
			l.MaxSubscriptions, l.MaxFilters, l.MaxLimit, l.MaxMessageLength, authRequired, info.flag("restricted_writes"))
		if l.MaxMessageLength > 0 && l.MaxMessageLength < cfg.Limits.MaxEventBytes {
			rep.warn("the relay's max_message_length %d is below limits.max_event_bytes %d: larger events will be refused",
				l.MaxMessageLength, cfg.Limits.MaxEventBytes)
		}
		if authRequired && cfg.Auth.Key.IsZero() {
			rep.warn("the relay requires NIP-42 auth but no key is configured (auth.key_file or %s)", config.EnvAuthKey)
		}
	} else {
		rep.add("limitation", "(not stated)")
	}
}

// gitVersion runs `git --version` from PATH.
func gitVersion(ctx context.Context) (string, error) {
	path, err := exec.LookPath("git")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return strings.TrimSpace(string(out)) + " (" + path + ")", nil
}

// rootCause strips wrapping layers that only repeat the URL, keeping the
// innermost error that says what went wrong.
func rootCause(err error) error {
	for {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
			continue
		}
		return err
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// roundLatency keeps two or three significant digits of d.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
