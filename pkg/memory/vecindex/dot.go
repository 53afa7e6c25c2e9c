package vecindex

import "math"

// dotGeneric is dot in plain Go. The loop is unrolled by eight with
// independent accumulators so the CPU can overlap the multiply-adds; the
// re-slicing lets the compiler drop bounds checks inside the loop.
func dotGeneric(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// normalize writes vec scaled to unit length into dst (len(dst) == len(vec)).
// It reports false when vec has zero length or holds NaN or infinite values.
func normalize(dst, vec []float32) bool {
	var sum float64
	for _, x := range vec {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		sum += f * f
	}
	if sum == 0 || math.IsInf(sum, 0) {
		return false
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range vec {
		dst[i] = float32(float64(x) * inv)
	}
	return true
}

// dot4Generic is dot4 in plain Go. Walking four vectors in one pass loads q
// once for four products and, more importantly, keeps four streams of cache
// misses in flight: on vectors scattered in memory (a graph walk) it is
// about twice as fast per vector as four calls to dot.
func dot4Generic(q, a, b, c, d []float32) (float32, float32, float32, float32) {
	n := len(q)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	var sa0, sb0, sc0, sd0, sa1, sb1, sc1, sd1 float32
	i := 0
	for ; i+1 < n; i += 2 {
		q0, q1 := q[i], q[i+1]
		sa0 += q0 * a[i]
		sb0 += q0 * b[i]
		sc0 += q0 * c[i]
		sd0 += q0 * d[i]
		sa1 += q1 * a[i+1]
		sb1 += q1 * b[i+1]
		sc1 += q1 * c[i+1]
		sd1 += q1 * d[i+1]
	}
	if i < n {
		sa0 += q[i] * a[i]
		sb0 += q[i] * b[i]
		sc0 += q[i] * c[i]
		sd0 += q[i] * d[i]
	}
	return sa0 + sa1, sb0 + sb1, sc0 + sc1, sd0 + sd1
}

// query is a search's query: the unit vector and, for a walk on the codes,
// its own int8 code and scale (scale 0: the walk uses the float32 vectors).
type query struct {
	v     []float32
	code  []int8
	scale float32
}

// sim is the similarity of the query to slot as the walk measures it: on
// the codes when the query has one, else on the vectors.
func (ix *Index) sim(q *query, slot uint32) float32 {
	if q.scale == 0 {
		return dot(q.v, ix.vec(slot))
	}
	return q.scale * ix.scales[slot] * float32(dotI8(q.code, ix.code(slot)))
}

// touch reads a byte of each cache line of each slot's code (and its
// scale), or the first of its vector, before sims computes them: the reads
// are independent, so the CPU overlaps their cache misses, where dot4
// would wait on four codes' lines at a time.
func (ix *Index) touch(q *query, slots []uint32) byte {
	var t byte
	if q.scale != 0 {
		for _, s := range slots {
			code := ix.codes[int(s)*ix.dim : int(s+1)*ix.dim]
			for i := 0; i < len(code); i += 64 {
				t ^= byte(code[i])
			}
			t ^= byte(math.Float32bits(ix.scales[s]))
		}
		return t
	}
	for _, s := range slots {
		t ^= byte(math.Float32bits(ix.vecs[int(s)*ix.dim]))
	}
	return t
}

// sims is sim for each slot into out (len(out) == len(slots)), four at a
// time.
func (ix *Index) sims(q *query, slots []uint32, out []float32) {
	if q.scale == 0 {
		ix.dots(q.v, slots, out)
		return
	}
	i := 0
	for ; i+4 <= len(slots); i += 4 {
		a, b, c, d := slots[i], slots[i+1], slots[i+2], slots[i+3]
		ra, rb, rc, rd := dot4I8(q.code, ix.code(a), ix.code(b), ix.code(c), ix.code(d))
		out[i] = q.scale * ix.scales[a] * float32(ra)
		out[i+1] = q.scale * ix.scales[b] * float32(rb)
		out[i+2] = q.scale * ix.scales[c] * float32(rc)
		out[i+3] = q.scale * ix.scales[d] * float32(rd)
	}
	for ; i < len(slots); i++ {
		out[i] = ix.sim(q, slots[i])
	}
}

// dots writes the similarity of q to each slot into out (len(out) ==
// len(slots)), four at a time.
func (ix *Index) dots(q []float32, slots []uint32, out []float32) {
	i := 0
	for ; i+4 <= len(slots); i += 4 {
		out[i], out[i+1], out[i+2], out[i+3] = dot4(q,
			ix.vec(slots[i]), ix.vec(slots[i+1]), ix.vec(slots[i+2]), ix.vec(slots[i+3]))
	}
	for ; i < len(slots); i++ {
		out[i] = dot(q, ix.vec(slots[i]))
	}
}

// dotF32I8 is the inner product of a float32 vector and an int8 code of
// one length (the code's scale left out), eight-way unrolled.
func dotF32I8(q []float32, c []int8) float32 {
	n := len(q)
	c = c[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		qq := q[i : i+8 : i+8]
		cc := c[i : i+8 : i+8]
		s0 += qq[0] * float32(cc[0])
		s1 += qq[1] * float32(cc[1])
		s2 += qq[2] * float32(cc[2])
		s3 += qq[3] * float32(cc[3])
		s4 += qq[4] * float32(cc[4])
		s5 += qq[5] * float32(cc[5])
		s6 += qq[6] * float32(cc[6])
		s7 += qq[7] * float32(cc[7])
	}
	for ; i < n; i++ {
		s0 += q[i] * float32(c[i])
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// Quantize writes unit vector v as int8 codes into dst (len(dst) ==
// len(v)) and returns their scale, as the index quantises (for callers
// that keep vectors themselves, such as the SQLite store's exact search
// while its graph is built).
func Quantize(dst []int8, v []float32) float32 { return quantize(dst, v) }

// DotCodes is the inner product of two int8 codes of one length (their
// scales left out), exact, with the AVX2 kernel where the CPU has it.
func DotCodes(a, b []int8) int32 { return dotI8(a, b) }

// DotCode is the similarity of a float32 query to a vector kept as a code
// and its scale (Quantize): the query times the code, times the scale.
func DotCode(q []float32, code []int8, scale float32) float32 { return scale * dotF32I8(q, code) }

// dotI8Generic is dotI8 in plain Go.
func dotI8Generic(a, b []int8) int32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= n; i += 4 {
		aa := a[i : i+4 : i+4]
		bb := b[i : i+4 : i+4]
		s0 += int32(aa[0]) * int32(bb[0])
		s1 += int32(aa[1]) * int32(bb[1])
		s2 += int32(aa[2]) * int32(bb[2])
		s3 += int32(aa[3]) * int32(bb[3])
	}
	for ; i < n; i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// dot4I8Generic is dot4I8 in plain Go.
func dot4I8Generic(q, a, b, c, d []int8) (int32, int32, int32, int32) {
	n := len(q)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	var sa, sb, sc, sd int32
	for i, x := range q {
		v := int32(x)
		sa += v * int32(a[i])
		sb += v * int32(b[i])
		sc += v * int32(c[i])
		sd += v * int32(d[i])
	}
	return sa, sb, sc, sd
}

// quantize writes unit vector v as int8 codes into dst (len(dst) ==
// len(v)) and returns their scale: v[i] is about dst[i] x scale. The scale
// is the largest magnitude over 127, so every code lies in [-127, 127].
func quantize(dst []int8, v []float32) float32 {
	// Comparisons, not the builtin max, and the rounding by adding a half:
	// max's NaN and signed-zero handling and math.Round's bit twiddling
	// were most of the CPU a big store's load spent quantising.
	var m float32
	for _, x := range v {
		if x < 0 {
			x = -x
		}
		if x > m {
			m = x
		}
	}
	if m == 0 {
		clear(dst)
		return 0
	}
	inv := 127 / m
	for i, x := range v {
		// x * inv is a float32 of magnitude at most 127: adding a half in
		// float64 is exact, so truncating rounds half away from zero
		// exactly as math.Round does.
		t := float64(x * inv)
		dst[i] = int8(t + math.Copysign(0.5, t))
	}
	return m / 127
}

// Dot returns the inner product of a and b, which must have the same length
// (it panics when b is shorter), with the AVX2 kernel where the CPU has it:
// for callers that scan vectors themselves, such as the SQLite store's
// exact search while its graph is built.
func Dot(a, b []float32) float32 { return dot(a, b) }
