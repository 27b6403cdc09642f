package repoindex

// RepoNeeds is what one repository asks of the network: the relays its
// announcement lists and the root events that reference it.
type RepoNeeds struct {
	// AnnouncedAt is created_at of the announcement the relay set came from;
	// an older announcement never replaces a newer one's relays.
	AnnouncedAt int64
	Relays      Set
	Roots       Set
}

// RepoSyncIndex is what we want: repository address ("30617:<pubkey>:<d>")
// to its needs. It is owned by the engine's Run goroutine.
type RepoSyncIndex map[string]*RepoNeeds

// Items is a set of repositories and root events.
type Items struct {
	Repos Set
	Roots Set
}

func NewItems() Items { return Items{Repos: NewSet(), Roots: NewSet()} }

// Empty tells whether there is nothing in it.
func (it Items) Empty() bool { return it.Repos.Len() == 0 && it.Roots.Len() == 0 }

// Within returns the items of it that o holds too.
func (it Items) Within(o Items) Items {
	out := NewItems()
	for h := range it.Repos.Handles() {
		if o.Repos.HasH(h) {
			out.Repos.AddH(h)
		}
	}
	for h := range it.Roots.Handles() {
		if o.Roots.HasH(h) {
			out.Roots.AddH(h)
		}
	}
	return out
}

// Target is what we want from one relay.
type Target = Items

// DeriveRelayTargets inverts repo→relays into relay→(repos, roots).
// Bootstrap relays are asked about every repository.
func DeriveRelayTargets(repos RepoSyncIndex, bootstrap []string) map[string]Target {
	targets := make(map[string]Target)
	get := func(url string) Target {
		t, ok := targets[url]
		if !ok {
			t = NewItems()
			targets[url] = t
		}
		return t
	}
	for ref, needs := range repos {
		for url := range needs.Relays.All() {
			t := get(url)
			t.Repos.Add(ref)
			t.Roots.AddAll(needs.Roots)
		}
		for _, url := range bootstrap {
			t := get(url)
			t.Repos.Add(ref)
			t.Roots.AddAll(needs.Roots)
		}
	}
	for _, url := range bootstrap {
		get(url)
	}
	return targets
}

// WantedRelays is the relays DeriveRelayTargets has a target for, without
// building the targets (every relay's copy of its roots).
func WantedRelays(repos RepoSyncIndex, bootstrap []string) Set {
	out := SetOf(bootstrap...)
	for _, needs := range repos {
		out.AddAll(needs.Relays)
	}
	return out
}

// DeriveRelayTarget is DeriveRelayTargets for one relay.
func DeriveRelayTarget(repos RepoSyncIndex, url string, bootstrap bool) (Target, bool) {
	t := NewItems()
	for ref, needs := range repos {
		if bootstrap || needs.Relays.Has(url) {
			t.Repos.Add(ref)
			t.Roots.AddAll(needs.Roots)
		}
	}
	return t, bootstrap || !t.Empty()
}
