package sqlite

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// A posting list's first postings, in rid order, are packed in blocks of
// blockLen (the field's frame-of-reference bit packing, as in Lucene's and
// PForDelta's blocks): a block keeps its first rid in the list's skip
// table, and in its data the gaps between its rids and its tfs, each at the
// fewest bits its widest takes. A LongMemEval-size memory holds about
// 1,100 distinct terms, so the postings were 6.7 of the 10 KB a memory
// took (6 bytes a posting: a 4-byte rid and a 2-byte tf); packed, a
// posting of a common term takes a few bits of gap and one or two of tf.
//
// The skip table has two entries a block, its first rid and the offset of
// its data; a block's data is a byte of gap width, a byte of tf width, the
// blockLen gaps (the first 0) and then the blockLen tfs: blockLen/8 bytes
// a bit of width each, so that every eighth value starts on a byte.
// The data ends with blockPad zero bytes so that a decoder reads eight
// bytes at any bit of it.
//
// A removed document's posting in a block gets tf 0 in place (0 fits any
// width). The postings after the blocks are kept plain (see term): the
// fewer than blockLen sorted ones not yet packed and the unsorted tail.
const (
	blockLen = 128
	blockPad = 8
)

// blockBuf is a block decoded.
type blockBuf struct {
	rids [blockLen]uint32
	tfs  [blockLen]uint16
}

// nblocks is how many blocks tm has packed.
func (tm *term) nblocks() int {
	if tm.bl == nil {
		return 0
	}
	return len(tm.bl.skip) / 2
}

// blockList is a list's blocks (a term without any has none).
type blockList struct {
	skip []uint32 // per block: its first rid and its offset in data
	data []byte   // the blocks, then blockPad zero bytes
}

// blockFirst is block b's first rid.
func (tm *term) blockFirst(b int) uint32 { return tm.bl.skip[2*b] }

// block decodes block b into buf.
func (tm *term) block(b int, buf *blockBuf) {
	d := tm.bl.data
	off := int(tm.bl.skip[2*b+1])
	wr, wt := uint(d[off]), uint(d[off+1])
	gaps := d[off+2:]
	unpackSum(&buf.rids, gaps, wr, tm.bl.skip[2*b])
	unpack16(&buf.tfs, gaps[blockLen/8*wr:], wt)
}

// blockRids decodes block b's rids into buf (not its tfs) and returns a
// reader of its tfs, for a reader that needs the tfs of a few postings.
func (tm *term) blockRids(b int, buf *blockBuf) tfReader {
	d := tm.bl.data
	off := int(tm.bl.skip[2*b+1])
	wr, wt := uint(d[off]), uint(d[off+1])
	unpackSum(&buf.rids, d[off+2:], wr, tm.bl.skip[2*b])
	tfs := d[off+2+blockLen/8*int(wr):]
	_ = tfs[blockLen/8*wt+blockPad-1] // every load of at
	return tfReader{base: unsafe.Pointer(unsafe.SliceData(tfs)), w: wt, mask: uint64(1)<<wt - 1}
}

// tfReader reads the tfs of a block (blockRids).
type tfReader struct {
	base unsafe.Pointer
	w    uint
	mask uint64 // 0 when w is: every tf 0, read from the padding
}

// at is posting i's tf (i < blockLen).
func (r tfReader) at(i int) uint16 {
	bit := uint(i) * r.w
	return uint16(load64(r.base, bit>>3) >> (bit & 7) & r.mask)
}

// unpackSum reads blockLen gaps of w bits from d into out as their sums
// from first (the rids). d holds them and blockPad bytes more: each group
// of eight values starts on a byte (at w x its number), and each value is
// one little-endian load at its byte (shifted by at most 7, a value of 32
// bits and its shift fit a load).
func unpackSum(out *[blockLen]uint32, d []byte, w uint, first uint32) {
	if w == 0 {
		for i := range out {
			out[i] = first
		}
		return
	}
	_ = d[blockLen/8*w+blockPad-1] // every load below is in d
	base := unsafe.Pointer(unsafe.SliceData(d))
	mask := uint64(1)<<w - 1
	b1, b2, b3, b4, b5, b6, b7 := w>>3, 2*w>>3, 3*w>>3, 4*w>>3, 5*w>>3, 6*w>>3, 7*w>>3
	s1, s2, s3, s4, s5, s6, s7 := w&7, 2*w&7, 3*w&7, 4*w&7, 5*w&7, 6*w&7, 7*w&7
	r := first
	if w <= 8 { // a group of eight in one load (its w bytes)
		w2, w3, w4, w5, w6, w7 := 2*w, 3*w, 4*w, 5*w, 6*w, 7*w
		for g := range uint(blockLen / 8) {
			v := load64(base, g*w)
			o := (*[8]uint32)(out[8*g:])
			v0 := uint32(v & mask)
			v1 := uint32(v >> w & mask)
			v2 := uint32(v >> w2 & mask)
			v3 := uint32(v >> w3 & mask)
			v4 := uint32(v >> w4 & mask)
			v5 := uint32(v >> w5 & mask)
			v6 := uint32(v >> w6 & mask)
			v7 := uint32(v >> w7 & mask)
			v01, v23, v45, v67 := v0+v1, v2+v3, v4+v5, v6+v7
			v03, v47 := v01+v23, v45+v67
			o[0] = r + v0
			o[1] = r + v01
			o[2] = r + v01 + v2
			o[3] = r + v03
			o[4] = r + v03 + v4
			o[5] = r + v03 + v45
			o[6] = r + v03 + v45 + v6
			r += v03 + v47
			o[7] = r
		}
		return
	}
	for g := range uint(blockLen / 8) {
		p := g * w
		o := (*[8]uint32)(out[8*g:])
		v0 := uint32(load64(base, p) & mask)
		v1 := uint32(load64(base, p+b1) >> s1 & mask)
		v2 := uint32(load64(base, p+b2) >> s2 & mask)
		v3 := uint32(load64(base, p+b3) >> s3 & mask)
		v4 := uint32(load64(base, p+b4) >> s4 & mask)
		v5 := uint32(load64(base, p+b5) >> s5 & mask)
		v6 := uint32(load64(base, p+b6) >> s6 & mask)
		v7 := uint32(load64(base, p+b7) >> s7 & mask)
		v01, v23, v45, v67 := v0+v1, v2+v3, v4+v5, v6+v7
		v03, v47 := v01+v23, v45+v67
		o[0] = r + v0
		o[1] = r + v01
		o[2] = r + v01 + v2
		o[3] = r + v03
		o[4] = r + v03 + v4
		o[5] = r + v03 + v45
		o[6] = r + v03 + v45 + v6
		r += v03 + v47
		o[7] = r
	}
}

// unpack16 reads blockLen values of w bits (at most 16) from d into out,
// as unpackSum reads them.
func unpack16(out *[blockLen]uint16, d []byte, w uint) {
	switch w {
	case 0:
		clear(out[:])
		return
	case 1: // tfs of 1 (or 0: removed), the common case: eight a byte, from a table
		_ = d[blockLen/8-1]
		for k := range blockLen / 8 {
			*(*[8]uint16)(out[8*k:]) = bitTFs[d[k]]
		}
		return
	}
	_ = d[blockLen/8*w+blockPad-1]
	base := unsafe.Pointer(unsafe.SliceData(d))
	mask := uint64(1)<<w - 1
	if w <= 8 {
		w2, w3, w4, w5, w6, w7 := 2*w, 3*w, 4*w, 5*w, 6*w, 7*w
		for g := range uint(blockLen / 8) {
			v := load64(base, g*w)
			o := (*[8]uint16)(out[8*g:])
			o[0] = uint16(v & mask)
			o[1] = uint16(v >> w & mask)
			o[2] = uint16(v >> w2 & mask)
			o[3] = uint16(v >> w3 & mask)
			o[4] = uint16(v >> w4 & mask)
			o[5] = uint16(v >> w5 & mask)
			o[6] = uint16(v >> w6 & mask)
			o[7] = uint16(v >> w7 & mask)
		}
		return
	}
	b1, b2, b3, b4, b5, b6, b7 := w>>3, 2*w>>3, 3*w>>3, 4*w>>3, 5*w>>3, 6*w>>3, 7*w>>3
	s1, s2, s3, s4, s5, s6, s7 := w&7, 2*w&7, 3*w&7, 4*w&7, 5*w&7, 6*w&7, 7*w&7
	for g := range uint(blockLen / 8) {
		p := g * w
		o := (*[8]uint16)(out[8*g:])
		o[0] = uint16(load64(base, p) & mask)
		o[1] = uint16(load64(base, p+b1) >> s1 & mask)
		o[2] = uint16(load64(base, p+b2) >> s2 & mask)
		o[3] = uint16(load64(base, p+b3) >> s3 & mask)
		o[4] = uint16(load64(base, p+b4) >> s4 & mask)
		o[5] = uint16(load64(base, p+b5) >> s5 & mask)
		o[6] = uint16(load64(base, p+b6) >> s6 & mask)
		o[7] = uint16(load64(base, p+b7) >> s7 & mask)
	}
}

// clearTF sets the tf of posting i of block b to 0 (its document removed).
func (tm *term) clearTF(b, i int) {
	d := tm.bl.data
	off := int(tm.bl.skip[2*b+1])
	wr, wt := uint(d[off]), uint(d[off+1])
	if wt == 0 {
		return
	}
	bit := uint(i) * wt
	at := off + 2 + int(blockLen/8*wr) + int(bit>>3)
	v := binary.LittleEndian.Uint64(d[at:])
	binary.LittleEndian.PutUint64(d[at:], v&^((uint64(1)<<wt-1)<<(bit&7)))
}

// lastPacked is the rid of the last packed posting (0: none packed).
func (tm *term) lastPacked() uint32 {
	nb := tm.nblocks()
	if nb == 0 {
		return 0
	}
	var buf blockBuf
	tm.block(nb-1, &buf)
	return buf.rids[blockLen-1]
}

// pack appends a block of the blockLen postings rids and tfs (rids
// ascending).
func (tm *term) pack(rids []uint32, tfs []uint16) {
	var gaps uint32
	for i := 1; i < blockLen; i++ {
		gaps |= rids[i] - rids[i-1]
	}
	var all uint16
	for _, tf := range tfs[:blockLen] {
		all |= tf
	}
	wr, wt := uint(bits.Len32(gaps)), uint(bits.Len16(all))
	if tm.bl == nil {
		tm.bl = &blockList{}
	}
	d := tm.bl.data
	if len(d) >= blockPad {
		d = d[:len(d)-blockPad]
	}
	tm.bl.skip = append(tm.bl.skip, rids[0], uint32(len(d)))
	d = append(d, byte(wr), byte(wt))
	// The gaps (the first 0: the skip table has the first rid), then the
	// tfs, each part blockLen/8 x its width bytes.
	var w bitWriter
	w.out = d
	if wr > 0 {
		w.put(0, wr)
		for i := 1; i < blockLen; i++ {
			w.put(uint64(rids[i]-rids[i-1]), wr)
		}
	}
	if wt > 0 {
		for _, tf := range tfs[:blockLen] {
			w.put(uint64(tf), wt)
		}
	}
	tm.bl.data = append(w.out, make([]byte, blockPad)...)
}

// bitTFs is, for each byte of a block of 1-bit tfs, its eight tfs.
var bitTFs = func() (t [256][8]uint16) {
	for b := range t {
		for i := range 8 {
			t[b][i] = uint16(b >> i & 1)
		}
	}
	return t
}()

// bitWriter appends values of up to 32 bits, lowest bits first.
type bitWriter struct {
	out []byte
	acc uint64
	n   uint
}

func (w *bitWriter) put(v uint64, width uint) {
	w.acc |= v << w.n
	w.n += width
	for w.n >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

// parts is how many runs a reader of tm's postings goes through: each
// block, then the plain postings (see part).
func (tm *term) parts() int { return tm.nblocks() + 1 }

// part returns run i of tm's postings, rids and tfs of the same length:
// block i decoded into buf, or (the last) the plain postings.
func (tm *term) part(i int, buf *blockBuf) ([]uint32, []uint16) {
	if i < tm.nblocks() {
		return tm.decoded(i, buf)
	}
	return tm.rids, tm.tfs
}

// decoded is part for a block (part stays small enough to be inlined).
func (tm *term) decoded(b int, buf *blockBuf) ([]uint32, []uint16) {
	tm.block(b, buf)
	return buf.rids[:], buf.tfs[:]
}

// count is how many postings tm holds, live and stale.
func (tm *term) count() int { return tm.nblocks()*blockLen + len(tm.rids) }

// sortedLen is how many postings from the first are in rid order.
func (tm *term) sortedLen() int { return tm.nblocks()*blockLen + tm.run }

// all appends tm's postings to out, live and stale, in the order kept.
func (tm *term) all(out []posting) []posting {
	var buf blockBuf
	for p := range tm.parts() {
		rids, tfs := tm.part(p, &buf)
		for i, rid := range rids {
			out = append(out, posting{rid, tfs[i]})
		}
	}
	return out
}

// setAll replaces tm's postings with ps (in rid order): blocks of every
// blockLen when pack is set, the rest plain.
func (tm *term) setAll(ps []posting, pack bool) {
	tm.bl = nil
	tm.addPacked(ps, pack)
}

// addPacked puts ps (in rid order, none below the blocks' last) after
// tm's blocks: packed blockLen a block when pack is set, the rest plain
// (tm's plain postings are dropped: the caller has them in ps).
func (tm *term) addPacked(ps []posting, pack bool) {
	full := 0
	if pack {
		var rids [blockLen]uint32
		var tfs [blockLen]uint16
		full = len(ps) / blockLen * blockLen
		for at := 0; at < full; at += blockLen {
			for i, p := range ps[at : at+blockLen] {
				rids[i], tfs[i] = p.rid, p.tf
			}
			tm.pack(rids[:], tfs[:])
		}
	}
	rest := ps[full:]
	tm.rids, tm.tfs = make([]uint32, len(rest)), make([]uint16, len(rest))
	for i, p := range rest {
		tm.rids[i], tm.tfs[i] = p.rid, p.tf
	}
	tm.run = len(rest)
	if tm.bl != nil {
		tm.bl.skip = clipCap(tm.bl.skip)
		tm.bl.data = clipCap(tm.bl.data)
	}
}

// packRun packs the plain sorted postings, every blockLen of them, and
// keeps the rest (and the tail) plain.
func (tm *term) packRun() {
	full := tm.run / blockLen * blockLen
	for at := 0; at < full; at += blockLen {
		tm.pack(tm.rids[at:at+blockLen], tm.tfs[at:at+blockLen])
	}
	n := copy(tm.rids, tm.rids[full:])
	copy(tm.tfs, tm.tfs[full:])
	tm.rids, tm.tfs, tm.run = tm.rids[:n], tm.tfs[:n], tm.run-full
}

// trim copies every list once the load is done, a batch of terms at a
// time under the write lock (turns wait for a batch, not for the whole
// index). Lists grown by appends during the load sit among the load's
// garbage: freed, it leaves their spans partly used, which the runtime
// cannot give back (100,000 LongMemEval-size memories: 630 bytes a memory
// of spans in use beyond the bytes allocated before the copy, 170 after).
// The copies have no spare capacity either (a list grown by appends keeps
// up to as much again). The term table is clipped too.
func (x *index) trim() {
	for from := 0; ; from += trimBatch {
		x.mu.Lock()
		l := x.lex
		to := min(from+trimBatch, len(l.tms))
		for i := from; i < to; i++ {
			tm := &l.tms[i]
			tm.rids, tm.tfs = exactCopy(tm.rids), exactCopy(tm.tfs[:len(tm.rids)])
			if tm.bl != nil {
				tm.bl.skip, tm.bl.data = exactCopy(tm.bl.skip), exactCopy(tm.bl.data)
			}
		}
		done := to == len(l.tms)
		if done {
			l.tms = clipCap(l.tms)
		}
		x.mu.Unlock()
		if done {
			return
		}
	}
}

// trimBatch is how many terms' lists trim copies under one hold of the
// write lock (about 4 MB of postings at 100,000 long memories).
const trimBatch = 4096

// clipCap returns s without spare capacity when that is more than an
// eighth of it (a list rebuilt keeps no slack; one growing keeps the
// append's).
func clipCap[T any](s []T) []T {
	if cap(s)-len(s) > len(s)/8 {
		return exactCopy(s)
	}
	return s
}

// exactCopy returns a copy of s with no spare capacity (nil for nil).
func exactCopy[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
