package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// DefaultStatusTimeout bounds the status request.
const DefaultStatusTimeout = 5 * time.Second

// ErrStatusUnavailable is returned when no sidecar answers /status.
var ErrStatusUnavailable = errors.New("no status from sidecar")

func (e *env) statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "print a running sidecar's status (GET /status) as tables",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "addr",
				Usage:   "sidecar HTTP address, URL or HOST:PORT (default: derived from --listen)",
				EnvVars: []string{config.EnvPrefix + "STATUS_ADDR"},
			},
			&cli.StringFlag{
				Name:    "listen",
				Usage:   "the sidecar's listen address, used when --addr is not given",
				EnvVars: []string{config.EnvPrefix + "LISTEN"},
				Value:   config.Default().Listen,
			},
			&cli.DurationFlag{
				Name:    "timeout",
				Usage:   "request timeout",
				EnvVars: []string{config.EnvPrefix + "STATUS_TIMEOUT"},
				Value:   DefaultStatusTimeout,
			},
			&cli.BoolFlag{Name: "json", Usage: "print the raw JSON document"},
		},
		Action: e.statusAction,
	}
}

// statusURL turns --addr or --listen into the /status URL. A listen address
// without host, or with a wildcard host, is reached on loopback.
func statusURL(addr, listen string) (string, error) {
	if addr == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return "", fmt.Errorf("--listen %q: %w", listen, err)
		}
		switch host {
		case "", "0.0.0.0", "::":
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, port)
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + "/status", nil
}

func (e *env) statusAction(c *cli.Context) error {
	u, err := statusURL(c.String("addr"), c.String("listen"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	body, err := fetchStatus(ctx, u)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		_, err := e.stdout.Write(body)
		return err
	}
	var snap status.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return fmt.Errorf("%w: %s: not a status document: %w", ErrStatusUnavailable, u, err)
	}
	return printStatus(e.stdout, &snap, time.Now())
}

func fetchStatus(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatusUnavailable, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrStatusUnavailable, u, oneLineCause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrStatusUnavailable, u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStatusUnavailable, u, err)
	}
	return body, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printStatus renders the snapshot as a summary and a relay table.
func printStatus(w io.Writer, s *status.Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	up := "unknown"
	if !s.StartedAt.IsZero() {
		up = now.Sub(s.StartedAt).Round(time.Second).String()
	}
	fmt.Fprintf(tw, "version\t%s\n", s.Version)
	fmt.Fprintf(tw, "uptime\t%s\n", up)
	if s.Ready || s.NotReady == "" {
		fmt.Fprintf(tw, "ready\t%s\n", yesNo(s.Ready))
	} else {
		fmt.Fprintf(tw, "ready\tno: %s\n", s.NotReady)
	}
	fmt.Fprintf(tw, "own relay\t%s (connected: %s, self-subscription EOSE: %s)\n",
		s.OwnRelay.URL, yesNo(s.OwnRelay.Connected), yesNo(s.OwnRelay.SelfSubscriptionEOSE))
	fmt.Fprintf(tw, "repositories\t%d\n", s.Repositories)
	fmt.Fprintf(tw, "root events\t%d\n", s.RootEvents)
	fmt.Fprintf(tw, "pending batches\t%d\n", s.PendingBatches)
	fmt.Fprintf(tw, "publisher\tqueued %d, in flight %d, accepted %d, duplicates %d, rejected %d\n",
		s.Publisher.Queued, s.Publisher.InFlight, s.Publisher.Accepted, s.Publisher.Duplicates, s.Publisher.Rejected)
	if s.Purgatory.Enabled {
		fmt.Fprintf(tw, "purgatory\t%d events, %d identifiers queued for a git sync\n", s.Purgatory.Events, s.Purgatory.QueueSize)
	} else {
		fmt.Fprintf(tw, "purgatory\toff\n")
	}
	fmt.Fprintf(tw, "rejected\thot %d, cold %d\n", s.Rejected.Hot, s.Rejected.Cold)
	fmt.Fprintf(tw, "state\t%s\n", stateText(&s.State, now))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nrelays (%d)\n", len(s.Relays))
	if len(s.Relays) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tSTATE\tHEALTH\tNEG\tREPOS\tROOTS\tFILTERS\tBATCHES\tEVENTS\tFAILURES\tLAST ERROR")
	for _, r := range s.Relays {
		url := r.URL
		if r.Bootstrap {
			url += " (bootstrap)"
		}
		neg := r.Negentropy
		if neg == "" {
			neg = "-"
		}
		lastErr := wrapText(r.LastError, errorColumnWidth)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%d\t%d\t%d\t%d\t%s\n",
			url, r.State, r.Health, neg,
			r.ReposConfirmed, r.ReposConfirmed+r.ReposPending,
			r.RootsConfirmed, r.RootsConfirmed+r.RootsPending,
			r.FiltersOpen, r.PendingBatches, r.EventsReceived, r.Failures, lastErr[0])
		for _, more := range lastErr[1:] {
			fmt.Fprintf(tw, "%s%s\n", strings.Repeat("\t", 10), more)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nREPOS and ROOTS are confirmed/total (total = confirmed + pending).")
	printRelayNotes(w, s.Relays)
	return printPurgatory(w, &s.Purgatory, now)
}

// stateText summarises the state store on one line.
func stateText(st *status.State, now time.Time) string {
	if st.Outcome == "" {
		return "-"
	}
	if st.Dir == "" {
		return st.Outcome
	}
	text := fmt.Sprintf("%s, %s: %d bytes, %d events (%.0f bytes/event)", st.Outcome, st.Dir, st.Bytes, st.Events, st.BytesPerEvent)
	if !st.LastFlush.IsZero() {
		text += ", last write " + untilText(now.Sub(st.LastFlush)) + " ago"
	}
	return text
}

// printRelayNotes lists what the relay table has no room for: relays
// caught truncating results and relays that asked for AUTH to read.
func printRelayNotes(w io.Writer, relays []status.Relay) {
	header := false
	for _, r := range relays {
		if r.Truncation == "" && r.ReadAuth == "" {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nrelay notes")
			header = true
		}
		fmt.Fprintf(w, "  %s\n", r.URL)
		for _, n := range [][2]string{{"truncation", r.Truncation}, {"read AUTH", r.ReadAuth}} {
			if n[1] == "" {
				continue
			}
			for _, l := range wrapText(n[0]+": "+n[1], 2*errorColumnWidth) {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
}

// errorColumnWidth is where long errors wrap (they are never cut).
const errorColumnWidth = 60

// maxPurgatoryRows bounds the identifiers printed; the rest are counted
// and --json lists them all.
const maxPurgatoryRows = 50

// printPurgatory lists the identifiers held in purgatory, oldest first.
func printPurgatory(w io.Writer, p *status.Purgatory, now time.Time) error {
	if !p.Enabled || len(p.Identifiers) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\npurgatory (identifiers: %d, events waiting for git data: %d)\n", len(p.Identifiers), p.Events)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDENTIFIER\tSTATES\tPRS\tHELD FOR\tEXPIRES IN\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR")
	rows := p.Identifiers
	if len(rows) > maxPurgatoryRows {
		rows = rows[:maxPurgatoryRows]
	}
	for _, id := range rows {
		next := "syncing"
		if !id.Syncing {
			next = "-"
			if id.NextAttempt != nil {
				next = "in " + untilText(id.NextAttempt.Sub(now))
			}
		}
		lastErr := wrapText(id.LastError, errorColumnWidth)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", id.Identifier, id.States, id.PRs,
			untilText(now.Sub(id.HeldSince)), untilText(id.ExpiresAt.Sub(now)), id.Attempts, next, lastErr[0])
		for _, more := range lastErr[1:] {
			fmt.Fprintf(tw, "%s%s\n", strings.Repeat("\t", 7), more)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(p.Identifiers) - len(rows); n > 0 {
		fmt.Fprintf(w, "… and %d more identifiers (grasp-sync status --json lists them all)\n", n)
	}
	return nil
}

// untilText is a duration rounded to the second, "0s" when negative.
func untilText(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// wrapText breaks s into lines of at most width characters at spaces (a
// longer word is split); "" becomes "-". Nothing is cut.
func wrapText(s string, width int) []string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return []string{"-"}
	}
	var lines []string
	line := ""
	for _, word := range words {
		for len([]rune(word)) > width {
			if line != "" {
				lines = append(lines, line)
				line = ""
			}
			r := []rune(word)
			lines = append(lines, string(r[:width]))
			word = string(r[width:])
		}
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// oneLineCause is err on one line, without the url.Error layers that only
// repeat the URL.
func oneLineCause(err error) string {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
