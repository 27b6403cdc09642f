package check

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// runCheck runs check against url with the defaults and returns the report.
func runCheck(t *testing.T, url string, edit func(*config.Config)) (string, error) {
	t.Helper()
	cfg := config.Default()
	cfg.OwnRelay = url
	if edit != nil {
		edit(cfg)
	}
	rep, err := Run(context.Background(), cfg, 5*time.Second, "")
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil {
		t.Fatal(err)
	}
	return out.String(), nil
}

func startRelay(t *testing.T, opts harness.RelayOptions) *harness.Relay {
	t.Helper()
	r, err := harness.StartRelay(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// gitEvents signs n patches.
func gitEvents(t *testing.T, n int) []*nostr.Event {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	evs := make([]*nostr.Event, n)
	for i := range evs {
		ev := &nostr.Event{Kind: nip34.KindPatch, CreatedAt: nostr.Timestamp(1_700_000_000 + i), Content: "patch", Tags: nostr.Tags{{"a", "30617:x:y"}}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		evs[i] = ev
	}
	return evs
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}

func TestCheckProbesNegentropy(t *testing.T) {
	grasp := map[string]any{"supported_grasps": []string{"GRASP-01"}}
	t.Run("served", func(t *testing.T) {
		r := startRelay(t, harness.RelayOptions{Negentropy: true, NIP11Extra: grasp})
		r.Inject(gitEvents(t, 7)...)
		out, err := runCheck(t, r.URL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, out, "negentropy        NIP-77 advertised and served: 7 git events in ")
		if strings.Contains(out, "warning           the own relay") {
			t.Errorf("warnings about a relay that serves NIP-77 and states GRASP-01:\n%s", out)
		}
	})
	t.Run("not served", func(t *testing.T) {
		r := startRelay(t, harness.RelayOptions{NIP11Extra: grasp})
		out, err := runCheck(t, r.URL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, out, "NIP-77 not advertised, not served", "warning           the own relay does not serve NIP-77")
	})
	t.Run("capped", func(t *testing.T) {
		r := startRelay(t, harness.RelayOptions{Negentropy: true, NegMaxEvents: 2, NIP11Extra: grasp})
		r.Inject(gitEvents(t, 3)...)
		out, err := runCheck(t, r.URL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, out, "git-event set was refused", "warning           the own relay caps NIP-77 sets", "maxSyncEvents")
	})
	t.Run("off", func(t *testing.T) {
		r := startRelay(t, harness.RelayOptions{NIP11Extra: grasp})
		out, err := runCheck(t, r.URL(), func(c *config.Config) { c.Negentropy.Enabled = false })
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, out, "negentropy        off (negentropy.enabled: false)")
	})
}

// TestCheckWarnsWhenTheRelayLooksOpen: the write probe (an ephemeral
// event about no repository) decides: refused, the relay has a write
// policy, whatever NIP-11 says (strfry with the plugin states nothing);
// accepted by a relay whose NIP-11 states nothing, it is open; accepted
// by one that states GRASP or restricted writes, a line says so, no
// warning.
func TestCheckWarnsWhenTheRelayLooksOpen(t *testing.T) {
	for _, tt := range []struct {
		name   string
		extra  map[string]any
		policy harness.Policy
		open   bool
		line   string
	}{
		{"no grasps, no restriction, no policy", nil, nil, true, "write policy      none seen"},
		{"supported_grasps", map[string]any{"supported_grasps": []string{"GRASP-01"}}, nil, false, "although NIP-11 states GRASP"},
		{"restricted_writes", map[string]any{"limitation": map[string]any{"restricted_writes": true}}, nil, false, "although NIP-11 states GRASP"},
		{"a write policy NIP-11 does not state", nil, harness.GraspPolicy(), false, "write policy      refuses an event about no repository (restricted:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := startRelay(t, harness.RelayOptions{Negentropy: true, NIP11Extra: tt.extra, Policy: tt.policy})
			out, err := runCheck(t, r.URL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "the own relay looks open"); got != tt.open {
				t.Errorf("open warning %v, want %v:\n%s", got, tt.open, out)
			}
			wantLines(t, out, tt.line)
			if n := r.Len(); n != 0 {
				t.Errorf("the relay stores %d events after the check", n)
			}
		})
	}
}

func TestCompareLimits(t *testing.T) {
	doc := `{"limitation":{"max_message_length":65536,"max_limit":100,"max_event_tags":50,"max_content_length":"10000","created_at_lower_limit":94608000}}`
	i := &info{}
	if err := json.Unmarshal([]byte(doc), i); err != nil {
		t.Fatal(err)
	}
	var err error
	if i.limits, err = relay.ParseLimits([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	rep := &Report{}
	compareLimits(rep, i, config.Default())
	var out bytes.Buffer
	_ = rep.Print(&out)
	wantLines(t, out.String(),
		"max_message_length 65536 is below the NEG-MSG frames grasp-sync sends (negentropy.frame_limit 60000",
		"lower negentropy.frame_limit to 32668",
		"max_limit 100 is below sync.page_size 500",
		"max_event_tags 50 is below limits.max_event_tags",
		"max_content_length 10000 is below limits.max_event_bytes",
		"created_at_lower_limit 26280h0m0s",
	)
	// A relay announcing nothing gets no comparison.
	rep = &Report{}
	compareLimits(rep, &info{}, config.Default())
	if len(rep.warnings) != 0 {
		t.Errorf("warnings without limits: %v", rep.warnings)
	}
}

// The git directory is checked below its top: a repository another user
// owns is found, as the user check runs as. Tests run as root, which may
// write anywhere, so the refusal comes from a stand-in for access(2).
func TestGitDirCheckIsRecursive(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "npub1abc", "repo.git")
	for _, d := range []string{"objects/pack", "refs/heads"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	denied := filepath.Join(repo, "objects")
	old := access
	t.Cleanup(func() { access = old })
	access = func(p string) error {
		if p == denied {
			return syscall.EACCES
		}
		return old(p)
	}
	gd, err := checkGitDir(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if gd.dirs != 7 || !gd.complete || len(gd.denied) != 1 || gd.denied[0] != denied {
		t.Fatalf("dirs %d complete %v denied %v", gd.dirs, gd.complete, gd.denied)
	}
	msg := gd.deniedProblem(root).Error()
	for _, w := range []string{"1 of 7 directories under " + root, "e.g. " + denied + " (owner uid", "chown -R"} {
		if !strings.Contains(msg, w) {
			t.Errorf("problem %q lacks %q", msg, w)
		}
	}

	// Through Run: check fails with that one line.
	r := startRelay(t, harness.RelayOptions{Negentropy: true})
	_, err = runCheck(t, r.URL(), func(c *config.Config) { c.GitDir = root })
	if err == nil || !strings.HasPrefix(err.Error(), "git directory unusable: 1 of 7 directories") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err %v", err)
	}
}

// Without root, the real access(2) refuses a directory the user cannot write.
func TestGitDirCheckRealPermissions(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write everywhere")
	}
	root := t.TempDir()
	ro := filepath.Join(root, "npub1abc", "repo.git")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
	gd, err := checkGitDir(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(gd.denied) != 1 || gd.denied[0] != ro {
		t.Fatalf("denied %v", gd.denied)
	}
}

// check says how many of the own relay's announcements name service_domain
// (GRASP-01) and warns when none does: the sidecar would sync nothing.
func TestCheckCountsHostedAnnouncements(t *testing.T) {
	grasp := map[string]any{"supported_grasps": []string{"GRASP-01"}}
	r := startRelay(t, harness.RelayOptions{Negentropy: true, NIP11Extra: grasp})
	for _, d := range []string{"one", "two"} {
		r.Inject(signed.NewKey().Announcement(d,
			signed.WithRelays("wss://git.example.org", "wss://relay.other.net"),
			signed.WithClone("https://git.example.org/npub1x/"+d+".git")))
	}
	tests := []struct {
		name   string
		edit   func(*config.Config)
		want   string
		warned bool
	}{
		{"wrong domain", func(c *config.Config) { c.ServiceDomain = "git.example.com" },
			"repositories      0 of 2 announcements on the own relay list service_domain git.example.com", true},
		{"right domain", func(c *config.Config) { c.ServiceDomain = "git.example.org" },
			"repositories      2 of 2 announcements on the own relay list service_domain git.example.org", false},
		{"relay.other.net names no clone", func(c *config.Config) { c.ServiceDomain = "relay.other.net" },
			"repositories      0 of 2 announcements", true},
		{"host_all", func(c *config.Config) { c.ServiceDomain, c.Sync.HostAll = "git.example.com", true },
			"repositories      2 announcements on the own relay, all synced (sync.host_all)", false},
		{"no service_domain", nil,
			"repositories      2 announcements on the own relay, all synced (no service_domain", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCheck(t, r.URL(), tt.edit)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, out, tt.want)
			warning := "so grasp-sync will sync nothing; 2 of them name git.example.org: is that this service's service_domain?"
			if got := strings.Contains(out, warning); got != tt.warned {
				t.Errorf("warning %v, want %v:\n%s", got, tt.warned, out)
			}
		})
	}
	// An empty relay: nothing to warn about.
	empty := startRelay(t, harness.RelayOptions{Negentropy: true, NIP11Extra: grasp})
	out, err := runCheck(t, empty.URL(), func(c *config.Config) { c.ServiceDomain = "git.example.com" })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "sync nothing") {
		t.Errorf("warning on an empty relay:\n%s", out)
	}
}
