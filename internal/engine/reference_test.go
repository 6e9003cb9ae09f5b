package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/tensor"
)

// attention is the reference of the session's attention: it writes the T
// rows of k and v into the row-major cache at pos.., then for row t and
// head h: out[t][h] = sum_j softmax_j(s_j) V[j][g], g = h/(H/G),
// s_j = scale*q[t][h]·K[j][g] for j <= pos+t (within the window). The
// cache is float32, binary16 or uint8 (see kvcache.go); values are encoded
// on write and decoded where they are read, so the result equals attention
// over a float32 cache holding the decoded values.
func attention(a *attnArgs) {
	switch {
	case a.Ku != nil:
		attend(a, a.Ku, a.Vu, u8Codec{a.ks}, u8Codec{a.vs})
	case a.Kh != nil:
		attend(a, a.Kh, a.Vh, f16Codec{}, f16Codec{})
	default:
		attend(a, a.K, a.V, f32Codec{}, f32Codec{})
	}
}

// attend is attention over a row-major cache of element type T.
func attend[T any, C kvCodec[T]](a *attnArgs, K, V []T, kc, vc C) {
	storeKV(a, K, V, kc, vc)
	attendRows(a, K, V, kc, vc, 0, a.T*a.H, make([]float32, a.pos+a.T))
}

// dequantizeKV reads a stored byte: float32(int(u)-128) * s.
func dequantizeKV(u uint8, s float32) float32 { return float32(int32(u)-kvZero) * s }

// A kvCodec stores cache values as T and reads them back. scale(g) is the
// codec's parameter for key/value head g, looked up once per head and
// passed to enc and dec, which run per element on the attention hot path.
type kvCodec[T any] interface {
	scale(g int) float32
	enc(x, s float32) T
	dec(u T, s float32) float32
}

// f32Codec is the identity: a float32 cache.
type f32Codec struct{}

func (f32Codec) scale(int) float32                { return 1 }
func (f32Codec) enc(x, _ float32) float32         { return x }
func (f32Codec) dec(u float32, _ float32) float32 { return u }

// f16Codec rounds to IEEE binary16 (nearest even).
type f16Codec struct{}

func (f16Codec) scale(int) float32               { return 1 }
func (f16Codec) enc(x, _ float32) uint16         { return tensor.F32ToF16(x) }
func (f16Codec) dec(u uint16, _ float32) float32 { return tensor.F16ToF32(u) }

// u8Codec is the symmetric uint8 rule with one scale per layer or per head.
type u8Codec struct{ s []float32 }

func (c u8Codec) scale(g int) float32          { return headScale(c.s, g) }
func (u8Codec) enc(x, s float32) uint8         { return quantizeKV(x, s) }
func (u8Codec) dec(u uint8, s float32) float32 { return dequantizeKV(u, s) }

// storeKV encodes the T rows of k and v into K, V at pos...
func storeKV[T any, C kvCodec[T]](a *attnArgs, K, V []T, kc, vc C) {
	E, G, Cc := a.E, a.G, a.C
	kvc := G * E
	for t := 0; t < a.T; t++ {
		p := a.pos + t
		for g := 0; g < G; g++ {
			sk, sv := kc.scale(g), vc.scale(g)
			for e := 0; e < E; e++ {
				i := g*E + e
				K[p*Cc+i] = kc.enc(a.k[t*kvc+i], sk)
				V[p*Cc+i] = vc.enc(a.v[t*kvc+i], sv)
			}
		}
	}
}

// attendRows computes the outputs of items [lo, hi) of the T*H (row,
// head) pairs, item i being row i/H and head i%H, with scores as scratch
// (at least pos+T floats). Cache positions after a row's own are masked:
// their weight is exactly 0, so they are skipped.
func attendRows[T any, C kvCodec[T]](a *attnArgs, K, V []T, kc, vc C, lo, hi int, scores []float32) {
	E, G, H, Cc := a.E, a.G, a.H, a.C
	group := H / G
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		p := a.pos + t
		first := a.first(t)
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		g := h / group
		sk, sv := kc.scale(g), vc.scale(g)
		mx := float32(-math.MaxFloat32)
		for j := first; j <= p; j++ {
			kj := K[j*Cc+g*E : j*Cc+(g+1)*E]
			var s float32
			for e, qv := range qh {
				s += qv * kc.dec(kj[e], sk)
			}
			s *= a.scale
			scores[j] = s
			mx = max(mx, s)
		}
		var sum float32
		for j := first; j <= p; j++ {
			e := float32(math.Exp(float64(scores[j] - mx)))
			scores[j] = e
			sum += e
		}
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		clear(oh)
		for j := first; j <= p; j++ {
			w := scores[j] / sum
			vj := V[j*Cc+g*E : j*Cc+(g+1)*E]
			for e := range oh {
				oh[e] += w * vc.dec(vj[e], sv)
			}
		}
	}
}
