package vecindex

// Erase removes the vectors of ids (unknown ids are ignored) and, unlike
// Remove, keeps nothing of them: Remove leaves a tombstone in the graph,
// vector included, until enough of them pile up for a cleanup, while Erase
// repairs the graph at once and zeroes the slots' vectors and codes
// (cleanup zeroes every slot it frees), so that the index's memory holds
// no trace of an erased vector. It returns how many it removed. A cleanup
// walks every live node: erase in batches, not one id at a time.
func (ix *Index) Erase(ids ...string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, id := range ids {
		if ix.removeLocked(id) {
			n++
		}
	}
	if ix.tombs > 0 {
		ix.cleanupLocked()
	}
	return n
}

// wipeLocked zeroes a freed slot's vector, code and tag (ix.mu
// write-held).
func (ix *Index) wipeLocked(slot uint32) {
	if !ix.codesOnly() {
		clear(ix.vec(slot))
	}
	if ix.codes != nil {
		clear(ix.code(slot))
		ix.scales[slot] = 0
	}
	ix.tags[slot] = 0
}

// Tombstones is how many removed vectors the graph still holds (Remove
// keeps them as stepping stones until a cleanup; Erase keeps none).
func (ix *Index) Tombstones() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.tombs
}
