// Package memorytest is the conformance suite every memory.Store backend
// runs, and a benchmark helper for the retrieval channels.
//
// A backend's test calls Run with a Factory that returns a fresh, empty store
// driven by the given clock:
//
//	func TestConformance(t *testing.T) {
//		memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), sqlite.WithClock(now))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Each subtest gets its own store and its own fake clock, which the suite
// advances to test lease expiry, briefing expiry and the 6-hour decay rule
// without sleeping. The suite closes the store when the subtest ends. The
// backend must read the time only through the clock.
//
// Tenants/* (tenants.go) hold the tenant boundary on every part of the
// contract: two tenants using the same project ids, session ids and texts
// share nothing (nodes, digests, channels, standing instructions, counts,
// sessions, leases, processed records, journals), global means global
// within the tenant, and no edge, supersede, revision or batch ties two
// tenants.
//
// Bench seeds a store with a deterministic corpus (BenchCorpus: one project,
// 384-dimension clustered vectors, Zipf-distributed words, paths, about 2%
// standing instructions) and reports upsert throughput and per-query p50/p99
// of each channel; backends call it from their own benchmarks.
package memorytest
