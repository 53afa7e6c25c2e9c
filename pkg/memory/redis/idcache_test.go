package redis

import (
	"fmt"
	"maps"
	"testing"
)

func TestProjectCache(t *testing.T) {
	c := newProjectCache(4)
	if _, ok := c.get("a"); ok {
		t.Fatal("empty cache answered")
	}
	c.put("a", "p1")
	c.put("b", "p2")
	c.put("c", "p1")
	for id, want := range map[string]string{"a": "p1", "b": "p2", "c": "p1"} {
		if got, ok := c.get(id); !ok || got != want {
			t.Errorf("get(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
	out := map[string]string{"keep": "x"}
	miss := c.getMany([]string{"a", "z", "", "b"}, out)
	if fmt.Sprint(miss) != "[z]" {
		t.Errorf("miss = %v, want [z] (empty ids are neither hits nor misses)", miss)
	}
	if want := map[string]string{"keep": "x", "a": "p1", "b": "p2"}; !maps.Equal(out, want) {
		t.Errorf("getMany out = %v, want %v", out, want)
	}
	// Full: the next put empties it, names included, and keeps only itself.
	c.put("d", "p3")
	c.put("e", "p4")
	if _, ok := c.get("a"); ok {
		t.Error("a survived the cache being emptied")
	}
	if got, ok := c.get("e"); !ok || got != "p4" {
		t.Errorf("get(e) = %q, %v after the reset", got, ok)
	}
	if len(c.names) != 1 || len(c.index) != 1 {
		t.Errorf("names %v, index %v: want only p4 after the reset", c.names, c.index)
	}
}
