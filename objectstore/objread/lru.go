package objread

import (
	"container/list"
	"sync"
)

// lru is a cache bounded by the sum of its entries' sizes, evicting the least recently
// used. Entries can be grouped (a block's group is its object's key) so that Forget drops
// an object's blocks without walking the whole cache. Safe for concurrent use; onEvict
// runs outside the lock.
type lru[K comparable, V any] struct {
	limit   int64
	groupOf func(K) string // nil: no groups
	onEvict func(V)        // nil: nothing; called for evicted and removed entries

	mu     sync.Mutex
	size   int64
	order  list.List // of *lruEntry[K, V], most recently used first
	items  map[K]*list.Element
	groups map[string]map[K]struct{}
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any](limit int64, groupOf func(K) string, onEvict func(V)) *lru[K, V] {
	return &lru[K, V]{
		limit:   limit,
		groupOf: groupOf,
		onEvict: onEvict,
		items:   map[K]*list.Element{},
		groups:  map[string]map[K]struct{}{},
	}
}

// get returns the value of k and marks it most recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

// contains reports whether k is cached without changing its recency.
func (c *lru[K, V]) contains(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// put caches v under k, evicting least recently used entries until the cache fits its
// limit. An entry larger than the whole cache is not cached (put returns false): it
// would evict everything and then itself.
func (c *lru[K, V]) put(k K, v V, size int64) bool {
	if size > c.limit {
		return false
	}
	var victims []V
	c.mu.Lock()
	if old, ok := c.items[k]; ok {
		victims = append(victims, c.removeLocked(old))
	}
	for c.size+size > c.limit {
		victims = append(victims, c.removeLocked(c.order.Back()))
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
	c.size += size
	if c.groupOf != nil {
		g := c.groupOf(k)
		if c.groups[g] == nil {
			c.groups[g] = map[K]struct{}{}
		}
		c.groups[g][k] = struct{}{}
	}
	c.mu.Unlock()
	c.evicted(victims)
	return true
}

// remove drops k if cached.
func (c *lru[K, V]) remove(k K) {
	var victims []V
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		victims = append(victims, c.removeLocked(e))
	}
	c.mu.Unlock()
	c.evicted(victims)
}

// removeGroup drops every entry of group g.
func (c *lru[K, V]) removeGroup(g string) {
	var victims []V
	c.mu.Lock()
	for k := range c.groups[g] {
		victims = append(victims, c.removeLocked(c.items[k]))
	}
	c.mu.Unlock()
	c.evicted(victims)
}

// bytes is the sum of the sizes of the cached entries.
func (c *lru[K, V]) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// len is the number of cached entries.
func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

func (c *lru[K, V]) removeLocked(e *list.Element) V {
	ent := c.order.Remove(e).(*lruEntry[K, V])
	delete(c.items, ent.key)
	c.size -= ent.size
	if c.groupOf != nil {
		g := c.groupOf(ent.key)
		delete(c.groups[g], ent.key)
		if len(c.groups[g]) == 0 {
			delete(c.groups, g)
		}
	}
	return ent.val
}

func (c *lru[K, V]) evicted(vs []V) {
	if c.onEvict == nil {
		return
	}
	for _, v := range vs {
		c.onEvict(v)
	}
}
