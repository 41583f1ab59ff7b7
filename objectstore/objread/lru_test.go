package objread

import "testing"

func TestLRU(t *testing.T) {
	var evicted []string
	c := newLRU(100, func(k blockKey) string { return k.obj }, func(v string) { evicted = append(evicted, v) })
	c.put(blockKey{"a", 1}, "a1", 40)
	c.put(blockKey{"a", 2}, "a2", 40)
	c.get(blockKey{"a", 1}) // a2 is now the least recently used
	c.put(blockKey{"b", 1}, "b1", 40)
	if c.contains(blockKey{"a", 2}) || c.bytes() != 80 || len(evicted) != 1 || evicted[0] != "a2" {
		t.Fatalf("after eviction: bytes %d evicted %v", c.bytes(), evicted)
	}
	if c.put(blockKey{"c", 1}, "huge", 101) || c.bytes() != 80 {
		t.Fatal("an entry larger than the cache was cached")
	}
	c.put(blockKey{"a", 1}, "a1'", 10) // replace
	if v, _ := c.get(blockKey{"a", 1}); v != "a1'" || c.bytes() != 50 {
		t.Fatalf("replace: %q, %d bytes", v, c.bytes())
	}
	c.removeGroup("a")
	if c.len() != 1 || c.bytes() != 40 || !c.contains(blockKey{"b", 1}) {
		t.Fatalf("removeGroup: %d entries, %d bytes", c.len(), c.bytes())
	}
	zero := newLRU[string, int](0, nil, nil)
	if zero.put("k", 1, 1) || zero.len() != 0 {
		t.Fatal("a zero-sized cache cached")
	}
}
