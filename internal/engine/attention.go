package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
)

// attnTask is one attention step split across the workers by (row, head)
// items; scores holds each worker's scratch row.
type attnTask struct {
	a      *attnArgs
	scores [][]float32 // [worker][ctx]
}

func (t *attnTask) run(w, lo, hi int) {
	a := t.a
	switch {
	case a.Ku != nil:
		attendRows(a, a.Ku, a.Vu, u8Codec{a.ks}, u8Codec{a.vs}, lo, hi, t.scores[w])
	case a.Kh != nil:
		attendRowsF16(a, lo, hi, t.scores[w])
	default:
		attendRowsF32(a, lo, hi, t.scores[w])
	}
}

// attend runs the attention step s.attn: the new rows go into the cache,
// then the workers share the (row, head) items. Float32 and binary16
// caches are stored transposed, [C][Ctx] (storeKVT), so that a row's
// scores and outputs are long contiguous dot products and updates.
func (s *Session) attend() {
	a := &s.attn
	switch {
	case a.Ku != nil:
		storeKV(a, a.Ku, a.Vu, u8Codec{a.ks}, u8Codec{a.vs})
	case a.Kh != nil:
		storeKVT(a, a.Kh, a.Vh, f16Codec{}, f16Codec{})
	default:
		storeKVT(a, a.K, a.V, f32Codec{}, f32Codec{})
	}
	s.attnTask.a = a
	items := a.T * a.H
	cost := items * (a.pos + a.T) * a.E
	s.pool.do(&s.attnTask, items, 1, cost >= minParallelCost)
}

// storeKVT encodes the T rows of k and v into the transposed cache:
// column c of position p is at K[c*ctx+p].
func storeKVT[T any, C kvCodec[T]](a *attnArgs, K, V []T, kc, vc C) {
	kvc := a.G * a.E
	for t := 0; t < a.T; t++ {
		p := a.pos + t
		for c := 0; c < kvc; c++ {
			K[c*a.ctx+p] = kc.enc(a.k[t*kvc+c], 1)
			V[c*a.ctx+p] = vc.enc(a.v[t*kvc+c], 1)
		}
	}
}

// attendRowsF32 is attendRows over a transposed float32 cache: a row's
// scores are E updates of length P (one per key column), its outputs E
// dot products of length P.
func attendRowsF32(a *attnArgs, lo, hi int, scores []float32) {
	E, H, ctx := a.E, a.H, a.ctx
	group := H / a.G
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		p, first := a.pos+t, a.first(t)
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		base := (h / group) * E
		sc := scores[:p+1-first]
		clear(sc)
		for e, qv := range qh {
			c := (base + e) * ctx
			kernel.Axpy(sc, qv*a.scale, a.K[c+first:c+p+1])
		}
		inv := 1 / expSub(sc, maxOf(sc))
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		for e := range oh {
			c := (base + e) * ctx
			oh[e] = kernel.Dot(sc, a.V[c+first:c+p+1]) * inv
		}
	}
}

// attendRowsF16 is attendRowsF32 over a transposed binary16 cache.
func attendRowsF16(a *attnArgs, lo, hi int, scores []float32) {
	E, H, ctx := a.E, a.H, a.ctx
	group := H / a.G
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		p, first := a.pos+t, a.first(t)
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		base := (h / group) * E
		sc := scores[:p+1-first]
		clear(sc)
		for e, qv := range qh {
			c := (base + e) * ctx
			kernel.AxpyF16(sc, qv*a.scale, a.Kh[c+first:c+p+1])
		}
		inv := 1 / expSub(sc, maxOf(sc))
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		for e := range oh {
			c := (base + e) * ctx
			oh[e] = kernel.DotF16(sc, a.Vh[c+first:c+p+1]) * inv
		}
	}
}

func maxOf(x []float32) float32 {
	m := float32(-math.MaxFloat32)
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// expSub sets x[i] = exp(x[i] - m) and returns their sum.
func expSub(x []float32, m float32) float32 { return kernel.ExpSub(x, m) }
