package netpolicy

import (
	"context"
	"net/netip"
	"strconv"
	"strings"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// networkCommands are the git subcommands that contact the repository
// named by their first argument after "--".
var networkCommands = map[string]bool{
	"fetch": true, "ls-remote": true, "clone": true, "pull": true, "push": true,
	"fetch-pack": true, "send-pack": true, "archive": true, "remote": true, "submodule": true,
}

// GitRunner wraps next so that no git command reaches a destination the
// policy refuses. For a network command (fetch, ls-remote, clone, …) the
// repository must follow "--"; it is either a local absolute path (the
// purgatory copying objects between repositories it built inside the git
// directory) or a clone URL that passes ResolveCloneURL. For http and https
// the checked addresses are pinned with http.curloptResolve, so git's own
// lookup cannot be rebound to another address. For git:// the URL's host is
// replaced by the first checked address (git's own protocol has no
// equivalent of curl's resolve option; a daemon serving virtual hosts by
// name then sees the address instead).
//
// Commands refused here never start a git process.
func (p *Policy) GitRunner(next gitx.Runner) gitx.Runner {
	return &gitGuard{p: p, next: next}
}

type gitGuard struct {
	p    *Policy
	next gitx.Runner
}

var _ gitx.Runner = (*gitGuard)(nil)

func (g *gitGuard) Run(ctx context.Context, c gitx.Cmd) (gitx.Result, error) {
	network, repo := false, ""
	for i, a := range c.Args {
		if a == "--" {
			if i+1 < len(c.Args) {
				repo = c.Args[i+1]
			}
			break
		}
		// Any network subcommand before "--", even after global options.
		network = network || networkCommands[a]
	}
	if !network {
		return g.next.Run(ctx, c)
	}
	if repo == "" {
		return gitx.Result{}, g.p.refuse(KindClone, strings.Join(c.Args, " "), ReasonURL, "network command without \"--\" before its repository")
	}
	if strings.HasPrefix(repo, "/") && !strings.Contains(repo, "://") {
		return g.next.Run(ctx, c) // a local repository
	}
	u, addrs, err := g.p.ResolveCloneURL(ctx, repo)
	if err != nil {
		return gitx.Result{}, err
	}
	scheme := strings.ToLower(u.Scheme)
	if len(addrs) > 0 && scheme == "git" {
		pinned := *u
		port := u.Port()
		if port == "" {
			port = "9418"
		}
		pinned.Host = netip.AddrPortFrom(addrs[0], mustPort(port)).String()
		args := append([]string(nil), c.Args...)
		for i, a := range args {
			if a == "--" && i+1 < len(args) {
				args[i+1] = pinned.String()
				break
			}
		}
		c.Args = args
	}
	if len(addrs) > 0 && (scheme == "http" || scheme == "https") {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[scheme]
		}
		c.Config = append(append([]string(nil), c.Config...), "http.curloptResolve="+curlResolve(u.Hostname(), port, addrs))
	}
	return g.next.Run(ctx, c)
}

// curlResolve formats a CURLOPT_RESOLVE entry: HOST:PORT:ADDR[,ADDR].
func curlResolve(host, port string, addrs []netip.Addr) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		if a.Is6() {
			parts[i] = "[" + a.String() + "]"
		} else {
			parts[i] = a.String()
		}
	}
	return host + ":" + port + ":" + strings.Join(parts, ",")
}

// mustPort parses a port that url.URL.Port already found to be digits; an
// out-of-range value becomes 0, which no connection reaches.
func mustPort(p string) uint16 {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}
