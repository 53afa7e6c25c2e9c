package sqlite

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// collectShare is how close to the collector's heap goal the background
// load lets the heap come before it collects its garbage itself (see
// collectNearGoal).
const collectShare = 0.8

// collectNearGoal runs a garbage collection when the heap is within
// collectShare of the collector's goal, and reports how long it took
// (false: none was needed).
//
// Why: the background load of a large store allocates fast while the heap
// grows to gigabytes, so the collector's marks (seconds each at a million
// memories) start with the load still allocating. The pacer then charges
// assists to every goroutine that allocates, a turn's too, and a goroutine
// that cannot pay is parked until the mark ends: the turns that took 0.5
// to 1.5 s while a million memories loaded each ended with a mark. A load
// that collects before the pacer would, and waits for that collection
// without allocating, leaves the mark only the turns' small allocations to
// pace.
func collectNearGoal() (time.Duration, bool) {
	s := [2]metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, false // not reported by this runtime
	}
	heap, goal := s[0].Value.Uint64(), s[1].Value.Uint64()
	if goal == 0 || float64(heap) < collectShare*float64(goal) {
		return 0, false
	}
	t := time.Now()
	runtime.GC()
	return time.Since(t), true
}
