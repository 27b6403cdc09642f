package strfrypolicy

import (
	"testing"

	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/nbd-wtf/go-nostr"
)

const domain = "git.example.com"

// hosted is an announcement listing the service in clone and relays.
func hosted(k *signed.Key, d string, opts ...signed.Option) *nostr.Event {
	opts = append([]signed.Option{
		signed.WithClone("https://" + domain + "/" + k.Npub() + "/" + d + ".git"),
		signed.WithRelays("wss://" + domain),
	}, opts...)
	return k.Announcement(d, opts...)
}

func decide(t *testing.T, r *Rules, ev *nostr.Event, wantAccept bool, wantReason string) {
	t.Helper()
	accept, reason := r.Decide(ev)
	if accept != wantAccept || reason != wantReason {
		t.Fatalf("kind %d: got accept=%v %q, want accept=%v %q", ev.Kind, accept, reason, wantAccept, wantReason)
	}
}

func TestAnnouncements(t *testing.T) {
	r := NewRules(domain, false)
	alice := signed.NewKey()
	decide(t, r, hosted(alice, "repo"), true, "")
	// The service's host compares as nip34.ListsService has it: case and
	// default ports do not matter.
	decide(t, r, alice.Announcement("other",
		signed.WithClone("https://GIT.example.com:443/"+alice.Npub()+"/other.git"),
		signed.WithRelays("wss://git.example.com:443")), true, "")
	// Listed only in clone, only in relays, or not at all: rejected.
	decide(t, r, alice.Announcement("clone-only",
		signed.WithClone("https://"+domain+"/"+alice.Npub()+"/clone-only.git"),
		signed.WithRelays("wss://relay.example.org")), false, ReasonNotListed)
	decide(t, r, alice.Announcement("relays-only",
		signed.WithClone("https://github.com/alice/relays-only.git"),
		signed.WithRelays("wss://"+domain)), false, ReasonNotListed)
	decide(t, r, alice.Announcement("foreign",
		signed.WithClone("https://elsewhere.example/"+alice.Npub()+"/foreign.git"),
		signed.WithRelays("wss://elsewhere.example")), false, ReasonNotListed)
	noD := hosted(alice, "x")
	noD.Tags = nostr.Tags{{"clone", "https://" + domain + "/x.git"}, {"relays", "wss://" + domain}}
	decide(t, r, noD, false, ReasonNoIdentifier)
	if repos, _ := r.Counts(); repos != 2 {
		t.Fatalf("accepted repositories %d, want 2", repos)
	}

	// sync.host_all: every announcement is hosted.
	all := NewRules(domain, true)
	decide(t, all, alice.Announcement("anything", signed.WithClone("https://github.com/a/b.git")), true, "")
}

func TestStates(t *testing.T) {
	r := NewRules(domain, false)
	owner, bob, carol, mallory := signed.NewKey(), signed.NewKey(), signed.NewKey(), signed.NewKey()
	// A state before its announcement is rejected (the sidecar publishes
	// announcements first and the state again once it is accepted).
	decide(t, r, owner.State("repo"), false, ReasonStateForeign)
	decide(t, r, hosted(owner, "repo", signed.WithMaintainers(bob.PubKey)), true, "")
	decide(t, r, owner.State("repo"), true, "")
	decide(t, r, bob.State("repo"), true, "")
	// carol is bob's maintainer: in the owner's recursive set once bob's
	// announcement (accepted: it lists the service) says so.
	decide(t, r, carol.State("repo"), false, ReasonStateForeign)
	decide(t, r, hosted(bob, "repo", signed.WithMaintainers(carol.PubKey)), true, "")
	decide(t, r, carol.State("repo"), true, "")
	decide(t, r, mallory.State("repo"), false, ReasonStateForeign)
	// The owner's state of an identifier it has no hosted announcement of.
	decide(t, r, owner.State("other"), false, ReasonStateForeign)
	decide(t, r, owner.State(""), false, ReasonNoIdentifier)

	// An older version of an announcement does not undo a newer one's
	// maintainers.
	older := hosted(owner, "repo", signed.WithCreatedAt(nostr.Now()-3600))
	decide(t, r, older, true, "")
	decide(t, r, bob.State("repo"), true, "")
}

func TestEventsAboutRepositories(t *testing.T) {
	r := NewRules(domain, false)
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := alice.RepoAddress("repo")
	foreign := bob.RepoAddress("foreign")
	ann := hosted(alice, "repo")
	issue := bob.Issue(repo, "broken")

	// Before the announcement: rejected.
	decide(t, r, issue, false, ReasonUnrelated)
	decide(t, r, ann, true, "")
	decide(t, r, bob.Announcement("foreign", signed.WithRelays("wss://elsewhere.example")), false, ReasonNotListed)

	// Layer 2: tags an accepted repository by a (and A, q).
	decide(t, r, issue, true, "")
	patch := bob.Patch(repo)
	decide(t, r, patch, true, "")
	decide(t, r, bob.CIRun(repo, signed.FakeCommit("c"), "success"), true, "")
	quote := bob.Quote(ann)
	decide(t, r, quote, true, "")
	// About a repository not accepted here.
	decide(t, r, bob.Issue(foreign, "elsewhere"), false, ReasonUnrelated)
	// Unrelated.
	decide(t, r, bob.Reply(quote), false, ReasonUnrelated)

	// Layer 3: replies to accepted root events by e or E, as the sidecar
	// asks for them; the issue and the patch became roots.
	decide(t, r, alice.Reply(issue), true, "")
	decide(t, r, alice.Comment(issue, nil), true, "")
	decide(t, r, alice.Status(signed.KindStatusClosed, patch), true, "")
	reply := alice.Reply(issue)
	// A reply to a reply names the root (NIP-10 marked root tag) too.
	decide(t, r, bob.Reply(reply), true, "")
	// A root of a foreign repository does not become a root here, so a
	// reply to it that names no hosted repository is refused.
	foreignIssue := bob.Issue(foreign, "x")
	foreignIssue.Tags = append(foreignIssue.Tags, nostr.Tag{"a", repo})
	decide(t, r, foreignIssue, true, "") // it tags the hosted repository too
	decide(t, r, alice.Reply(foreignIssue), true, "")
	onlyForeign := bob.Issue(foreign, "y")
	decide(t, r, onlyForeign, false, ReasonUnrelated)
	decide(t, r, alice.Reply(onlyForeign), false, ReasonUnrelated)
	if _, roots := r.Counts(); roots != 3 {
		t.Fatalf("root events %d, want 3 (issue, patch, the issue tagging both repositories)", roots)
	}
}
