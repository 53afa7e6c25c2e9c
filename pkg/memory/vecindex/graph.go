package vecindex

// graph is the navigation structure over the slots. This first version keeps
// no links: Search always scans exactly. The HNSW graph replaces it.
type graph struct{}

func (g *graph) init(cfg config, seed uint64)                                            {}
func (g *graph) ready() bool                                                             { return false }
func (g *graph) insert(ix *Index, slot uint32, locked bool)                              {}
func (g *graph) insertMany(ix *Index, slots []uint32)                                    {}
func (g *graph) search(ix *Index, q []float32, k int, accept func(string) bool) []scored { return nil }

// maybeCleanupLocked frees tombstoned slots for reuse.
func (ix *Index) maybeCleanupLocked() {
	for slot, n := range ix.nodes {
		if n.state == slotTomb {
			n.state = slotFree
			ix.free = append(ix.free, uint32(slot))
		}
	}
	ix.tombs = 0
}
