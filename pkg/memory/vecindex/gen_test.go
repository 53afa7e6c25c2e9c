package vecindex

import (
	"math"
	"math/rand/v2"
)

// embeddingLike returns n vectors shaped like text embeddings: points drawn
// from c clusters in a latent space of latent dimensions, mapped into dim
// dimensions by a fixed random linear map, plus isotropic noise. Real
// sentence embeddings occupy a low-dimensional, clustered region of their
// space like this; isotropic random vectors (randVec) are the worst case for
// any graph index and are tested separately.
type embeddingLike struct {
	dim, latent int
	basis       [][]float32 // latent x dim
	centres     [][]float64
	spread      float64
	noise       float64
}

func newEmbeddingLike(r *rand.Rand, dim, latent, clusters int) *embeddingLike {
	e := &embeddingLike{dim: dim, latent: latent, spread: 1, noise: 0.2}
	e.basis = make([][]float32, latent)
	for i := range e.basis {
		e.basis[i] = randVec(r, dim)
	}
	e.centres = make([][]float64, clusters)
	for i := range e.centres {
		c := make([]float64, latent)
		for j := range c {
			c[j] = r.NormFloat64()
		}
		e.centres[i] = c
	}
	return e
}

func (e *embeddingLike) sample(r *rand.Rand, n int) [][]float32 {
	out := make([][]float32, n)
	z := make([]float64, e.latent)
	for i := range out {
		c := e.centres[r.IntN(len(e.centres))]
		for j := range z {
			z[j] = c[j] + r.NormFloat64()*e.spread
		}
		v := make([]float32, e.dim)
		for j, b := range e.basis {
			zj := float32(z[j])
			for d := range v {
				v[d] += zj * b[d]
			}
		}
		scale := float32(math.Sqrt(float64(e.latent)) * e.noise)
		for d := range v {
			v[d] += float32(r.NormFloat64()) * scale
		}
		out[i] = v
	}
	return out
}
