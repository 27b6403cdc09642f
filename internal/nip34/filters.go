package nip34

import (
	"slices"

	"github.com/nbd-wtf/go-nostr"
)

// Event kinds of NIP-34.
const (
	KindRepoAnnouncement = 30617
	KindRepoState        = 30618
	KindPatch            = 1617
	KindPullRequest      = 1618
	KindPRUpdate         = 1619
	KindIssue            = 1621
	KindStatusOpen       = 1630
	KindStatusApplied    = 1631
	KindStatusClosed     = 1632
	KindStatusDraft      = 1633
	KindComment          = 1111
)

// DefaultValuesPerFilter is how many tag values one filter carries by
// default (sync.values_per_filter). The functions below fall back to it
// only for perFilter <= 0; the sync engine always passes its configured
// value.
const DefaultValuesPerFilter = 100

// Layer1 is the announcement filter: kinds 30617 and 30618, with since when
// given.
func Layer1(since *nostr.Timestamp) nostr.Filter {
	return nostr.Filter{Kinds: []int{KindRepoAnnouncement, KindRepoState}, Since: copyTS(since)}
}

// Layer2 returns filters for events tagging one of repos (addresses
// "30617:<pubkey>:<d>") through `a`, `A` or `q`, perFilter values each.
func Layer2(repos []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return tagged(repos, perFilter, since, "a", "A", "q")
}

// Layer3 returns filters for events tagging one of roots (hex event ids)
// through `e`, `E` or `q`, perFilter values each.
func Layer3(roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return tagged(roots, perFilter, since, "e", "E", "q")
}

// Layer3Live is Layer 3 for live subscriptions with fewer bytes: per-root
// filters for `e` and `q` only, and two kind filters in place of the
// per-root `E` filters, which name every root once more: NIP-22 comments
// under a root kind (`#K`: a comment carries its root's kind in `K`,
// nested replies too) whose parent is not an issue or PR (`#k`,
// ParentKindValues), and PR updates (1619, which name their PR by `E`). A
// top-level comment on an issue or PR names its root under `e` as well as
// `E` (its parent is the root): the per-root `e` filter brings it, and the
// kind filter leaves it out so it does not come twice. The kind filters
// match events about foreign roots too: an arriving event must be checked
// with RefersTo before it is handed on. Events of other kinds tagging a
// root only by `E`, and comments without a `k` tag (NIP-22 requires one),
// are not asked live: they come with the relay's next full resync.
func Layer3Live(roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	if len(roots) == 0 {
		return nil
	}
	return append(Layer3ByRoot(roots, perFilter, since), Layer3ByKind(since)...)
}

// Layer3ByRoot are the per-root filters of Layer3Live (`e` and `q`).
func Layer3ByRoot(roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return tagged(roots, perFilter, since, "e", "q")
}

// Layers23ByRoot are the per-item filters of live Layers 2 and 3: Layer 2
// and Layer3ByRoot (the kind filters, Layer3ByKind, are a subscription of
// their own).
func Layers23ByRoot(repos, roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return append(Layer2(repos, perFilter, since), Layer3ByRoot(roots, perFilter, since)...)
}

// RootKindValues are the kinds of root events as `K` tag values.
var RootKindValues = []string{"1617", "1618", "1619", "1621"}

// ParentKindValues are the `k` tag values (the kind of the event a NIP-22
// comment answers) of Layer3ByKind's comment filter: every parent kind a
// comment under a root may have but issues (1621) and PRs (1618), which
// are always roots, so a top-level comment on one is its root's `#e`
// filter's and does not come twice: comments (1111), patches (1617: a
// later patch of a series; a top-level comment on a root patch does come
// twice), PR updates (1619) and statuses (1630–1633).
var ParentKindValues = []string{"1111", "1617", "1619", "1630", "1631", "1632", "1633"}

// Layer3ByKind are the kind filters of Layer3Live.
func Layer3ByKind(since *nostr.Timestamp) []nostr.Filter {
	return []nostr.Filter{
		{Kinds: []int{KindComment}, Tags: nostr.TagMap{"K": slices.Clone(RootKindValues), "k": slices.Clone(ParentKindValues)}, Since: copyTS(since)},
		{Kinds: []int{KindPRUpdate}, Since: copyTS(since)},
	}
}

// Layer3ByKindWithin is Layer3ByKind fitted by fit (a relay's tag values
// per filter) into at most maxFilters filters (0: any number). When the
// fit makes more, the comment filter drops `#k` (top-level comments on
// issues and PRs then come here too, a second time), then `#K` (every
// comment of the relay, each checked against the relay's items by the
// subscription's matcher), then merges both kinds into one filter: more
// events, none lost, where a REQ over the
// relay's filter bound would be refused again and again.
func Layer3ByKindWithin(since *nostr.Timestamp, maxFilters int, fit func([]nostr.Filter) []nostr.Filter) []nostr.Filter {
	base := Layer3ByKind(since)
	fs := fit(base)
	for _, tag := range []string{"k", "K"} {
		if maxFilters <= 0 || len(fs) <= maxFilters {
			break
		}
		delete(base[0].Tags, tag)
		fs = fit(base)
	}
	if maxFilters > 0 && len(fs) > maxFilters { // one filter: both kinds
		return []nostr.Filter{{Kinds: []int{KindComment, KindPRUpdate}, Since: copyTS(since)}}
	}
	return fs
}

// ByKind tells whether f is one of Layer3ByKind's filters (kinds 1111 and
// 1619 only, naming no repository or root): what it matches must be checked
// with RefersTo.
func ByKind(f nostr.Filter) bool {
	for _, t := range []string{"e", "E", "q", "a", "A"} {
		if len(f.Tags[t]) > 0 {
			return false
		}
	}
	for _, k := range f.Kinds {
		if k != KindComment && k != KindPRUpdate {
			return false
		}
	}
	return len(f.Kinds) > 0
}

// RefersTo tells whether ev tags a root (hex id) for which root is true
// through `e`, `E` or `q`, or a repository address for which repo is true
// through `a`, `A` or `q`: the semantics of Layers 2 and 3.
func RefersTo(ev *nostr.Event, repo, root func(string) bool) bool {
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		switch tag[0] {
		case "e", "E":
			if root(tag[1]) {
				return true
			}
		case "a", "A":
			if repo(tag[1]) {
				return true
			}
		case "q":
			if root(tag[1]) || repo(tag[1]) {
				return true
			}
		}
	}
	return false
}

// Layers23Live is Layer2 followed by Layer3Live.
func Layers23Live(repos, roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return append(Layer2(repos, perFilter, since), Layer3Live(roots, perFilter, since)...)
}

// Layers23 is Layer2 followed by Layer3.
func Layers23(repos, roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return append(Layer2(repos, perFilter, since), Layer3(roots, perFilter, since)...)
}

// Window is Layer 1 and Layers 2/3 of repos and roots (Layers23) between
// since and until: a span of a relay's history to reconcile.
func Window(repos, roots []string, perFilter int, since, until nostr.Timestamp) []nostr.Filter {
	fs := append([]nostr.Filter{Layer1(&since)}, Layers23(repos, roots, perFilter, &since)...)
	for i := range fs {
		fs[i].Until = copyTS(&until)
	}
	return fs
}

// Count23 is len(Layers23(...)) without building the filters.
func Count23(repos, roots, perFilter int) int {
	if perFilter <= 0 {
		perFilter = DefaultValuesPerFilter
	}
	return 3*ceilDiv(repos, perFilter) + 3*ceilDiv(roots, perFilter)
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }

// tagged builds one filter per tag name per chunk of values. Values are
// sorted so the same set always yields the same filters. The filters of
// one chunk share its value slice (capped, so an append copies): a
// relay's live and historic filters for every root are kept while they
// run, and one slice header per value instead of one per tag name keeps
// that small. Treat the values as read-only.
func tagged(values []string, perFilter int, since *nostr.Timestamp, tags ...string) []nostr.Filter {
	if len(values) == 0 {
		return nil
	}
	if perFilter <= 0 {
		perFilter = DefaultValuesPerFilter
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make([]nostr.Filter, 0, len(tags)*ceilDiv(len(sorted), perFilter))
	for start := 0; start < len(sorted); start += perFilter {
		end := min(start+perFilter, len(sorted))
		chunk := sorted[start:end:end]
		for _, tag := range tags {
			out = append(out, nostr.Filter{
				Tags:  nostr.TagMap{tag: chunk},
				Since: copyTS(since),
			})
		}
	}
	return out
}

// WithSince returns copies of fs with since set (nil clears it).
func WithSince(fs []nostr.Filter, since *nostr.Timestamp) []nostr.Filter {
	out := make([]nostr.Filter, len(fs))
	for i, f := range fs {
		f.Since = copyTS(since)
		out[i] = f
	}
	return out
}

// Live returns copies of fs for a live subscription: limit 0 (no stored
// events, NIP-01) and no since.
func Live(fs []nostr.Filter) []nostr.Filter {
	out := make([]nostr.Filter, len(fs))
	for i, f := range fs {
		f.Since = nil
		f.Until = nil
		f.Limit = 0
		f.LimitZero = true
		out[i] = f
	}
	return out
}

func copyTS(ts *nostr.Timestamp) *nostr.Timestamp {
	if ts == nil {
		return nil
	}
	v := *ts
	return &v
}
