package sqlite

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// A document's term list (its distinct terms, to remove or re-index it)
// is kept as its term ids in ascending order, each as its difference from
// the one before in a uvarint: about 2 bytes a term at a million terms
// instead of 4 (measured in docs/benchmarks.md, "Where a loaded SQLite
// store's heap goes"). Re-deriving it from the text instead would need the
// text of the document's previous version at every re-index and removal,
// which the index does not keep.

// encodeTerms returns ids (sorted in place) as ascending deltas in
// uvarints, in a slice of its own size (never nil: an empty document is
// indexed).
func encodeTerms(ids []uint32) []byte {
	slices.Sort(ids)
	size, prev := 0, uint32(0)
	for _, id := range ids {
		size += uvarintLen(id - prev)
		prev = id
	}
	buf := make([]byte, 0, size) // its size exactly: the list lives as long as the document
	prev = 0
	for _, id := range ids {
		buf = binary.AppendUvarint(buf, uint64(id-prev))
		prev = id
	}
	return buf
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint32) int { return (bits.Len32(v|1) + 6) / 7 }

// eachTerm calls fn with each term id of an encoded term list, in
// ascending order, and returns how many there are.
func eachTerm(enc []byte, fn func(id uint32)) int {
	n := 0
	id := uint32(0)
	for len(enc) > 0 {
		d, k := binary.Uvarint(enc)
		enc = enc[k:]
		id += uint32(d)
		fn(id)
		n++
	}
	return n
}
