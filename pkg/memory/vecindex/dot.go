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
