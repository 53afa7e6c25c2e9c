package memorytest

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Factory returns a fresh, empty store that reads the time from now.
type Factory func(t *testing.T, now func() time.Time) memory.Store

// Clock is the fake clock of a subtest. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Epoch is where every subtest's clock starts.
var Epoch = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{t: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	t   *testing.T
	s   memory.Store
	c   *Clock
	ctx context.Context
}

type subtest struct {
	name string
	fn   func(e *env)
}

// Run runs the whole conformance suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	var tests []subtest
	tests = append(tests, nodeTests...)
	tests = append(tests, graphTests...)
	tests = append(tests, edgesOfTests...)
	tests = append(tests, channelTests...)
	tests = append(tests, sessionTests...)
	tests = append(tests, countTests...)
	tests = append(tests, journalTests...)
	tests = append(tests, tenantTests...)
	tests = append(tests, letterTests...)
	tests = append(tests, eraseTests...)
	tests = append(tests, findTests...)
	for _, st := range tests {
		t.Run(st.name, func(t *testing.T) {
			c := NewClock()
			s := newStore(t, c.Now)
			if s == nil {
				t.Fatal("factory returned a nil store")
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st.fn(&env{t: t, s: s, c: c, ctx: ctx})
		})
	}
}

// ---- helpers ----

func (e *env) upsert(n memory.Node) memory.Node {
	e.t.Helper()
	r, err := e.s.Upsert(e.ctx, n)
	if err != nil {
		e.t.Fatalf("Upsert(%q): %v", n.Label, err)
	}
	return r.Node
}

func (e *env) get(id string) memory.Node {
	e.t.Helper()
	n, err := e.s.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return n
}

func (e *env) is(err, target error, what string) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func (e *env) ok(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// node is a project memory of p with the given label.
func node(p string, k memory.Subkind, label string) memory.Node {
	return memory.Node{Subkind: k, Scope: memory.ScopeProject, ProjectID: p, Label: label}
}

func ids(sc []memory.Scored) []string {
	out := make([]string, len(sc))
	for i, s := range sc {
		out[i] = s.ID
	}
	return out
}

func nodeIDs(ns []memory.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func sorted(ss []string) []string {
	ss = slices.Clone(ss)
	sort.Strings(ss)
	return ss
}

func near(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

// sameSet fails unless got and want hold the same ids (any order).
func (e *env) sameSet(what string, got, want []string) {
	e.t.Helper()
	if !slices.Equal(sorted(got), sorted(want)) {
		e.t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func (e *env) sameList(what string, got, want []string) {
	e.t.Helper()
	if !slices.Equal(got, want) {
		e.t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// ranked checks that scores are positive and not increasing.
func (e *env) ranked(what string, sc []memory.Scored) {
	e.t.Helper()
	for i, s := range sc {
		if !(s.Score > 0) || math.IsInf(s.Score, 0) {
			e.t.Fatalf("%s: score %v of %s is not a positive number", what, s.Score, s.ID)
		}
		if i > 0 && s.Score > sc[i-1].Score+1e-9 {
			e.t.Fatalf("%s: not best first: %v", what, sc)
		}
	}
}

// names maps ids back to the suite's names for readable failures.
func names(byName map[string]string, got []string) string {
	rev := make(map[string]string, len(byName))
	for k, v := range byName {
		rev[v] = k
	}
	out := make([]string, len(got))
	for i, id := range got {
		if n, ok := rev[id]; ok {
			out[i] = n
		} else {
			out[i] = id
		}
	}
	return strings.Join(out, ",")
}

func vec(xs ...float32) []float32 { return xs }

func timeEq(a, b time.Time) bool { return a.Sub(b).Abs() < time.Millisecond }
