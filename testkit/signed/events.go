package signed

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
)

// NIP-34 and NIP-22 event kinds.
const (
	KindReply         = 1
	KindComment       = 1111
	KindPatch         = 1617
	KindPR            = 1618
	KindPRUpdate      = 1619
	KindIssue         = 1621
	KindStatusOpen    = 1630
	KindStatusApplied = 1631
	KindStatusClosed  = 1632
	KindStatusDraft   = 1633
	// KindCIWorkflowRun is a CI event (NIP-C1 uses kinds 9840–9844 and
	// 39842) that tags the repository it ran for.
	KindCIWorkflowRun = 9841
	KindAnnouncement  = 30617
	KindState         = 30618
)

// Key is a Nostr key pair that signs the events it builds. Make keys with
// NewKey or KeyFromSeed.
type Key struct {
	// Secret is the hex private key.
	Secret string
	// PubKey is the hex public key.
	PubKey string

	priv *btcec.PrivateKey
}

// NewKey returns a fresh random key (nostr.GeneratePrivateKey).
func NewKey() *Key { return keyFromSecret(nostr.GeneratePrivateKey()) }

// KeyFromSeed returns the key derived from seed: the same seed always gives
// the same key.
func KeyFromSeed(seed string) *Key {
	sum := sha256.Sum256([]byte("grasp-sync harness key " + seed))
	return keyFromSecret(hex.EncodeToString(sum[:]))
}

func keyFromSecret(sk string) *Key {
	raw, err := hex.DecodeString(sk)
	if err != nil || len(raw) != 32 {
		panic(fmt.Sprintf("harness: invalid secret key %q", sk))
	}
	priv, pub := btcec.PrivKeyFromBytes(raw)
	return &Key{Secret: sk, PubKey: hex.EncodeToString(schnorr.SerializePubKey(pub)), priv: priv}
}

// Npub returns the bech32 public key.
func (k *Key) Npub() string {
	npub, err := Npub(k.PubKey)
	if err != nil {
		panic(err.Error())
	}
	return npub
}

// Sign sets ev's pubkey, id and signature and returns ev. It panics if the
// key is invalid, which never happens for keys from NewKey or KeyFromSeed.
func (k *Key) Sign(ev *nostr.Event) *nostr.Event {
	if k.priv == nil {
		if err := ev.Sign(k.Secret); err != nil {
			panic(fmt.Sprintf("harness: sign: %v", err))
		}
		return ev
	}
	// as go-nostr's Event.Sign, without deriving the public key again
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	ev.PubKey = k.PubKey
	h := sha256.Sum256(ev.Serialize())
	sig, err := schnorr.Sign(k.priv, h[:], schnorr.FastSign())
	if err != nil {
		panic(fmt.Sprintf("harness: sign: %v", err))
	}
	ev.ID = hex.EncodeToString(h[:])
	ev.Sig = hex.EncodeToString(sig.Serialize())
	return ev
}

// SignAll signs events in parallel (one goroutine per CPU); each event is
// signed by keys[i % len(keys)]. Use it for large batches.
func SignAll(keys []*Key, evs []*nostr.Event) {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(evs); i += workers {
				keys[i%len(keys)].Sign(evs[i])
			}
		}(w)
	}
	wg.Wait()
}

// Option adjusts an event before it is signed. Options run after the
// builder's own tags are set, in the order given.
type Option func(ev *nostr.Event)

// At sets created_at.
func At(t time.Time) Option {
	return func(ev *nostr.Event) { ev.CreatedAt = nostr.Timestamp(t.Unix()) }
}

// WithCreatedAt sets created_at.
func WithCreatedAt(ts nostr.Timestamp) Option {
	return func(ev *nostr.Event) { ev.CreatedAt = ts }
}

// WithTags appends tags.
func WithTags(tags ...nostr.Tag) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, tags...) }
}

// WithContent sets the content.
func WithContent(s string) Option {
	return func(ev *nostr.Event) { ev.Content = s }
}

// WithContentSize replaces the content by a synthetic git patch (a diff)
// of about n bytes.
func WithContentSize(n int) Option {
	return func(ev *nostr.Event) {
		ev.Content = SyntheticPatch(fmt.Sprint(ev.Kind, ev.PubKey, ev.CreatedAt, ev.Content), n)
	}
}

// WithClone appends a ["clone", urls...] tag.
func WithClone(urls ...string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, append(nostr.Tag{"clone"}, urls...)) }
}

// WithRelays appends a ["relays", urls...] tag.
func WithRelays(urls ...string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, append(nostr.Tag{"relays"}, urls...)) }
}

// WithWeb appends a ["web", urls...] tag.
func WithWeb(urls ...string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, append(nostr.Tag{"web"}, urls...)) }
}

// WithMaintainers appends a ["maintainers", pubkeys...] tag.
func WithMaintainers(pubkeys ...string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, append(nostr.Tag{"maintainers"}, pubkeys...)) }
}

// WithName sets the ["name", …] tag.
func WithName(name string) Option {
	return func(ev *nostr.Event) { setTag(ev, "name", name) }
}

// WithDescription sets the ["description", …] tag.
func WithDescription(s string) Option {
	return func(ev *nostr.Event) { setTag(ev, "description", s) }
}

// WithEUC appends the earliest-unique-commit tag ["r", commit, "euc"].
func WithEUC(commit string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, nostr.Tag{"r", commit, "euc"}) }
}

// WithRef appends a state ref tag, e.g. WithRef("refs/heads/main", commit).
func WithRef(ref, commit string) Option {
	return func(ev *nostr.Event) { ev.Tags = append(ev.Tags, nostr.Tag{ref, commit}) }
}

// WithHEAD sets ["HEAD", "ref: refs/heads/<branch>"].
func WithHEAD(branch string) Option {
	return func(ev *nostr.Event) { setTag(ev, "HEAD", "ref: refs/heads/"+branch) }
}

// WithSubject sets the ["subject", …] tag.
func WithSubject(s string) Option {
	return func(ev *nostr.Event) { setTag(ev, "subject", s) }
}

// WithBranch sets the ["branch-name", …] tag of a PR.
func WithBranch(name string) Option {
	return func(ev *nostr.Event) { setTag(ev, "branch-name", name) }
}

// WithMergeBase sets the ["merge-base", …] tag of a PR or PR update.
func WithMergeBase(commit string) Option {
	return func(ev *nostr.Event) { setTag(ev, "merge-base", commit) }
}

// WithP appends ["p", pubkey] tags.
func WithP(pubkeys ...string) Option {
	return func(ev *nostr.Event) {
		for _, pk := range pubkeys {
			ev.Tags = append(ev.Tags, nostr.Tag{"p", pk})
		}
	}
}

// setTag replaces the first tag named key or appends one.
func setTag(ev *nostr.Event, key string, values ...string) {
	tag := append(nostr.Tag{key}, values...)
	for i, t := range ev.Tags {
		if len(t) > 0 && t[0] == key {
			ev.Tags[i] = tag
			return
		}
	}
	ev.Tags = append(ev.Tags, tag)
}

// unsignedMark is set as Sig by the unsigned option: build then only
// computes the id, and the caller signs later (in parallel).
const unsignedMark = "unsigned"

// unsigned makes a builder return the event with its id but no signature.
func unsigned(ev *nostr.Event) { ev.Sig = unsignedMark }

// build signs an event of kind with tags, then options.
func (k *Key) build(kind int, content string, tags nostr.Tags, opts []Option) *nostr.Event {
	ev := &nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Tags: tags, Content: content, PubKey: k.PubKey}
	for _, o := range opts {
		o(ev)
	}
	if ev.Sig == unsignedMark {
		ev.PubKey = k.PubKey
		ev.Sig = ""
		ev.ID = ev.GetID()
		return ev
	}
	return k.Sign(ev)
}

// RepoAddress returns a repository's address, 30617:<pubkey>:<d>.
func RepoAddress(pubkey, d string) string {
	return fmt.Sprintf("%d:%s:%s", KindAnnouncement, pubkey, d)
}

// Address returns the address kind:pubkey:d of an addressable event.
func Address(ev *nostr.Event) string {
	return fmt.Sprintf("%d:%s:%s", ev.Kind, ev.PubKey, ev.Tags.GetD())
}

// RepoAddress returns the address of k's repository d.
func (k *Key) RepoAddress(d string) string { return RepoAddress(k.PubKey, d) }

// repoTags returns the a and p tags that point at repository address repo.
func repoTags(repo string) nostr.Tags {
	tags := nostr.Tags{{"a", repo}}
	if parts := strings.SplitN(repo, ":", 3); len(parts) == 3 {
		tags = append(tags, nostr.Tag{"p", parts[1]})
	}
	return tags
}

// Announcement builds a kind 30617 repository announcement with ["d", d]
// and ["name", d]; add clone, relays, maintainers and euc with options.
func (k *Key) Announcement(d string, opts ...Option) *nostr.Event {
	return k.build(KindAnnouncement, "", nostr.Tags{{"d", d}, {"name", d}}, opts)
}

// State builds a kind 30618 repository state for repository d; add refs with
// WithRef and WithHEAD.
func (k *Key) State(d string, opts ...Option) *nostr.Event {
	return k.build(KindState, "", nostr.Tags{{"d", d}}, opts)
}

// Patch builds a root kind 1617 patch ("t" "root") for repository address
// repo, with a small synthetic diff as content (see WithContentSize).
func (k *Key) Patch(repo string, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo), nostr.Tag{"t", "root"})
	return k.build(KindPatch, SyntheticPatch(repo, 600), tags, opts)
}

// PatchReply builds a kind 1617 patch that continues the series rooted at
// root, replying to parent (nil means root) with NIP-10 marked e tags.
func (k *Key) PatchReply(repo string, root, parent *nostr.Event, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo), nostr.Tag{"e", root.ID, "", "root"})
	if parent != nil && parent.ID != root.ID {
		tags = append(tags, nostr.Tag{"e", parent.ID, "", "reply"})
	}
	return k.build(KindPatch, SyntheticPatch(repo+root.ID, 600), tags, opts)
}

// PR builds a kind 1618 pull request for repository repo with tip commit;
// give the clone URLs with WithClone. It has a subject and branch-name.
func (k *Key) PR(repo, commit string, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo),
		nostr.Tag{"subject", "pull request"},
		nostr.Tag{"c", commit},
		nostr.Tag{"branch-name", "feature"},
	)
	return k.build(KindPR, "please pull", tags, opts)
}

// PRUpdate builds a kind 1619 update of pr moving its tip to commit; give
// the clone URLs with WithClone.
func (k *Key) PRUpdate(repo string, pr *nostr.Event, commit string, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo),
		nostr.Tag{"E", pr.ID},
		nostr.Tag{"P", pr.PubKey},
		nostr.Tag{"c", commit},
	)
	return k.build(KindPRUpdate, "", tags, opts)
}

// Issue builds a kind 1621 issue for repository repo.
func (k *Key) Issue(repo, subject string, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo), nostr.Tag{"subject", subject})
	return k.build(KindIssue, "it does not work", tags, opts)
}

// CIRun builds a CI workflow-run event (NIP-C1) for repo at commit: the
// kind of NIP-34 tooling's events that tag a repository and arrive
// through Layer 2 like an issue.
func (k *Key) CIRun(repo, commit, status string, opts ...Option) *nostr.Event {
	tags := append(repoTags(repo), nostr.Tag{"c", commit}, nostr.Tag{"status", status})
	return k.build(KindCIWorkflowRun, "workflow run "+status, tags, opts)
}

// Status builds a status event (KindStatusOpen … KindStatusDraft) for root
// (a patch, PR or issue), copying root's a tags.
func (k *Key) Status(kind int, root *nostr.Event, opts ...Option) *nostr.Event {
	tags := nostr.Tags{{"e", root.ID, "", "root"}, {"p", root.PubKey}}
	for _, t := range root.Tags {
		if len(t) >= 2 && t[0] == "a" {
			tags = append(tags, nostr.Tag{"a", t[1]})
		}
	}
	return k.build(kind, "", tags, opts)
}

// Comment builds a NIP-22 kind 1111 comment on root, replying to parent (nil
// means a top-level comment on root). Addressable roots and parents are
// referenced with A/a, others with E/e; K/k carry the kinds and P/p the
// authors.
func (k *Key) Comment(root, parent *nostr.Event, opts ...Option) *nostr.Event {
	if parent == nil {
		parent = root
	}
	var tags nostr.Tags
	tags = append(tags, scopeTags(root, true)...)
	tags = append(tags, scopeTags(parent, false)...)
	return k.build(KindComment, "a comment", tags, opts)
}

func scopeTags(ev *nostr.Event, root bool) nostr.Tags {
	e, a, kk, p := "e", "a", "k", "p"
	if root {
		e, a, kk, p = "E", "A", "K", "P"
	}
	var tags nostr.Tags
	if nostr.IsAddressableKind(ev.Kind) {
		tags = append(tags, nostr.Tag{a, Address(ev), ""})
	}
	tags = append(tags,
		nostr.Tag{e, ev.ID, "", ev.PubKey},
		nostr.Tag{kk, strconv.Itoa(ev.Kind)},
		nostr.Tag{p, ev.PubKey},
	)
	return tags
}

// Reply builds a NIP-10 kind 1 reply to parent: ["e", root, "", "root"] (the
// parent's root, or the parent itself), ["e", parent, "", "reply"] when it
// differs, and ["p", parent author].
func (k *Key) Reply(parent *nostr.Event, opts ...Option) *nostr.Event {
	rootID := parent.ID
	for _, t := range parent.Tags {
		if len(t) >= 4 && t[0] == "e" && t[3] == "root" {
			rootID = t[1]
			break
		}
	}
	tags := nostr.Tags{{"e", rootID, "", "root"}}
	if rootID != parent.ID {
		tags = append(tags, nostr.Tag{"e", parent.ID, "", "reply"})
	}
	tags = append(tags, nostr.Tag{"p", parent.PubKey})
	return k.build(KindReply, "a reply", tags, opts)
}

// Auth builds a NIP-42 kind 22242 event answering challenge for relayURL.
func (k *Key) Auth(relayURL, challenge string) *nostr.Event {
	return k.build(nostr.KindClientAuthentication, "", nostr.Tags{{"relay", relayURL}, {"challenge", challenge}}, nil)
}

// Quote builds a kind 1 note quoting ev with a q tag (the address for
// addressable events, the id otherwise).
func (k *Key) Quote(ev *nostr.Event, opts ...Option) *nostr.Event {
	ref := ev.ID
	if nostr.IsAddressableKind(ev.Kind) {
		ref = Address(ev)
	}
	return k.build(KindReply, "look at this", nostr.Tags{{"q", ref, "", ev.PubKey}}, opts)
}

// FakeCommit returns a deterministic 40-hex commit id derived from seed, for
// tests that do not need the object to exist.
func FakeCommit(seed string) string {
	sum := sha1.Sum([]byte(seed))
	return hex.EncodeToString(sum[:])
}

// SyntheticPatch returns a git format-patch style text of about size bytes,
// deterministic for a given seed.
func SyntheticPatch(seed string, size int) string {
	commit := FakeCommit(seed)
	var b strings.Builder
	b.Grow(size + 128)
	fmt.Fprintf(&b, "From %s Mon Sep 17 00:00:00 2001\nFrom: Harness <harness@example.com>\n"+
		"Subject: [PATCH] change %s\n\n---\n src/main.go | 42 +++++\n\n"+
		"diff --git a/src/main.go b/src/main.go\n--- a/src/main.go\n+++ b/src/main.go\n@@ -1,3 +1,42 @@\n",
		commit, commit[:8])
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "+\tx%d := compute(%q, %d) // %s\n", i, commit[i%32:i%32+8], i, commit)
	}
	b.WriteString("-- \n2.45.0\n")
	return b.String()
}

// Npub returns the NIP-19 npub of a hex public key.
func Npub(pubkey string) (string, error) { return nip19.EncodePublicKey(pubkey) }
