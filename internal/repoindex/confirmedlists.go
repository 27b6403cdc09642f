package repoindex

// ConfirmedLists keeps each relay's confirmed items as the lists a state
// store keeps, rebuilt only when they changed: when the relay's
// ConfirmedGen moved, or the relay was forgotten and tracked again
// (another *RelayState). Each rebuild gets a new generation, so the store
// writes a relay's lists only when that generation moved. The zero value
// is ready; it belongs to one goroutine.
type ConfirmedLists struct {
	gen uint64
	m   map[string]*confirmedLists
}

type confirmedLists struct {
	state        *RelayState
	seen, gen    uint64 // the state's ConfirmedGen the lists were built at; the generation handed out
	repos, roots []string
}

// Of returns rs's confirmed repositories and roots as lists, and their
// generation.
func (c *ConfirmedLists) Of(rs *RelayState) (repos, roots []string, gen uint64) {
	if c.m == nil {
		c.m = map[string]*confirmedLists{}
	}
	l := c.m[rs.URL]
	if l == nil || l.state != rs || l.seen != rs.ConfirmedGen {
		c.gen++
		l = &confirmedLists{state: rs, seen: rs.ConfirmedGen, gen: c.gen,
			repos: rs.Confirmed.Repos.List(), roots: rs.Confirmed.Roots.List()}
		c.m[rs.URL] = l
	}
	return l.repos, l.roots, l.gen
}

// Keep forgets the lists of the relays keep says no to.
func (c *ConfirmedLists) Keep(keep func(url string) bool) {
	for url := range c.m {
		if !keep(url) {
			delete(c.m, url)
		}
	}
}
