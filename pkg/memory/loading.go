package memory

import "time"

// LoadStatus is how far a store that keeps in-memory indexes (the SQLite
// backend) has got loading them after it opened. A store whose indexes live
// on the server (Redis) has nothing to load and does not report one.
//
// While Nodes is false the store answers from the memories loaded so far
// (a partial graph: retrieval finds fewer candidates; the SQLite store
// loads the standing instructions first and leaves the vector channel out
// meanwhile); while Vectors is false the vector channel answers by exact
// search over the loaded vectors.
type LoadStatus struct {
	Loaded int // memories loaded so far
	Total  int // memories in the store when loading began (0 until counted)
	// Nodes: every memory is loaded (heads, filters, BM25 index, edges).
	Nodes bool
	// Vectors: the vector graph indexes are built as well.
	Vectors bool
	// NodesIn and VectorsIn are how long each took from open (0 until done).
	NodesIn, VectorsIn time.Duration
	// Collections are the garbage collections the load ran itself so that
	// the collector's marks do not meet its allocations (the SQLite
	// backend's background load), and CollectedIn their time.
	Collections int
	CollectedIn time.Duration
	// Err is why loading stopped (the store then answers from what it has).
	Err error
}
