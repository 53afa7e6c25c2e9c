package vecindex

import "math"

// dot returns the inner product of a and b, which must have the same length.
// The loop is unrolled by eight with independent accumulators so the CPU can
// overlap the multiply-adds; the re-slicing lets the compiler drop bounds
// checks inside the loop.
func dot(a, b []float32) float32 {
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
