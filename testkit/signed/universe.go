package signed

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Defaults of UniverseOptions.
var (
	// DefaultUniverseStart is the created_at of a universe's first event.
	DefaultUniverseStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

const (
	// DefaultUniverseSpan is how much time a universe's events cover.
	DefaultUniverseSpan = 90 * 24 * time.Hour
	// DefaultUniversePatchSize is the content size of generated patches.
	DefaultUniversePatchSize = 2000
	// DefaultUniverseContributors is the number of keys that open PRs,
	// issues and comments.
	DefaultUniverseContributors = 50
)

// UniverseOptions describes a generated set of NIP-34 repositories.
type UniverseOptions struct {
	// Seed makes the universe deterministic: same options, same events
	// (ids and signatures).
	Seed uint64
	// Repos is the number of repositories (at least 1).
	Repos int
	// Relays are the relay URLs the repositories are spread over; each
	// repository lists one to three of them in its relays tag (and a clone
	// URL on each relay's host). At least one.
	Relays []string
	// Events is the total number of events, announcements and states
	// included (at least 2 per repository).
	Events int
	// Start and Span place the events in time; defaults
	// DefaultUniverseStart and DefaultUniverseSpan. Events are generated
	// in created_at order, replies after their roots.
	Start time.Time
	Span  time.Duration
	// PatchSize is the content size of patches; default
	// DefaultUniversePatchSize.
	PatchSize int
	// Contributors is the number of non-owner keys; default
	// DefaultUniverseContributors.
	Contributors int
	// SkipSignatures leaves Sig empty (ids are still right), which makes
	// generation ~20× faster. Only for store benchmarks: Inject accepts
	// such events, relays reject them when published, and clients that
	// verify signatures drop them.
	SkipSignatures bool
	// Forge shapes the events like a busy forge: half of them roots
	// (patches, PRs, issues), the other half discussion under roots
	// (statuses, comments, patch replies, PR updates, replies, quotes),
	// none on the announcements. Default: 10 % comment on announcements.
	Forge bool
	// CloneURL returns a repository's clone URL for one of its relays;
	// default http://<relay host>/<npub>/<d>.git (a GRASP layout, so a
	// GraspPolicy relay accepts the announcement).
	CloneURL func(relayURL, npub, d string) string
}

// Universe is a generated set of repositories and their events.
type Universe struct {
	// Repos are the repositories in generation order.
	Repos []*UniverseRepo
	// Events are all events in created_at order.
	Events []*nostr.Event

	repoOf []int32 // index into Repos per event
}

// UniverseRepo is one repository of a Universe.
type UniverseRepo struct {
	Owner *Key
	// Maintainer is listed in the announcement's maintainers tag.
	Maintainer *Key
	D          string
	// Address is 30617:<owner>:<d>.
	Address string
	// Relays are the relay URLs the announcement lists.
	Relays       []string
	Announcement *nostr.Event
	State        *nostr.Event
	// Events are all events of the repository, announcement and state
	// included, in created_at order.
	Events []*nostr.Event
	// Roots are its patches, PRs and issues.
	Roots []*nostr.Event
}

// DefaultCloneURL is the default UniverseOptions.CloneURL.
func DefaultCloneURL(relayURL, npub, d string) string {
	host := relayURL
	if u, err := url.Parse(relayURL); err == nil && u.Host != "" {
		host = u.Host
	}
	return "http://" + host + "/" + npub + "/" + d + ".git"
}

// NewUniverse generates a universe. Events are signed in parallel (about
// 10,000 events/s on two cores).
func NewUniverse(opts UniverseOptions) (*Universe, error) {
	if opts.Repos < 1 || len(opts.Relays) == 0 || opts.Events < 2*opts.Repos {
		return nil, fmt.Errorf("harness: universe needs repos >= 1, relays >= 1 and events >= 2*repos (got %d, %d, %d)",
			opts.Repos, len(opts.Relays), opts.Events)
	}
	if opts.Start.IsZero() {
		opts.Start = DefaultUniverseStart
	}
	if opts.Span == 0 {
		opts.Span = DefaultUniverseSpan
	}
	if opts.PatchSize == 0 {
		opts.PatchSize = DefaultUniversePatchSize
	}
	if opts.Contributors == 0 {
		opts.Contributors = DefaultUniverseContributors
	}
	if opts.CloneURL == nil {
		opts.CloneURL = DefaultCloneURL
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	contributors := make([]*Key, opts.Contributors)
	for i := range contributors {
		contributors[i] = KeyFromSeed(fmt.Sprintf("universe %d contributor %d", opts.Seed, i))
	}

	u := &Universe{Events: make([]*nostr.Event, 0, opts.Events), repoOf: make([]int32, 0, opts.Events)}
	keys := make(map[string]*Key, len(contributors)+opts.Repos)
	for _, k := range contributors {
		keys[k.PubKey] = k
	}
	signers := make([]*Key, 0, opts.Events)
	start := opts.Start.Unix()
	step := opts.Span.Seconds() / float64(opts.Events)
	clock := func() nostr.Timestamp {
		// monotonic: one step per event, with jitter inside the step
		i := len(u.Events)
		return nostr.Timestamp(start + int64(float64(i)*step+rng.Float64()*step))
	}
	add := func(ri int, ev *nostr.Event) *nostr.Event {
		u.Events = append(u.Events, ev)
		u.repoOf = append(u.repoOf, int32(ri))
		signers = append(signers, keys[ev.PubKey])
		u.Repos[ri].Events = append(u.Repos[ri].Events, ev)
		return ev
	}
	lazy := Option(unsigned)

	for i := 0; i < opts.Repos; i++ {
		owner := KeyFromSeed(fmt.Sprintf("universe %d owner %d", opts.Seed, i))
		keys[owner.PubKey] = owner
		maint := contributors[rng.IntN(len(contributors))]
		d := fmt.Sprintf("repo-%d", i)
		n := 1 + rng.IntN(min(3, len(opts.Relays)))
		first := rng.IntN(len(opts.Relays))
		repo := &UniverseRepo{Owner: owner, Maintainer: maint, D: d, Address: RepoAddress(owner.PubKey, d)}
		var clones []string
		for j := 0; j < n; j++ {
			relay := opts.Relays[(first+j)%len(opts.Relays)]
			repo.Relays = append(repo.Relays, relay)
			clones = append(clones, opts.CloneURL(relay, owner.Npub(), d))
		}
		euc := FakeCommit(fmt.Sprintf("%d/%s/root", opts.Seed, repo.Address))
		u.Repos = append(u.Repos, repo)
		repo.Announcement = add(i, owner.Announcement(d, WithCreatedAt(clock()),
			WithDescription("generated repository "+d), WithClone(clones...), WithRelays(repo.Relays...),
			WithMaintainers(maint.PubKey), WithEUC(euc), lazy))
		repo.State = add(i, owner.State(d, WithCreatedAt(clock()),
			WithRef("refs/heads/main", FakeCommit(repo.Address+"/main")), WithHEAD("main"), lazy))
	}

	for len(u.Events) < opts.Events {
		// skewed popularity: low-numbered repositories get more activity
		x := rng.Float64()
		ri := int(x * x * float64(len(u.Repos)))
		repo := u.Repos[ri]
		who := contributors[rng.IntN(len(contributors))]
		at := WithCreatedAt(clock())
		p := rng.IntN(100)
		if opts.Forge && p >= 50 {
			p = 60 + (p-50)*40/50 // discussion only, in the default proportions
		}
		if len(repo.Roots) == 0 {
			p %= 60 // roots first
		}
		var ev *nostr.Event
		switch {
		case p < 25:
			ev = who.Patch(repo.Address, at, WithContentSize(opts.PatchSize), WithTags(nostr.Tag{"r", FakeCommit(repo.Address + "/main")}), lazy)
			repo.Roots = append(repo.Roots, ev)
		case p < 35:
			ev = who.PR(repo.Address, FakeCommit(fmt.Sprintf("%d/pr/%d", opts.Seed, len(u.Events))), at,
				WithClone(opts.CloneURL(repo.Relays[0], who.Npub(), repo.D)), lazy)
			repo.Roots = append(repo.Roots, ev)
		case p < 50:
			ev = who.Issue(repo.Address, fmt.Sprintf("issue %d", len(u.Events)), at, lazy)
			repo.Roots = append(repo.Roots, ev)
		case p < 60:
			ev = who.Comment(repo.Announcement, nil, at, lazy)
		default:
			root := repo.Roots[rng.IntN(len(repo.Roots))]
			switch {
			case p < 70:
				ev = repo.Owner.Status(KindStatusOpen+rng.IntN(4), root, at, lazy)
			case p < 85:
				ev = who.Comment(root, nil, at, lazy)
			case p < 90 && root.Kind == KindPatch:
				ev = who.PatchReply(repo.Address, root, nil, at, WithContentSize(opts.PatchSize), lazy)
			case p < 90 && root.Kind == KindPR:
				ev = keys[root.PubKey].PRUpdate(repo.Address, root,
					FakeCommit(fmt.Sprintf("%d/update/%d", opts.Seed, len(u.Events))), at,
					WithClone(opts.CloneURL(repo.Relays[0], who.Npub(), repo.D)), lazy)
			case p < 96:
				ev = who.Reply(root, at, lazy)
			default:
				ev = who.Quote(root, at, lazy)
			}
		}
		add(ri, ev)
	}
	if !opts.SkipSignatures {
		SignAll(signers, u.Events)
	}
	return u, nil
}

// ForRelay returns the events of the repositories that list relayURL, in
// created_at order: what that relay would hold in a synced network.
func (u *Universe) ForRelay(relayURL string) []*nostr.Event {
	var out []*nostr.Event
	for i, ev := range u.Events {
		if containsURL(u.Repos[u.repoOf[i]].Relays, relayURL) {
			out = append(out, ev)
		}
	}
	return out
}

func containsURL(urls []string, u string) bool {
	for _, x := range urls {
		if strings.TrimSuffix(x, "/") == strings.TrimSuffix(u, "/") {
			return true
		}
	}
	return false
}
