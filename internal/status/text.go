package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// WriteText renders the snapshot for a terminal (grasp-sync status): a
// summary, the relay table, notes on relays and the purgatory per
// identifier. Long errors wrap; nothing is cut.
func WriteText(w io.Writer, s *Snapshot, now time.Time) error {
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
	if o := s.OwnRelay; o.RootsAppliedLate > 0 || o.RootsUnapplied > 0 {
		fmt.Fprintf(tw, "late roots\t%d applied although the self-subscription did not deliver them within sync.root_wait, %d cannot be applied (orphan bound)\n",
			o.RootsAppliedLate, o.RootsUnapplied)
	}
	fmt.Fprintf(tw, "pending batches\t%d\n", s.PendingBatches)
	fmt.Fprintf(tw, "publisher\tqueued %d, in flight %d, accepted %d, duplicates %d, rejected %d\n",
		s.Publisher.Queued, s.Publisher.InFlight, s.Publisher.Accepted, s.Publisher.Duplicates, s.Publisher.Rejected)
	if s.Purgatory.Enabled {
		fmt.Fprintf(tw, "purgatory\t%d events, %d identifiers queued for a git sync, %d waiting for a clone domain's request slot (%s)\n",
			s.Purgatory.Events, s.Purgatory.QueueSize, s.Purgatory.Waiting, s.Purgatory.DomainLimit)
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
	fmt.Fprintln(tw, "URL\tSTATE\tHEALTH\tNEG\tREPOS\tROOTS\tFILTERS\tBATCHES\tEVENTS (NEW)\tFAILURES\tLAST ERROR")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%d\t%d\t%d (%d)\t%d\t%s\n",
			url, r.State, r.Health, neg,
			r.ReposConfirmed, r.ReposConfirmed+r.ReposPending,
			r.RootsConfirmed, r.RootsConfirmed+r.RootsPending,
			r.FiltersOpen, r.PendingBatches, r.EventsReceived, r.EventsNew, r.Failures, lastErr[0])
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
func stateText(st *State, now time.Time) string {
	if st.Outcome == "" {
		return "-"
	}
	if st.Dir == "" {
		return st.Outcome
	}
	text := fmt.Sprintf("%s, %s: %d bytes, %d events (%.0f bytes/event)", st.Outcome, st.Dir, st.Bytes, st.Events, st.BytesPerEvent)
	if !st.LastFlush.IsZero() {
		text += ", last write " + Round(now.Sub(st.LastFlush)) + " ago"
		if st.RelaysSaved.IsZero() {
			text += ", relay states not saved yet"
		} else {
			text += ", relay states saved " + Round(now.Sub(st.RelaysSaved)) + " ago"
		}
	}
	return text
}

// printRelayNotes lists what the relay table has no room for: relays
// caught truncating results, relays that asked for AUTH to read and relays
// that refused reads for good.
func printRelayNotes(w io.Writer, relays []Relay) {
	header := false
	for _, r := range relays {
		if r.Truncation == "" && r.ReadAuth == "" && r.Refused == "" {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nrelay notes")
			header = true
		}
		fmt.Fprintf(w, "  %s\n", r.URL)
		for _, n := range [][2]string{{"truncation", r.Truncation}, {"read AUTH", r.ReadAuth}, {"refused", r.Refused}} {
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
func printPurgatory(w io.Writer, p *Purgatory, now time.Time) error {
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
		next := NextAttemptText(now, id)
		lastErr := wrapText(id.LastError, errorColumnWidth)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", id.Identifier, id.States, id.PRs,
			Round(now.Sub(id.HeldSince)), Round(id.ExpiresAt.Sub(now)), id.Attempts, next, lastErr[0])
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
	return printDomains(w, p, now)
}

// printDomains lists the clone URL domains git requests wait for, run on
// or were counted against.
func printDomains(w io.Writer, p *Purgatory, now time.Time) error {
	if len(p.Domains) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nclone domains (each: %s)\n", p.DomainLimit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tWAITING\tIN FLIGHT\tIN WINDOW\tNEXT SLOT")
	for _, d := range p.Domains {
		next := "-"
		if d.NextSlot != nil {
			next = "in " + Round(d.NextSlot.Sub(now))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", d.Domain, d.Waiting, d.InFlight, d.RequestsInWindow, next)
	}
	return tw.Flush()
}

// NextAttemptText says when an identifier's next git sync is: "syncing",
// "in 40s", "waiting for <domain> (30 requests/1m0s)" (a request slot of a
// throttled domain: it starts when one frees) or "-" (none planned).
func NextAttemptText(now time.Time, id PurgatoryIdentifier) string {
	switch {
	case id.Syncing:
		return "syncing"
	case len(id.WaitingFor) > 0:
		domains := make([]string, len(id.WaitingFor))
		for i, w := range id.WaitingFor {
			domains[i] = w.Domain
		}
		text := "waiting for " + strings.Join(domains, ", ") + " (" + id.WaitingFor[0].Rate() + ")"
		if id.NextAttempt != nil {
			text += "; attempt in " + Round(id.NextAttempt.Sub(now))
		}
		return text
	case id.NextAttempt == nil:
		return "-"
	}
	return "in " + Round(id.NextAttempt.Sub(now))
}

// Round is a duration rounded to the second, "0s" when negative: how the
// terminal and the status page show ages and waits.
func Round(d time.Duration) string {
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
