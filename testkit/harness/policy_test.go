package harness_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// publishOne publishes ev and returns "" when accepted or the OK reason.
func publishOne(t *testing.T, r *harness.Relay, ev *nostr.Event) string {
	t.Helper()
	err := harness.Publish(testCtx(t), r.URL(), ev)
	if err == nil {
		return ""
	}
	var rej *harness.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("publish: %v", err)
	}
	return rej.Reason
}

func TestHarnessGraspPolicy(t *testing.T) {
	const gitHost = "git.example.org"
	r := harness.Start(t, harness.RelayOptions{Policy: harness.GraspPolicy(gitHost)})
	owner, maint, stranger := signed.NewKey(), signed.NewKey(), signed.NewKey()
	ownClone := "http://" + r.Addr() + "/" + owner.Npub() + "/repo.git"
	gitClone := "https://" + gitHost + "/" + owner.Npub() + "/repo.git"

	ann := owner.Announcement("repo",
		signed.WithClone("https://github.com/x/repo.git", gitClone),
		signed.WithRelays("wss://relay.example.com", r.URL()),
		signed.WithMaintainers(maint.PubKey),
		signed.WithEUC(signed.FakeCommit("root")))
	repo := signed.Address(ann)
	issueForUnknown := stranger.Issue(signed.RepoAddress(stranger.PubKey, "other"), "x")
	patch := stranger.Patch(repo)
	issue := stranger.Issue(repo, "bug")
	// an event that only becomes acceptable when something accepted tags it
	orphan := stranger.Sign(&nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "orphan"})

	steps := []struct {
		name   string
		ev     *nostr.Event
		prefix string // "" = accepted
	}{
		{"announcement not listing the service in relays", owner.Announcement("repo2", signed.WithClone(ownClone), signed.WithRelays("wss://elsewhere.example.com")), "blocked:"},
		{"announcement not listing the service in clone", owner.Announcement("repo3", signed.WithClone("https://github.com/x/y.git"), signed.WithRelays(r.URL())), "blocked:"},
		{"announcement listing own relay address in both", owner.Announcement("repo4", signed.WithClone(ownClone), signed.WithRelays(r.URL()+"/")), ""},
		{"state before its announcement", owner.State("repo", signed.WithRef("refs/heads/main", signed.FakeCommit("a"))), "restricted:"},
		{"announcement", ann, ""},
		{"duplicate announcement", ann, ""},
		{"state by owner", owner.State("repo", signed.WithRef("refs/heads/main", signed.FakeCommit("b")), signed.WithHEAD("main")), ""},
		{"state by maintainer", maint.State("repo", signed.WithRef("refs/heads/main", signed.FakeCommit("c"))), ""},
		{"state by stranger", stranger.State("repo"), "restricted:"},
		{"issue for an unknown repo", issueForUnknown, "restricted:"},
		{"patch tagging the repo", patch, ""},
		{"patch reply", maint.PatchReply(repo, patch, nil), ""},
		{"issue tagging the repo", issue, ""},
		{"status of the patch", owner.Status(signed.KindStatusApplied, patch), ""},
		{"comment on the issue (E)", maint.Comment(issue, nil), ""},
		{"comment on the announcement (A)", maint.Comment(ann, nil), ""},
		{"kind 1 reply to the issue", stranger.Reply(issue), ""},
		{"quote of the repo (q address)", stranger.Quote(ann), ""},
		{"quote of the patch (q id)", stranger.Quote(patch), ""},
		{"unrelated note", orphan, "restricted:"},
	}
	for _, st := range steps {
		got := publishOne(t, r, st.ev)
		if st.prefix == "" && got != "" {
			t.Fatalf("%s: rejected with %q, want accepted", st.name, got)
		}
		if st.prefix != "" && !strings.HasPrefix(got, st.prefix) {
			t.Fatalf("%s: got %q, want rejection %q…", st.name, got, st.prefix)
		}
	}

	// tagged by an accepted event: a reply to the orphan is injected (as if
	// accepted earlier), after which the orphan itself is accepted
	r.Inject(stranger.Reply(orphan, signed.WithTags(nostr.Tag{"a", repo})))
	if got := publishOne(t, r, orphan); got != "" {
		t.Fatalf("orphan tagged by an accepted event: %q", got)
	}
	// one state per author (owner and maintainer)
	if n := r.Count(nostr.Filter{Kinds: []int{signed.KindState}}); n != 2 {
		t.Fatalf("%d state events stored, want 2", n)
	}
}

func TestHarnessBuilders(t *testing.T) {
	k := signed.KeyFromSeed("builder")
	if k2 := signed.KeyFromSeed("builder"); k2.PubKey != k.PubKey {
		t.Fatal("signed.KeyFromSeed not deterministic")
	}
	// NIP-19 vector from the NIP text
	npub, err := signed.Npub("3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d")
	if err != nil || npub != "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6" {
		t.Fatalf("signed.Npub = %q, %v", npub, err)
	}

	ann := k.Announcement("r", signed.WithName("Repo"), signed.WithClone("a", "b"), signed.WithRelays("ws://x"), signed.WithMaintainers("m"), signed.WithEUC("e"))
	repo := signed.Address(ann)
	pr := k.PR(repo, signed.FakeCommit("tip"), signed.WithClone("c"), signed.WithBranch("topic"))
	patch := k.Patch(repo, signed.WithContentSize(4000))
	all := []*nostr.Event{
		ann,
		k.State("r", signed.WithRef("refs/heads/main", "c1"), signed.WithRef("refs/tags/v1", "c2"), signed.WithHEAD("main")),
		patch,
		k.PatchReply(repo, patch, patch),
		pr,
		k.PRUpdate(repo, pr, signed.FakeCommit("tip2")),
		k.Issue(repo, "s"),
		k.Status(signed.KindStatusOpen, pr),
		k.Comment(pr, nil),
		k.Reply(pr),
		k.Quote(pr),
	}
	for _, ev := range all {
		if ok, err := ev.CheckSignature(); !ok || err != nil || !ev.CheckID() {
			t.Fatalf("kind %d: invalid signature or id", ev.Kind)
		}
	}
	tagValue := func(ev *nostr.Event, key string) []string {
		for _, tag := range ev.Tags {
			if len(tag) > 0 && tag[0] == key {
				return tag[1:]
			}
		}
		return nil
	}
	checks := []struct {
		ev   *nostr.Event
		key  string
		want string
	}{
		{ann, "d", "r"},
		{ann, "name", "Repo"},
		{ann, "clone", "a,b"},
		{ann, "relays", "ws://x"},
		{ann, "maintainers", "m"},
		{ann, "r", "e,euc"},
		{all[1], "refs/tags/v1", "c2"},
		{all[1], "HEAD", "ref: refs/heads/main"},
		{patch, "a", repo},
		{patch, "t", "root"},
		{all[3], "e", patch.ID + ",,root"},
		{pr, "c", signed.FakeCommit("tip")},
		{pr, "branch-name", "topic"},
		{pr, "clone", "c"},
		{all[5], "E", pr.ID},
		{all[5], "P", pr.PubKey},
		{all[7], "e", pr.ID + ",,root"},
		{all[8], "E", pr.ID + ",," + pr.PubKey},
		{all[8], "K", "1618"},
		{all[8], "k", "1618"},
		{all[9], "e", pr.ID + ",,root"},
		{all[10], "q", pr.ID + ",," + pr.PubKey},
	}
	for _, c := range checks {
		if got := strings.Join(tagValue(c.ev, c.key), ","); got != c.want {
			t.Errorf("kind %d tag %s = %q, want %q", c.ev.Kind, c.key, got, c.want)
		}
	}
	if n := len(patch.Content); n < 4000 || n > 4300 {
		t.Errorf("patch content %d bytes, want ~4000", n)
	}
	if !strings.Contains(patch.Content, "diff --git") {
		t.Error("patch content is not a diff")
	}
	commentOnAnn := k.Comment(ann, nil)
	if got := strings.Join(tagValue(commentOnAnn, "A"), ","); got != repo+"," {
		t.Errorf("comment on announcement A = %q", got)
	}
}
