package nostrurl

import (
	"sync"
	"time"
)

// resolveCacheMax bounds each resolution cache (nostr:// URLs, NIP-05
// identifiers): an event can name any number of them.
const resolveCacheMax = 4096

// ttlCache remembers values for a time, at most resolveCacheMax of them;
// expired entries are pruned when a new key finds it full, and a new key is
// not remembered while it stays full.
type ttlCache[V any] struct {
	mu sync.Mutex
	m  map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

// get returns the value of key if it was put less than ttl before now.
func (c *ttlCache[V]) get(key string, now time.Time, ttl time.Duration) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || now.Sub(e.at) >= ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put remembers v for key from now.
func (c *ttlCache[V]) put(key string, v V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]ttlEntry[V]{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= resolveCacheMax {
		for k, e := range c.m {
			if now.Sub(e.at) >= ttl {
				delete(c.m, k)
			}
		}
		if len(c.m) >= resolveCacheMax {
			return
		}
	}
	c.m[key] = ttlEntry[V]{v: v, at: now}
}

// len is the number of entries, expired ones included.
func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
