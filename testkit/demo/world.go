package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/nbd-wtf/go-nostr"
)

// WorldOptions tune `grasp-sync-demo world`.
type WorldOptions struct {
	// Repos is the number of repositories seeded on the remotes (besides
	// the one found only through discovery).
	Repos int
	// Listen is the HTTP surface address the printed command gives the
	// sidecar (--listen).
	Listen string
	// GitHTTPListen is the git server address the printed command gives
	// the sidecar (--git-http.listen); empty: none.
	GitHTTPListen string
	// Progress is how often the own relay's holdings are looked at.
	Progress time.Duration
}

// DefaultWorldOptions are the defaults of `grasp-sync-demo world`:
// the sidecar's usual status address, so `grasp-sync status` finds it.
func DefaultWorldOptions() WorldOptions {
	return WorldOptions{Repos: 4, Listen: "127.0.0.1:9090", GitHTTPListen: "127.0.0.1:8080", Progress: time.Second}
}

// World is the demo's relays and git server, seeded and kept running for
// a sidecar started by hand: the real grasp-sync binary, with the command
// line Command prints.
type World struct {
	w    *world
	opts WorldOptions
	// dir holds the own git directory and the sidecar's state directory;
	// removed by Close.
	dir     string
	ownDir  bool // dir was made here (no git: no git world's directory)
	started time.Time
}

// StartWorld starts the own relay, the two remotes and (with git
// installed) the git server on 127.0.0.1, and seeds them as the demo does.
func StartWorld(ctx context.Context, opts WorldOptions) (*World, error) {
	w, err := startWorld()
	if err != nil {
		return nil, err
	}
	if err := w.seed(ctx, opts.Repos); err != nil {
		w.close()
		return nil, err
	}
	W := &World{w: w, opts: opts, started: time.Now()}
	if w.git != nil {
		W.dir = w.git.tmp
	} else {
		if W.dir, err = os.MkdirTemp("", "grasp-sync-demo-"); err != nil {
			w.close()
			return nil, err
		}
		W.ownDir = true
	}
	return W, nil
}

// Dir is the temporary directory of the own git directory and the
// sidecar's state: removed by Close.
func (W *World) Dir() string { return W.dir }

// Args are the arguments of `grasp-sync` that run the real sidecar
// against the world: the own relay, its service domain, the loopback
// addresses allowed (the remotes and the git server are on 127.0.0.1),
// the git and state directories in Dir, the HTTP addresses.
func (W *World) Args() []string {
	own := W.w.own
	args := []string{"run",
		"--own-relay", own.URL(),
		"--service-domain", own.Addr(),
		"--dial.allow", "127.0.0.0/8",
		"--state-dir", filepath.Join(W.dir, "state"),
		"--listen", W.opts.Listen,
	}
	if W.w.git != nil {
		args = append(args, "--git-dir", W.w.git.dir, "--purgatory.create-missing-repos")
		if W.opts.GitHTTPListen != "" {
			args = append(args, "--git-http.listen", W.opts.GitHTTPListen)
		}
	}
	return append(args, "--log.format", "console")
}

// Command is the command line that runs the sidecar built by
// `go build -o grasp-sync ./cmd/grasp-sync`: ./grasp-sync and Args,
// quoted for a POSIX shell.
func (W *World) Command() string {
	parts := []string{"./grasp-sync"}
	for _, a := range W.Args() {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Repositories are the hosted repositories as <npub>/<identifier>.git,
// the paths a clone asks for.
func (W *World) Repositories() []string {
	var out []string
	for _, ev := range W.w.own.Query(nostr.Filter{Kinds: []int{signed.KindAnnouncement}}) {
		if npub, err := signed.Npub(ev.PubKey); err == nil {
			out = append(out, npub+"/"+ev.Tags.GetD()+".git")
		}
	}
	slices.Sort(out)
	return out
}

// Describe prints what runs where, then the command line to run the real
// sidecar against it.
func (W *World) Describe(out io.Writer) {
	w := W.w
	fmt.Fprintln(out, "grasp-sync-demo world: relays and a git server on 127.0.0.1, running until interrupted (Ctrl-C)")
	fmt.Fprintf(out, "  own relay     %s  (GRASP policy: hosts %d announced repositories)\n", w.own.URL(), w.own.Count(nostr.Filter{Kinds: []int{signed.KindAnnouncement}}))
	fmt.Fprintf(out, "  remote A      %s  (%d events, NIP-77 on)\n", w.a.URL(), w.a.Len())
	fmt.Fprintf(out, "  remote B      %s  (%d events, REQ capped at 500)\n", w.b.URL(), w.b.Len())
	if w.git != nil {
		fmt.Fprintf(out, "  git server    %s  (another GRASP service's clone URLs: the commits of every repository)\n", w.git.server.URL)
		fmt.Fprintf(out, "  own git dir   %s  (empty: the sidecar creates the repositories and fetches into them)\n", w.git.dir)
	} else {
		fmt.Fprintln(out, "  git           not installed: no git server, the sidecar runs without purgatory")
	}
	fmt.Fprintf(out, "  temp dir      %s  (git and state directories; removed when the world stops)\n", W.dir)
	fmt.Fprintf(out, "  to sync       %d events the own relay does not have yet\n\n", len(w.expected))
	fmt.Fprintln(out, "Run the real sidecar against it, from the source tree:")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "go build -o grasp-sync ./cmd/grasp-sync")
	fmt.Fprintln(out, W.Command())
	fmt.Fprintln(out)
	fmt.Fprintf(out, "Then `./grasp-sync status --addr %s` (or http://%s/ in a browser)", W.opts.Listen, W.opts.Listen)
	if repos := W.Repositories(); w.git != nil && W.opts.GitHTTPListen != "" && len(repos) > 0 {
		fmt.Fprintf(out, ", and once synced\ngit clone http://%s/%s", W.opts.GitHTTPListen, repos[0])
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Stop the sidecar before the world: its git and state directories go with it.")
	fmt.Fprintln(out)
}

// Watch prints how many of the world's events the own relay holds each
// time that changes, until ctx is done.
func (W *World) Watch(ctx context.Context, out io.Writer) {
	t := time.NewTicker(W.opts.Progress)
	defer t.Stop()
	last := -1
	for {
		if n := W.w.arrived(); n != last {
			last = n
			total := len(W.w.expected)
			if n == total {
				fmt.Fprintf(out, "  %6.1fs  all %d events are on the own relay: synced\n", time.Since(W.started).Seconds(), total)
			} else {
				fmt.Fprintf(out, "  %6.1fs  own relay holds %d of the %d events to sync\n", time.Since(W.started).Seconds(), n, total)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the relays and the git server and removes Dir.
func (W *World) Close() {
	W.w.close()
	if W.ownDir {
		_ = os.RemoveAll(W.dir)
	}
}
