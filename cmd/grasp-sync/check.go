package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip42"
	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

// DefaultCheckTimeout bounds each probe of `check` (connect, REQ, NIP-11).
const DefaultCheckTimeout = 10 * time.Second

// Check failures callers can branch on.
var (
	ErrOwnRelayUnreachable = errors.New("cannot connect to the own relay")
	ErrOwnRelayNotNostr    = errors.New("own relay does not answer as a Nostr relay")
	ErrGitDir              = errors.New("git directory unusable")
	ErrAuthRefused         = errors.New("own relay refused NIP-42 AUTH")
	ErrGitMissing          = errors.New("git is not usable")
)

// relayInfo is the part of a NIP-11 document check reports. go-nostr's
// nip11 type has no supported_grasps, so it is decoded here.
type relayInfo struct {
	Name            string `json:"name"`
	Description     string `json:"description"`
	PubKey          string `json:"pubkey"`
	Software        string `json:"software"`
	Version         string `json:"version"`
	SupportedNIPs   []any  `json:"supported_nips"`
	SupportedGrasps []any  `json:"supported_grasps"`
	Limitation      *struct {
		MaxMessageLength int  `json:"max_message_length"`
		MaxSubscriptions int  `json:"max_subscriptions"`
		MaxFilters       int  `json:"max_filters"`
		MaxLimit         int  `json:"max_limit"`
		MaxEventTags     int  `json:"max_event_tags"`
		AuthRequired     bool `json:"auth_required"`
		PaymentRequired  bool `json:"payment_required"`
		RestrictedWrites bool `json:"restricted_writes"`
	} `json:"limitation"`
}

func (i *relayInfo) supportsNIP(n int) bool {
	for _, v := range i.SupportedNIPs {
		switch x := v.(type) {
		case float64:
			if int(x) == n {
				return true
			}
		case string:
			if x == fmt.Sprint(n) {
				return true
			}
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

func (e *env) checkCommand() *cli.Command {
	flags := append(config.Flags(), &cli.DurationFlag{
		Name:    "timeout",
		Usage:   "time allowed for each probe (connect, REQ, NIP-11)",
		EnvVars: []string{config.EnvPrefix + "CHECK_TIMEOUT"},
		Value:   DefaultCheckTimeout,
	})
	return &cli.Command{
		Name:  "check",
		Usage: "validate the configuration and probe the own relay and git directory; exit 0 or 1",
		Description: "Loads and validates the configuration exactly as run does, opens a WebSocket to the\n" +
			"own relay and sends one REQ, reads its NIP-11 document and checks the git directory\n" +
			"is writable. On failure prints one line and exits 1.",
		Flags:  flags,
		Action: e.checkAction,
	}
}

// report collects the lines check prints on success.
type report struct {
	rows     [][2]string
	warnings []string
}

func (r *report) add(k, format string, args ...any) {
	r.rows = append(r.rows, [2]string{k, fmt.Sprintf(format, args...)})
}

func (r *report) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

func (r *report) print(w io.Writer) error {
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

func (e *env) checkAction(c *cli.Context) error {
	cfg, err := config.FromCLI(c)
	if err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return fmt.Errorf("--timeout: must be > 0, got %q", timeout)
	}
	rep, err := runCheck(c.Context, cfg, timeout, c.String(config.FlagConfig))
	if err != nil {
		return err
	}
	return rep.print(e.stdout)
}

// runCheck probes everything; the first fatal problem is returned as one
// line, problems that do not prevent running are warnings in the report.
func runCheck(ctx context.Context, cfg *config.Config, timeout time.Duration, file string) (*report, error) {
	rep := &report{}
	if file == "" {
		rep.add("configuration", "valid (no config file)")
	} else {
		rep.add("configuration", "valid (config file %s)", file)
	}

	// WebSocket connect and one REQ.
	start := time.Now()
	connectCtx, cancel := context.WithTimeout(ctx, min(timeout, cfg.Relay.ConnectTimeout))
	conn, _, err := websocket.Dial(connectCtx, cfg.OwnRelay, nil)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrOwnRelayUnreachable, cfg.OwnRelay, oneLine(rootCause(err)))
	}
	defer func() { _ = conn.Close(websocket.StatusNormalClosure, "check done") }()
	conn.SetReadLimit(int64(cfg.Relay.MaxMessageBytes))
	connected := time.Since(start)

	reqCtx, cancelReq := context.WithTimeout(ctx, timeout)
	defer cancelReq()
	probe, err := probeREQ(reqCtx, conn, cfg.OwnRelay, cfg.Auth.Key)
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

	// NIP-11.
	info, err := fetchNIP11(reqCtx, cfg.OwnRelay)
	if err != nil {
		rep.add("NIP-11", "unavailable")
		rep.warn("NIP-11 document: %s", oneLine(err))
	} else {
		describeNIP11(rep, info, cfg)
	}

	// Git directory.
	if cfg.GitDir == "" {
		rep.add("git directory", "not configured: purgatory off, state and PR events are published as they come")
	} else {
		if err := checkWritableDir(cfg.GitDir); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrGitDir, oneLine(err))
		}
		p := "on"
		if !cfg.PurgatoryActive() {
			p = "off (purgatory.enabled: false)"
		}
		rep.add("git directory", "%s writable, purgatory %s", cfg.GitDir, p)
		if cfg.PurgatoryActive() {
			v, err := gitVersion(reqCtx)
			if err != nil {
				return nil, fmt.Errorf("%w: purgatory runs git: %s", ErrGitMissing, oneLine(err))
			}
			rep.add("git", "%s", v)
		}
	}

	if cfg.Auth.Key.IsZero() {
		rep.add("NIP-42 key", "none")
	} else if pk, err := cfg.Auth.Key.PublicKey(); err == nil {
		rep.add("NIP-42 key", "loaded, public key %s", pk)
	}
	return rep, nil
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
func probeREQ(ctx context.Context, conn *websocket.Conn, relayURL string, key config.SecretKey) (probeResult, error) {
	var res probeResult
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return conn.Write(ctx, websocket.MessageText, b)
	}
	subID := probeSubID
	filter := nostr.Filter{Kinds: []int{30617}, Limit: 1}
	if err := send([]any{"REQ", subID, filter}); err != nil {
		return res, fmt.Errorf("send REQ: %w", rootCause(err))
	}
	var challenge, authID string
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				if authID != "" {
					return res, errors.New("no OK in answer to NIP-42 AUTH before the timeout")
				}
				return res, errors.New("no EOSE or CLOSED in answer to a REQ before the timeout")
			}
			return res, fmt.Errorf("read: %w", err)
		}
		switch env := nostr.ParseMessage(string(msg)).(type) {
		case *nostr.AuthEnvelope:
			if env.Challenge != nil {
				challenge = *env.Challenge
			}
		case *nostr.EOSEEnvelope:
			if string(*env) == subID {
				_ = send([]string{"CLOSE", subID})
				res.answer = "EOSE"
				return res, nil
			}
		case *nostr.ClosedEnvelope:
			if env.SubscriptionID != subID {
				continue
			}
			authNeeded := strings.HasPrefix(env.Reason, "auth-required:")
			if !authNeeded || res.authedAs != "" || challenge == "" {
				// A CLOSED still proves a Nostr relay.
				res.answer = fmt.Sprintf("CLOSED %q", env.Reason)
				res.authRequired = authNeeded && res.authedAs == ""
				return res, nil
			}
			if key.IsZero() {
				res.answer = fmt.Sprintf("CLOSED %q", env.Reason)
				res.authRequired = true
				return res, nil
			}
			pk, err := key.PublicKey()
			if err != nil {
				return res, err
			}
			evt := nip42.CreateUnsignedAuthEvent(challenge, pk, relayURL)
			if err := evt.Sign(key.Hex()); err != nil {
				return res, fmt.Errorf("sign AUTH event: %w", err)
			}
			authID = evt.ID
			if err := send([]any{"AUTH", evt}); err != nil {
				return res, fmt.Errorf("send AUTH: %w", rootCause(err))
			}
		case *nostr.OKEnvelope:
			if authID == "" || env.EventID != authID {
				continue
			}
			if !env.OK {
				return res, fmt.Errorf("%w: %s", ErrAuthRefused, env.Reason)
			}
			pk, _ := key.PublicKey()
			res.authedAs = pk
			authID = ""
			subID = probeSubID + "-authed"
			if err := send([]any{"REQ", subID, filter}); err != nil {
				return res, fmt.Errorf("send REQ: %w", rootCause(err))
			}
		}
	}
}

// nip11URL maps ws(s)://host/path to http(s)://host/path.
func nip11URL(relayURL string) (string, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	return u.String(), nil
}

func fetchNIP11(ctx context.Context, relayURL string) (*relayInfo, error) {
	u, err := nip11URL(relayURL)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, rootCause(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	var info relayInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("GET %s: not a NIP-11 JSON document: %w", u, err)
	}
	return &info, nil
}

func describeNIP11(rep *report, info *relayInfo, cfg *config.Config) {
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
	if l := info.Limitation; l != nil {
		rep.add("limitation", "max_subscriptions=%d max_filters=%d max_limit=%d max_message_length=%d auth_required=%t restricted_writes=%t",
			l.MaxSubscriptions, l.MaxFilters, l.MaxLimit, l.MaxMessageLength, l.AuthRequired, l.RestrictedWrites)
		if l.MaxMessageLength > 0 && l.MaxMessageLength < cfg.Limits.MaxEventBytes {
			rep.warn("the relay's max_message_length %d is below limits.max_event_bytes %d: larger events will be refused",
				l.MaxMessageLength, cfg.Limits.MaxEventBytes)
		}
		if l.AuthRequired && cfg.Auth.Key.IsZero() {
			rep.warn("the relay requires NIP-42 auth but no key is configured (auth.key_file or %s)", config.EnvAuthKey)
		}
	} else {
		rep.add("limitation", "(not stated)")
	}
	if !info.supportsNIP(77) {
		rep.add("negentropy", "NIP-77 not advertised by the own relay")
	} else {
		rep.add("negentropy", "NIP-77 advertised")
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

// checkWritableDir verifies dir exists, is a directory and accepts a new file.
func checkWritableDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".grasp-sync-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, rootCause(err))
	}
	name := f.Name()
	_ = f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Base(name), err)
	}
	return nil
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
