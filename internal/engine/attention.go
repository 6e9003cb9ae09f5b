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
// then the workers share the (row, head) items.
func (s *Session) attend() {
	a := &s.attn
	switch {
	case a.Ku != nil:
		storeKV(a, a.Ku, a.Vu, u8Codec{a.ks}, u8Codec{a.vs})
	case a.Kh != nil:
		storeKV(a, a.Kh, a.Vh, f16Codec{}, f16Codec{})
	default:
		storeKV(a, a.K, a.V, f32Codec{}, f32Codec{})
	}
	s.attnTask.a = a
	items := a.T * a.H
	cost := items * (a.pos + a.T) * a.E
	s.pool.do(&s.attnTask, items, 1, cost >= minParallelCost)
}

// attendRowsF32 is attendRows over a float32 cache with the kernel
// package's dot product and update.
func attendRowsF32(a *attnArgs, lo, hi int, scores []float32) {
	E, H, Cc := a.E, a.H, a.C
	group := H / a.G
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		p, first := a.pos+t, a.first(t)
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		off := (h / group) * E
		mx := float32(-math.MaxFloat32)
		for j := first; j <= p; j++ {
			s := kernel.Dot(qh, a.K[j*Cc+off:j*Cc+off+E]) * a.scale
			scores[j] = s
			mx = max(mx, s)
		}
		inv := 1 / expSub(scores[first:p+1], mx)
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		clear(oh)
		for j := first; j <= p; j++ {
			kernel.Axpy(oh, scores[j]*inv, a.V[j*Cc+off:j*Cc+off+E])
		}
	}
}

// attendRowsF16 is attendRowsF32 over a binary16 cache.
func attendRowsF16(a *attnArgs, lo, hi int, scores []float32) {
	E, H, Cc := a.E, a.H, a.C
	group := H / a.G
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		p, first := a.pos+t, a.first(t)
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		off := (h / group) * E
		mx := float32(-math.MaxFloat32)
		for j := first; j <= p; j++ {
			s := kernel.DotF16(qh, a.Kh[j*Cc+off:j*Cc+off+E]) * a.scale
			scores[j] = s
			mx = max(mx, s)
		}
		inv := 1 / expSub(scores[first:p+1], mx)
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		clear(oh)
		for j := first; j <= p; j++ {
			kernel.AxpyF16(oh, scores[j]*inv, a.Vh[j*Cc+off:j*Cc+off+E])
		}
	}
}

// expSub sets x[i] = exp(x[i] - m) and returns their sum.
func expSub(x []float32, m float32) float32 { return kernel.ExpSub(x, m) }
