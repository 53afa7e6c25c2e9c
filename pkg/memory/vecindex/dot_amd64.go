//go:build amd64 && !purego

package vecindex

import "golang.org/x/sys/cpu"

// useAVX2: the AVX2+FMA kernels in dot_amd64.s run when the CPU has both
// (checked once at start); otherwise the plain Go loops do.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAVX2 returns the inner product of the first n floats of a and b; n is
// a multiple of 8.
//
//go:noescape
func dotAVX2(a, b *float32, n int) float32

// dot4AVX2 returns the inner products of the first n floats of q with a,
// b, c and d; n is a multiple of 16.
//
//go:noescape
func dot4AVX2(q, a, b, c, d *float32, n int) (ra, rb, rc, rd float32)

// dot returns the inner product of a and b, which must have the same length.
func dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	if !useAVX2 || n < 8 {
		return dotGeneric(a, b)
	}
	m := n &^ 7
	s := dotAVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// dot4 returns the inner products of q with a, b, c and d (all of q's
// length).
func dot4(q, a, b, c, d []float32) (float32, float32, float32, float32) {
	n := len(q)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	if !useAVX2 || n < 16 {
		return dot4Generic(q, a, b, c, d)
	}
	m := n &^ 15
	ra, rb, rc, rd := dot4AVX2(&q[0], &a[0], &b[0], &c[0], &d[0], m)
	for i := m; i < n; i++ {
		ra += q[i] * a[i]
		rb += q[i] * b[i]
		rc += q[i] * c[i]
		rd += q[i] * d[i]
	}
	return ra, rb, rc, rd
}

// dotI8AVX2 returns the inner product of the first n int8 of a and b; n is
// a multiple of 16.
//
//go:noescape
func dotI8AVX2(a, b *int8, n int) int32

// dot4I8AVX2 returns the inner products of the first n int8 of q with a, b,
// c and d; n is a multiple of 16.
//
//go:noescape
func dot4I8AVX2(q, a, b, c, d *int8, n int) (ra, rb, rc, rd int32)

// dotI8 returns the inner product of two int8 codes of one length.
func dotI8(a, b []int8) int32 {
	n := len(a)
	b = b[:n]
	if !useAVX2 || n < 16 {
		return dotI8Generic(a, b)
	}
	m := n &^ 15
	s := dotI8AVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += int32(a[i]) * int32(b[i])
	}
	return s
}

// dot4I8 returns the inner products of q with a, b, c and d (all of q's
// length).
func dot4I8(q, a, b, c, d []int8) (int32, int32, int32, int32) {
	n := len(q)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	if !useAVX2 || n < 16 {
		return dot4I8Generic(q, a, b, c, d)
	}
	m := n &^ 15
	ra, rb, rc, rd := dot4I8AVX2(&q[0], &a[0], &b[0], &c[0], &d[0], m)
	for i := m; i < n; i++ {
		x := int32(q[i])
		ra += x * int32(a[i])
		rb += x * int32(b[i])
		rc += x * int32(c[i])
		rd += x * int32(d[i])
	}
	return ra, rb, rc, rd
}
