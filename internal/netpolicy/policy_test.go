package netpolicy

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// fakeResolver answers from a table and counts lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	calls   int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	a, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// loopbackOnly is a Dial hook that fails the test for any non-loopback
// address and records what it was asked to dial.
type loopbackOnly struct {
	t     *testing.T
	mu    sync.Mutex
	dials []string
}

func (d *loopbackOnly) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		d.t.Errorf("dial of malformed address %q", address)
		return nil, err
	}
	if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
		d.t.Errorf("dial of non-loopback address %q", address)
		return nil, errors.New("refused by test dialer")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *loopbackOnly) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1", ReasonLoopback},
		{"127.255.1.2", ReasonLoopback},
		{"::1", ReasonLoopback},
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"10.0.0.1", ReasonPrivate},
		{"172.16.5.4", ReasonPrivate},
		{"192.168.1.1", ReasonPrivate},
		{"fd12:3456::1", ReasonPrivate},
		{"169.254.1.1", ReasonLinkLocal},
		{"fe80::1", ReasonLinkLocal},
		{"169.254.169.254", ReasonMetadata},
		{"::ffff:169.254.169.254", ReasonMetadata},
		{"169.254.170.2", ReasonMetadata},
		{"100.100.100.200", ReasonMetadata},
		{"fd00:ec2::254", ReasonMetadata},
		{"224.0.0.1", ReasonMulticast},
		{"ff02::1", ReasonMulticast},
		{"0.0.0.0", ReasonUnspecified},
		{"0.1.2.3", ReasonUnspecified},
		{"::", ReasonUnspecified},
		{"100.64.0.1", ReasonReserved},
		{"198.18.0.1", ReasonReserved},
		{"192.0.2.7", ReasonReserved},
		{"255.255.255.255", ReasonReserved},
		{"2001:db8::1", ReasonReserved},
		{"64:ff9b::a00:1", ReasonPrivate},      // NAT64 of 10.0.0.1
		{"64:ff9b::a9fe:a9fe", ReasonMetadata}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::", ReasonLoopback},      // 6to4 of 127.0.0.1
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8
	} {
		if got := Classify(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Classify(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := Classify(netip.Addr{}); got == "" {
		t.Error("the zero Addr is public")
	}
}

func TestURLChecks(t *testing.T) {
	strict := mustPolicy(t, Options{})
	loop := mustPolicy(t, Options{Allow: []string{"127.0.0.0/8", "::1", "gitea.internal"}})
	for _, tc := range []struct {
		name   string
		p      *Policy
		clone  bool
		raw    string
		reason string // "" = allowed
	}{
		{"public wss", strict, false, "wss://relay.example.com", ""},
		{"public ws with port", strict, false, "ws://relay.example.com:7777/path", ""},
		{"loopback", strict, false, "ws://127.0.0.1:7777", ReasonLoopback},
		{"loopback allowed", loop, false, "ws://127.0.0.1:7777", ""},
		{"metadata", strict, false, "ws://169.254.169.254/", ReasonMetadata},
		{"metadata despite loopback allow", loop, false, "ws://169.254.169.254/", ReasonMetadata},
		{"ipv6 loopback", strict, false, "ws://[::1]", ReasonLoopback},
		{"ipv6 loopback allowed by address", loop, false, "ws://[::1]:80", ""},
		{"mapped private", strict, false, "ws://[::ffff:10.0.0.1]/", ReasonPrivate},
		{"localhost name", strict, false, "ws://localhost:7777", ReasonLoopback},
		{"sub.localhost name", strict, false, "wss://a.b.localhost", ReasonLoopback},
		{"localhost allowed by CIDR", loop, false, "ws://localhost:7777", ""},
		{"private", strict, false, "wss://10.1.2.3", ReasonPrivate},
		{"zero", strict, false, "ws://0.0.0.0:80", ReasonUnspecified},
		{"decimal ip is a name, not an address", strict, false, "ws://2130706433", ""},
		{"http is no relay scheme", strict, false, "http://relay.example.com", ReasonScheme},
		{"credentials", strict, false, "wss://u:p@relay.example.com", ReasonURL},
		{"leading dash", strict, false, "-ws://x", ReasonURL},
		{"space", strict, false, "ws://relay.example.com/a b", ReasonURL},
		{"bad port", strict, false, "ws://relay.example.com:99999", ReasonURL},
		{"bad host", strict, false, "ws://rel$ay.example.com", ReasonURL},
		{"no host", strict, false, "ws:///path", ReasonURL},
		{"clone https", strict, true, "https://github.com/a/b.git", ""},
		{"clone git", strict, true, "git://git.example.org/b.git", ""},
		{"clone http private", strict, true, "http://10.0.0.1/x.git", ReasonPrivate},
		{"clone ext", strict, true, "ext::sh -c touch% /tmp/pwned", ReasonURL},
		{"clone ext no space", strict, true, "ext::sh", ReasonScheme},
		{"clone upload-pack", strict, true, "--upload-pack=touch /tmp/x", ReasonURL},
		{"clone file", strict, true, "file:///etc", ReasonScheme},
		{"clone ssh", strict, true, "ssh://git@github.com/a/b.git", ReasonScheme},
		{"clone scp-like", strict, true, "git@github.com:a/b.git", ReasonURL},
		{"clone ws", strict, true, "ws://github.com/a/b.git", ReasonScheme},
		{"clone allowed host name", loop, true, "http://gitea.internal:3000/a/b.git", ""},
		{"clone allowed host name is exact", loop, true, "http://x.gitea.internal/a/b.git", ""},
		{"clone metadata", loop, true, "http://[fd00:ec2::254]/latest", ReasonMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := tc.p.CheckRelayURL
			if tc.clone {
				check = tc.p.CheckCloneURL
			}
			err := check(tc.raw)
			if got := Reason(err); got != tc.reason {
				t.Fatalf("check(%q) = %v (reason %q), want reason %q", tc.raw, err, got, tc.reason)
			}
			if tc.reason != "" && !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v does not wrap ErrRefused", err)
			}
		})
	}
}

func TestNewRejectsBadAllowEntry(t *testing.T) {
	if _, err := New(Options{Allow: []string{"10.0.0.0/8", "not a host!"}}); err == nil {
		t.Fatal("New accepted a bad allow entry")
	}
}

func TestDialChecksResolvedAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"evil.example":     addrs("10.0.0.7"),
		"meta.example":     addrs("169.254.169.254"),
		"mixed.example":    addrs("127.0.0.1", "10.0.0.1"),
		"loop.example":     addrs("127.0.0.1"),
		"loop6.example":    addrs("::ffff:127.0.0.1"),
		"cgnat.example":    addrs("100.64.3.4"),
		"nat64-10.example": addrs("64:ff9b::a00:1"),
	}}
	d := &loopbackOnly{t: t}
	p := mustPolicy(t, Options{Allow: []string{"127.0.0.0/8"}, Resolver: res, Dial: d.Dial})
	ctx := context.Background()
	for host, want := range map[string]string{
		"evil.example":     ReasonPrivate,
		"meta.example":     ReasonMetadata,
		"mixed.example":    ReasonPrivate,
		"cgnat.example":    ReasonReserved,
		"nat64-10.example": ReasonPrivate,
		"nxdomain.example": ReasonResolve,
		"10.0.0.1":         ReasonPrivate,
		"169.254.169.254":  ReasonMetadata,
	} {
		c, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err == nil {
			c.Close()
		}
		if got := Reason(err); got != want {
			t.Errorf("dial %s: %v (reason %q), want %q", host, err, got, want)
		}
	}
	if n := d.count(); n != 0 {
		t.Fatalf("refused destinations reached the dialer %d times", n)
	}
	for _, host := range []string{"loop.example", "loop6.example", "127.0.0.1", "localhost"} {
		c, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("dial %s: %v", host, err)
		}
		c.Close()
	}
	d.mu.Lock()
	for _, a := range d.dials {
		if !strings.HasPrefix(a, "127.0.0.1:") && !strings.HasPrefix(a, "[::1]:") {
			t.Errorf("dialer got %q: a name, not the checked address", a)
		}
	}
	d.mu.Unlock()
}

// The dialer re-checks the peer at connect time: even a loopback address
// that slipped past every earlier check is not connected to.
func TestControlRefusesAtConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := mustPolicy(t, Options{})
	c, err := p.strict.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err == nil {
		c.Close()
		t.Fatal("strict dialer connected to loopback")
	}
	if got := Reason(err); got != ReasonLoopback {
		t.Fatalf("err = %v, want loopback refusal", err)
	}
	if err := p.Control("tcp", "[fd00:ec2::254]:80", nil); Reason(err) != ReasonMetadata {
		t.Fatalf("Control(metadata) = %v", err)
	}
	if err := p.Control("tcp", "8.8.8.8:443", nil); err != nil {
		t.Fatalf("Control(public) = %v", err)
	}
}

// A name whose answer changes between the check and the connect
// (rebinding) is checked on every dial: what is connected to is always
// the address that was checked.
func TestRebindingIsCheckedPerDial(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{"rebind.example": addrs("127.0.0.1")}}
	d := &loopbackOnly{t: t}
	p := mustPolicy(t, Options{Allow: []string{"127.0.0.0/8"}, Resolver: res, Dial: d.Dial})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c, err := p.DialContext(context.Background(), "tcp", "rebind.example:"+port)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	res.mu.Lock()
	res.answers["rebind.example"] = addrs("169.254.169.254")
	res.mu.Unlock()
	if _, err := p.DialContext(context.Background(), "tcp", "rebind.example:"+port); Reason(err) != ReasonMetadata {
		t.Fatalf("second dial after rebinding: %v", err)
	}
	if n := d.count(); n != 1 {
		t.Fatalf("dialer called %d times, want 1", n)
	}
}

func TestAllowedHostNameSkipsResolution(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{}}
	var dialed []string
	p := mustPolicy(t, Options{Allow: []string{"Gitea.Internal."}, Resolver: res,
		Dial: func(_ context.Context, _, address string) (net.Conn, error) {
			dialed = append(dialed, address)
			return nil, errors.New("test: not connecting")
		}})
	_, _ = p.DialContext(context.Background(), "tcp", "gitea.internal:3000")
	if res.calls != 0 || len(dialed) != 1 || dialed[0] != "gitea.internal:3000" {
		t.Fatalf("resolver calls %d, dialed %v", res.calls, dialed)
	}
}

func TestRefusalsLoggedOnceAndCounted(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	reg := prometheus.NewRegistry()
	p := mustPolicy(t, Options{Logger: zap.New(core), Registerer: reg, RememberMax: 2})
	for i := 0; i < 3; i++ {
		_ = p.CheckRelayURL("ws://169.254.169.254/")
		_ = p.CheckCloneURL("file:///etc")
	}
	_ = p.CheckCloneURL("http://10.0.0.1/x.git") // over RememberMax: counted, not logged
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d log entries, want 2: %v", n, logs.All())
	}
	e := logs.All()[0]
	if e.ContextMap()["reason"] != ReasonMetadata || e.ContextMap()["destination"] != "ws://169.254.169.254/" {
		t.Fatalf("log entry %v", e.ContextMap())
	}
	if got := testkit.Value(t, p.refused.WithLabelValues("relay", ReasonMetadata)); got != 3 {
		t.Fatalf("relay/metadata refusals = %v, want 3", got)
	}
	if got := testkit.Value(t, p.refused.WithLabelValues("clone", ReasonPrivate)); got != 1 {
		t.Fatalf("clone/private refusals = %v, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "ngit_sync_dial_refused_total" {
		t.Fatalf("gathered %v (%v), want ngit_sync_dial_refused_total", mfs, err)
	}
	nonZero := 0
	for _, m := range mfs[0].GetMetric() {
		if m.GetCounter().GetValue() != 0 {
			nonZero++
		}
	}
	if nonZero != 3 {
		t.Fatalf("%d series counted refusals, want 3 (relay/metadata, clone/scheme, clone/private)", nonZero)
	}
}

// TestRefusalSeriesAtZero: every kind × reason series of
// ngit_sync_dial_refused_total exists at 0 from New, and the lists it is
// built from hold every Kind… and Reason… constant of the package, so a new
// reason gets its series too.
func TestRefusalSeriesAtZero(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var wantKinds, wantReasons []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					switch {
					case strings.HasPrefix(id.Name, "Kind"):
						wantKinds = append(wantKinds, v)
					case strings.HasPrefix(id.Name, "Reason"):
						wantReasons = append(wantReasons, v)
					}
				}
			}
		}
	}
	var gotKinds []string
	for _, k := range Kinds() {
		gotKinds = append(gotKinds, string(k))
	}
	slices.Sort(wantKinds)
	slices.Sort(wantReasons)
	slices.Sort(gotKinds)
	gotReasons := Reasons()
	slices.Sort(gotReasons)
	if len(wantKinds) < 3 || len(wantReasons) < 10 {
		t.Fatalf("found only kinds %v and reasons %v in the sources", wantKinds, wantReasons)
	}
	if !slices.Equal(gotKinds, wantKinds) || !slices.Equal(gotReasons, wantReasons) {
		t.Fatalf("Kinds() %v, Reasons() %v; the constants are %v and %v", gotKinds, gotReasons, wantKinds, wantReasons)
	}

	reg := prometheus.NewRegistry()
	mustPolicy(t, Options{Registerer: reg})
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %v (%v)", mfs, err)
	}
	have := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		have[l["kind"]+"/"+l["reason"]] = m.GetCounter().GetValue()
	}
	for _, k := range wantKinds {
		for _, r := range wantReasons {
			if v, ok := have[k+"/"+r]; !ok || v != 0 {
				t.Errorf("ngit_sync_dial_refused_total{kind=%q,reason=%q}: present %t, value %v; want present at 0", k, r, ok, v)
			}
		}
	}
	if len(have) != len(wantKinds)*len(wantReasons) {
		t.Errorf("%d series, want %d", len(have), len(wantKinds)*len(wantReasons))
	}
}

func TestHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	strict := mustPolicy(t, Options{})
	if resp, err := strict.HTTPClient(0).Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("strict client reached loopback")
	} else if !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	loose := mustPolicy(t, Options{Allow: []string{"127.0.0.1"}})
	resp, err := loose.HTTPClient(0).Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed client: %v", err)
	}
	resp.Body.Close()
	resp, err = loose.HTTPClient(0).Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect followed: status %d", resp.StatusCode)
	}
}

// recordingRunner records the commands it was asked to run.
type recordingRunner struct {
	mu   sync.Mutex
	cmds []gitx.Cmd
}

func (r *recordingRunner) Run(_ context.Context, c gitx.Cmd) (gitx.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, c)
	return gitx.Result{}, nil
}

var _ gitx.Runner = (*recordingRunner)(nil)

func TestGitRunner(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"git.example.org":  addrs("93.184.216.34", "2606:2800:220:1::1"),
		"evil.example.org": addrs("10.0.0.9"),
	}}
	rec := &recordingRunner{}
	p := mustPolicy(t, Options{Resolver: res})
	g := p.GitRunner(rec)
	ctx := context.Background()
	fetch := func(url string) gitx.Cmd {
		return gitx.Cmd{Args: []string{"fetch", "--quiet", "--", url, "0123456789012345678901234567890123456789"}}
	}
	for _, c := range []gitx.Cmd{
		fetch("ext::sh -c touch% /tmp/pwned"),
		fetch("--upload-pack=touch /tmp/pwned"),
		fetch("file:///etc"),
		fetch("http://10.0.0.1/x.git"),
		fetch("http://169.254.169.254/x.git"),
		fetch("https://evil.example.org/x.git"),
		fetch("ssh://git@github.com/a/b.git"),
		fetch("relative/path"),
		{Args: []string{"fetch", "http://10.0.0.1/x.git"}},
		{Args: []string{"--no-pager", "fetch", "http://10.0.0.1/x.git"}},
		{Args: []string{"remote", "update"}},
		{Args: []string{"fetch", "--"}},
		{Args: []string{"ls-remote", "https://git.example.org/x.git"}},
	} {
		if _, err := g.Run(ctx, c); !errors.Is(err, ErrRefused) {
			t.Errorf("git %v: err = %v, want refusal", c.Args, err)
		}
	}
	if len(rec.cmds) != 0 {
		t.Fatalf("refused commands reached the runner: %+v", rec.cmds)
	}
	ok := []gitx.Cmd{
		{Args: []string{"cat-file", "--batch-check"}},
		{Config: []string{"protocol.file.allow=always"}, Args: []string{"fetch", "--", "/srv/git/npub1x/a.git", "0123456789012345678901234567890123456789"}},
		fetch("https://git.example.org/x.git"),
		fetch("git://git.example.org/x.git"),
		fetch("http://93.184.216.34:8080/x.git"),
	}
	for _, c := range ok {
		if _, err := g.Run(ctx, c); err != nil {
			t.Errorf("git %v: %v", c.Args, err)
		}
	}
	if len(rec.cmds) != len(ok) {
		t.Fatalf("runner got %d commands, want %d", len(rec.cmds), len(ok))
	}
	pinned := rec.cmds[2].Config
	want := "http.curloptResolve=git.example.org:443:93.184.216.34,[2606:2800:220:1::1]"
	if len(pinned) != 1 || pinned[0] != want {
		t.Fatalf("https fetch config = %q, want %q", pinned, want)
	}
	if len(rec.cmds[3].Config) != 0 || len(rec.cmds[4].Config) != 0 {
		t.Fatalf("git:// or literal-address fetch got curl pinning: %q %q", rec.cmds[3].Config, rec.cmds[4].Config)
	}
	// git:// is pinned by replacing the host with the checked address.
	if got, want := argAfterDashes(rec.cmds[3].Args), "git://93.184.216.34:9418/x.git"; got != want {
		t.Fatalf("git:// fetch repository = %q, want %q", got, want)
	}
}

func mustPolicy(t *testing.T, o Options) *Policy {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolverAnswersOnlyAllowedAddresses(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"pub.example":  addrs("93.184.216.34"),
		"priv.example": addrs("10.0.0.1"),
		"named.local":  addrs("10.9.9.9"),
	}}
	p := mustPolicy(t, Options{Allow: []string{"named.local", "192.168.0.0/16"}, Resolver: res})
	r := p.Resolver(KindClone)
	ctx := context.Background()
	for host, want := range map[string]string{
		"pub.example": "", "named.local": "", "192.168.1.2": "",
		"priv.example": ReasonPrivate, "127.0.0.1": ReasonLoopback, "localhost": ReasonLoopback, "nx.example": ReasonResolve,
	} {
		got, err := r.LookupNetIP(ctx, "ip", host)
		if Reason(err) != want || (want == "") != (len(got) > 0) {
			t.Errorf("LookupNetIP(%s) = %v, %v; want reason %q", host, got, err, want)
		}
		if want != "" && !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("clone refusal of %s does not match gitx.ErrInvalid", host)
		}
	}
}

func BenchmarkCheckRelayURL(b *testing.B) {
	p, err := New(Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		b.Fatal(err)
	}
	urls := []string{"wss://relay.example.com", "ws://127.0.0.1:7777", "ws://169.254.169.254/", "wss://relay.damus.io/"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = p.CheckRelayURL(urls[i%len(urls)])
	}
}

func BenchmarkDialContextRefused(b *testing.B) {
	res := &fakeResolver{answers: map[string][]netip.Addr{"evil.example": addrs("10.0.0.7")}}
	p, err := New(Options{Resolver: res, Dial: func(context.Context, string, string) (net.Conn, error) {
		b.Fatal("dialled")
		return nil, nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.DialContext(ctx, "tcp", "evil.example:443"); err == nil {
			b.Fatal("not refused")
		}
	}
}

func argAfterDashes(args []string) string {
	for i, a := range args {
		if a == "--" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
