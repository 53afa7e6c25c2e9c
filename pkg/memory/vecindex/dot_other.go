//go:build !amd64 || purego

package vecindex

// useAVX2 is false off amd64 (and with the purego tag): the plain Go loops run.
const useAVX2 = false

// dot returns the inner product of a and b, which must have the same length.
func dot(a, b []float32) float32 { return dotGeneric(a, b) }

// dot4 returns the inner products of q with a, b, c and d (all of q's
// length).
func dot4(q, a, b, c, d []float32) (float32, float32, float32, float32) {
	return dot4Generic(q, a, b, c, d)
}

// dotI8 returns the inner product of two int8 codes of one length.
func dotI8(a, b []int8) int32 { return dotI8Generic(a, b) }

// dot4I8 returns the inner products of q with a, b, c and d (all of q's
// length).
func dot4I8(q, a, b, c, d []int8) (int32, int32, int32, int32) {
	return dot4I8Generic(q, a, b, c, d)
}
