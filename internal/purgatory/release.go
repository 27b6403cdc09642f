package purgatory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

var defaultResolver gitx.Resolver = net.DefaultResolver

// ErrNoLocalRepo is returned when no owner of an identifier has a repository
// in the git directory (and CreateMissingRepos is off): nothing to fetch into.
var ErrNoLocalRepo = errors.New("purgatory: no local repository for identifier")

// gitContext is the SyncContext over the GRASP git directory.
type gitContext struct{ p *Purgatory }

var _ SyncContext = (*gitContext)(nil)

// snapshot is an identifier's held events and announcements, copied out
// under the lock (entries and announcements are never mutated in place,
// except onOwnRelay which is read under the lock).
type snapshot struct {
	states []*entry
	prs    []*entry
	anns   map[string]*announcement
}

func (g *gitContext) snapshot(id string) snapshot {
	p := g.p
	p.mu.Lock()
	defer p.mu.Unlock()
	s := snapshot{anns: make(map[string]*announcement, len(p.anns[id]))}
	for k, a := range p.anns[id] {
		s.anns[k] = a
	}
	for _, e := range p.states[id] {
		s.states = append(s.states, e)
	}
	for _, e := range p.prs[id] {
		s.prs = append(s.prs, e)
	}
	// Oldest first, so the newest state is applied last.
	sort.Slice(s.states, func(i, j int) bool {
		a, b := s.states[i].ev, s.states[j].ev
		return stamp{b.CreatedAt, b.ID}.newer(stamp{a.CreatedAt, a.ID})
	})
	sort.Slice(s.prs, func(i, j int) bool {
		a, b := s.prs[i].ev, s.prs[j].ev
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt < b.CreatedAt
		}
		return a.ID < b.ID
	})
	return s
}

// maintainerSet is owner's recursive maintainer set among anns, the
// announcements of one identifier (nip34.MaintainerSet).
func maintainerSet(anns map[string]*announcement, owner string) map[string]bool {
	return nip34.MaintainerSet(owner, listedIn(anns))
}

// listedIn returns whom each owner's announcement in anns lists.
func listedIn(anns map[string]*announcement) func(string) []string {
	return func(pk string) []string {
		if a := anns[pk]; a != nil {
			return a.maintainers
		}
		return nil
	}
}

// authorisedOwners are the owners (with an announcement) whose maintainer
// set contains author, sorted.
func authorisedOwners(anns map[string]*announcement, author string) []string {
	var out []string
	for owner := range anns {
		if maintainerSet(anns, owner)[author] {
			out = append(out, owner)
		}
	}
	sort.Strings(out)
	return out
}

// prTargets are the owners whose repositories get a PR's refs/nostr ref:
// the owners its a tags name, and owners sharing a maintainer with them.
func prTargets(anns map[string]*announcement, e *entry) []string {
	var tagged []map[string]bool
	for _, o := range e.owners {
		tagged = append(tagged, maintainerSet(anns, o))
	}
	var out []string
	for owner := range anns {
		set := maintainerSet(anns, owner)
		hit := false
		for _, t := range tagged {
			for m := range set {
				if t[m] {
					hit = true
					break
				}
			}
			if hit {
				break
			}
		}
		if hit {
			out = append(out, owner)
		}
	}
	sort.Strings(out)
	return out
}

type localRepo struct {
	owner string
	path  string
}

// localRepos returns the repositories of identifier's owners that exist in
// the git directory (creating missing ones when configured), sorted by owner.
func (g *gitContext) localRepos(ctx context.Context, id string, anns map[string]*announcement) ([]localRepo, error) {
	p := g.p
	owners := make([]string, 0, len(anns))
	for o := range anns {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	var out []localRepo
	for _, o := range owners {
		if !anns[o].hosted {
			continue // not this service's repository (GRASP-01)
		}
		path, err := gitx.RepoPath(p.cfg.GitDir, o, id)
		if err != nil {
			continue
		}
		if !gitx.IsRepo(path) {
			if !p.cfg.CreateMissingRepos {
				continue
			}
			p.initMu.Lock()
			if !gitx.IsRepo(path) {
				err = gitx.InitBare(ctx, p.git, path)
			}
			p.initMu.Unlock()
			if err != nil {
				p.log.Warn("cannot create repository", zap.String("path", path), zap.Error(err))
				continue
			}
			p.tally.created.Add(1)
			p.log.Debug("created repository", zap.String("path", path))
		}
		out = append(out, localRepo{owner: o, path: path})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q", ErrNoLocalRepo, id)
	}
	return out, nil
}

// Pending implements SyncContext.
func (g *gitContext) Pending(id string) bool {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.pendingLocked(id)
}

// NeededOIDs implements SyncContext: objects of releasable events (a state
// whose author some owner authorises, a PR with a target owner) that no
// local repository of the identifier has.
func (g *gitContext) NeededOIDs(ctx context.Context, id string) ([]string, error) {
	s := g.snapshot(id)
	want := map[string]bool{}
	for _, e := range s.states {
		if len(authorisedOwners(s.anns, e.ev.PubKey)) > 0 {
			for _, o := range e.oids {
				want[o] = true
			}
		}
	}
	for _, e := range s.prs {
		if len(prTargets(s.anns, e)) > 0 {
			for _, o := range e.oids {
				want[o] = true
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	repos, err := g.localRepos(ctx, id, s.anns)
	if err != nil {
		return nil, err
	}
	list := keys(want)
	for _, r := range repos {
		have, err := gitx.Present(ctx, g.p.git, r.path, list)
		if err != nil {
			return nil, err
		}
		list = missing(list, have)
		if len(list) == 0 {
			break
		}
	}
	return list, nil
}

// Sources implements SyncContext: clone URLs from the identifier's
// announcements (owners in order) and from held PRs, minus the own domain.
func (g *gitContext) Sources(ctx context.Context, id string) []Source {
	s := g.snapshot(id)
	owners := make([]string, 0, len(s.anns))
	for o := range s.anns {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	var raw []string
	for _, o := range owners {
		raw = append(raw, s.anns[o].clone...)
	}
	for _, e := range s.prs {
		raw = append(raw, e.cloneURLs...)
	}
	raw = g.resolveNostr(ctx, raw)
	own := gitx.NormalizeDomain("", g.p.cfg.OwnDomain)
	seen := map[string]bool{}
	var out []Source
	for _, u := range raw {
		if seen[u] {
			continue
		}
		seen[u] = true
		cu, err := gitx.ParseCloneURL(u)
		if err != nil || (own != "" && cu.Domain == own) {
			continue
		}
		out = append(out, Source{URL: cu.Raw, Domain: cu.Domain})
		if len(out) >= g.p.cfg.MaxCloneURLs {
			break
		}
	}
	return out
}

// resolveNostr replaces each nostr:// clone URL in raw (git never sees
// one) by the clone URLs of the repository it names: from that owner's
// announcement when the purgatory holds it, else through
// Options.ResolveNostr (the owner's announcement and GRASP list on
// relays). At most 4 are resolved per call.
func (g *gitContext) resolveNostr(ctx context.Context, raw []string) []string {
	out := make([]string, 0, len(raw))
	resolved := 0
	for _, u := range raw {
		if !nip34.IsNostrURL(u) {
			out = append(out, u)
			continue
		}
		nu, err := nip34.ParseNostrURL(u)
		if err != nil {
			g.p.log.Debug("unusable nostr:// clone url", zap.Error(err))
			continue
		}
		g.p.mu.Lock()
		a := g.p.anns[nu.Identifier][nu.PubKey]
		g.p.mu.Unlock()
		if a != nil {
			for _, c := range a.clone {
				if !nip34.IsNostrURL(c) {
					out = append(out, c)
				}
			}
			continue
		}
		if g.p.resolveNostr == nil {
			continue
		}
		if resolved >= maxNostrResolves {
			g.p.log.Info("nostr:// clone url not resolved: this event names too many", zap.String("url", u), zap.Int("max", maxNostrResolves))
			continue
		}
		resolved++
		urls, err := g.p.resolveNostr(ctx, nu)
		if err != nil {
			g.p.log.Info("cannot resolve nostr:// clone url", zap.String("url", u), zap.Error(err))
			continue
		}
		out = append(out, urls...)
	}
	return out
}

// maxNostrResolves bounds the nostr:// clone URLs resolved for one event's
// sources (each asks relays, and a NIP-05 owner a web server): an event
// cannot make the purgatory ask the network without end.
const maxNostrResolves = 4

// Fetch implements SyncContext: into the first local repository.
func (g *gitContext) Fetch(ctx context.Context, id, url string, oids []string, gate gitx.Gate) ([]string, error) {
	s := g.snapshot(id)
	repos, err := g.localRepos(ctx, id, s.anns)
	if err != nil {
		return nil, err
	}
	cu, err := gitx.ParseCloneURL(url)
	if err != nil {
		return nil, err
	}
	pin, err := gitx.PinAddress(ctx, g.p.res, cu, g.p.cfg.AllowPrivateAddresses)
	if err != nil {
		return nil, err
	}
	return gitx.FetchOIDs(ctx, gitx.WithConfig(g.p.git, pin...), repos[0].path, url, oids, gate)
}

// lockIdentifier serialises releases of one identifier.
func (p *Purgatory) lockIdentifier(id string) func() {
	p.identMu.Lock()
	l := p.identLock[id]
	if l == nil {
		l = &identLock{}
		p.identLock[id] = l
	}
	l.refs++
	p.identMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.identMu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(p.identLock, id)
		}
		p.identMu.Unlock()
	}
}

// Release implements SyncContext: it releases every held event of the
// identifier whose git data is now present.
func (g *gitContext) Release(ctx context.Context, id string) (ReleaseResult, error) {
	p := g.p
	unlock := p.lockIdentifier(id)
	defer unlock()
	var res ReleaseResult
	s := g.snapshot(id)
	if len(s.states)+len(s.prs) == 0 {
		return res, nil
	}
	repos, err := g.localRepos(ctx, id, s.anns)
	if err != nil {
		return res, err
	}
	all := map[string]bool{}
	for _, e := range append(append([]*entry{}, s.states...), s.prs...) {
		for _, o := range e.oids {
			all[o] = true
		}
	}
	oidList := keys(all)
	presence := make(map[string]map[string]bool, len(repos))
	byOwner := make(map[string]localRepo, len(repos))
	for _, r := range repos {
		have, err := gitx.Present(ctx, p.git, r.path, oidList)
		if err != nil {
			return res, err
		}
		presence[r.path] = have
		byOwner[r.owner] = r
	}
	w := &releaser{g: g, id: id, presence: presence, repos: repos}
	var errs []error
	for _, e := range s.states {
		owners := authorisedOwners(s.anns, e.ev.PubKey)
		var targets []localRepo
		local := 0
		for _, o := range owners {
			r, ok := byOwner[o]
			if !ok {
				continue
			}
			local++
			if !g.superseded(s.anns, o, id, e) {
				targets = append(targets, r)
			}
		}
		// Unauthorised (or no authorised owner has a repository here): never applied.
		if local == 0 || !w.available(e.oids) {
			continue
		}
		if err := w.applyState(ctx, e, targets); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := g.publishAndRemove(ctx, e); err != nil {
			errs = append(errs, err)
			continue
		}
		res.States++
	}
	for _, e := range s.prs {
		var targets []localRepo
		for _, o := range prTargets(s.anns, e) {
			if r, ok := byOwner[o]; ok {
				targets = append(targets, r)
			}
		}
		if len(targets) == 0 || !w.available(e.oids) {
			continue
		}
		if err := w.applyPR(ctx, e, targets); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := g.publishAndRemove(ctx, e); err != nil {
			errs = append(errs, err)
			continue
		}
		res.PRs++
	}
	return res, errors.Join(errs...)
}

// superseded reports whether a state newer than e from a member of owner's
// maintainer set was already released or seen on the own relay.
func (g *gitContext) superseded(anns map[string]*announcement, owner, id string, e *entry) bool {
	p := g.p
	st := stamp{e.ev.CreatedAt, e.ev.ID}
	set := maintainerSet(anns, owner)
	p.mu.Lock()
	defer p.mu.Unlock()
	for m := range set {
		if l, ok := p.latest[m+"/"+id]; ok && l.id != st.id && l.newer(st) {
			return true
		}
	}
	return false
}

func (g *gitContext) publishAndRemove(ctx context.Context, e *entry) error {
	p := g.p
	p.mu.Lock()
	onOwn := e.onOwnRelay
	p.mu.Unlock()
	if !onOwn {
		if err := p.pub.Publish(ctx, e.ev); err != nil {
			return fmt.Errorf("publish %s: %w", e.ev.ID, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.ev.Kind == KindState {
		p.setLatestLocked(e.ev.PubKey+"/"+e.identifier, stamp{e.ev.CreatedAt, e.ev.ID})
	}
	if p.removeLocked(e) {
		p.m.released.WithLabelValues(kindLabel(e.ev.Kind)).Inc()
		p.tally.released.Add(1)
		if !onOwn {
			p.tally.published.Add(1)
		}
		p.log.Debug("released", zap.String("event", e.ev.ID), zap.Int("kind", e.ev.Kind),
			zap.String("identifier", e.identifier), zap.Bool("published", !onOwn))
	}
	return nil
}

// releaser tracks object presence across an identifier's repositories
// during one Release.
type releaser struct {
	g        *gitContext
	id       string
	presence map[string]map[string]bool
	repos    []localRepo
}

func (w *releaser) available(oids []string) bool {
	for _, o := range oids {
		if w.holder(o) == "" {
			return false
		}
	}
	return true
}

func (w *releaser) holder(oid string) string {
	for _, r := range w.repos {
		if w.presence[r.path][oid] {
			return r.path
		}
	}
	return ""
}

// ensure copies the oids missing in dst from the repositories that have them.
func (w *releaser) ensure(ctx context.Context, dst string, oids []string) error {
	bySource := map[string][]string{}
	for _, o := range oids {
		if w.presence[dst][o] {
			continue
		}
		src := w.holder(o)
		if src == "" {
			return fmt.Errorf("object %s vanished", o)
		}
		bySource[src] = append(bySource[src], o)
	}
	for src, list := range bySource {
		if err := gitx.CopyObjects(ctx, w.g.p.git, dst, src, list); err != nil {
			return err
		}
		for _, o := range list {
			w.presence[dst][o] = true
		}
	}
	return nil
}

// applyState copies the state's objects into each target repository and
// makes its branches, tags and HEAD match the state exactly.
func (w *releaser) applyState(ctx context.Context, e *entry, targets []localRepo) error {
	git := w.g.p.git
	for _, t := range targets {
		if err := w.ensure(ctx, t.path, e.oids); err != nil {
			return fmt.Errorf("state %s into %s: %w", e.ev.ID, t.path, err)
		}
		current, err := gitx.Refs(ctx, git, t.path, "refs/heads/", "refs/tags/")
		if err != nil {
			return err
		}
		desired := make(map[string]string, len(e.refs))
		var updates []gitx.RefUpdate
		for _, r := range e.refs {
			desired[r.Ref] = r.OID
			if current[r.Ref] != r.OID {
				updates = append(updates, r)
			}
		}
		for ref := range current {
			if _, ok := desired[ref]; !ok {
				updates = append(updates, gitx.RefUpdate{Ref: ref})
			}
		}
		sort.Slice(updates, func(i, j int) bool { return updates[i].Ref < updates[j].Ref })
		if err := gitx.UpdateRefs(ctx, git, t.path, updates); err != nil {
			return fmt.Errorf("state %s: %w", e.ev.ID, err)
		}
		if e.head != "" {
			if err := gitx.SetHEAD(ctx, git, t.path, e.head); err != nil {
				return fmt.Errorf("state %s: %w", e.ev.ID, err)
			}
		}
	}
	return nil
}

// applyPR points refs/nostr/<event id> at the PR's tip in each target.
func (w *releaser) applyPR(ctx context.Context, e *entry, targets []localRepo) error {
	for _, t := range targets {
		if err := w.ensure(ctx, t.path, e.oids); err != nil {
			return fmt.Errorf("pr %s into %s: %w", e.ev.ID, t.path, err)
		}
		if err := gitx.UpdateRefs(ctx, w.g.p.git, t.path, []gitx.RefUpdate{{Ref: "refs/nostr/" + e.ev.ID, OID: e.oids[0]}}); err != nil {
			return fmt.Errorf("pr %s: %w", e.ev.ID, err)
		}
	}
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func missing(list []string, have map[string]bool) []string {
	out := list[:0:0]
	for _, o := range list {
		if !have[o] {
			out = append(out, o)
		}
	}
	return out
}
