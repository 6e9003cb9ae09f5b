package kernel

import "math"

// The elementwise kernels of activations and softmax. Each works on n =
// len(dst) elements (the inputs at least as long); dst may be one of the
// inputs. The generic versions compute exp and tanh in float64; the
// overlays use a float32 polynomial exp within a few ulps of it.

// Rotate rotates the pairs (a[i], b[i]), i < len(a), by the angles
// whose cosines and sines are cos[i] and sin[i], in place (RoPE's
// rotation of a head's two halves):
//
//	a[i], b[i] = a[i]*cos[i] - b[i]*sin[i], a[i]*sin[i] + b[i]*cos[i]
//
// each product rounded to float32 before the sum, so every overlay gives
// the same bits.
func Rotate(a, b, cos, sin []float32) {
	n := len(a)
	rotateImpl(a, b[:n], cos[:n], sin[:n])
}

func rotateGeneric(a, b, cos, sin []float32) {
	b, cos, sin = b[:len(a)], cos[:len(a)], sin[:len(a)]
	for i, x := range a {
		y, c, s := b[i], cos[i], sin[i]
		// The conversions round each product (no fused multiply-add).
		a[i] = float32(x*c) - float32(y*s)
		b[i] = float32(x*s) + float32(y*c)
	}
}

// SiLU sets, for i < len(dst),
//
//	dst[i] = x[i] / (1 + float32(exp(-x[i])))
//
// (x*sigmoid(x); -0 where exp(-x) overflows float32).
func SiLU(dst, x []float32) { siluImpl(dst, x[:len(dst)]) }

func siluGeneric(dst, x []float32) {
	for i, v := range x {
		dst[i] = silu(v)
	}
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

// SiLUMul sets, for i < len(dst), the gated unit of SwiGLU:
//
//	dst[i] = silu(gate[i]) * up[i]
func SiLUMul(dst, gate, up []float32) { siluMulImpl(dst, gate[:len(dst)], up[:len(dst)]) }

func siluMulGeneric(dst, gate, up []float32) {
	for i, v := range gate {
		dst[i] = silu(v) * up[i]
	}
}

// ExpSub sets x[i] = float32(exp(x[i] - m)) in place and returns the
// float32 sum of the results (softmax's middle step, m the row maximum):
//
//	for i := range x { x[i] = exp(x[i] - m); s += x[i] }
//
// Very negative differences (-1e30, -Inf) give exactly 0 and NaN stays
// NaN; the overlays sum in several lanes, so the order differs. The
// amd64 overlays give 0 for differences below -87 too, where the exact
// result (under 1.7e-38) would be subnormal: an Intel core finishes such
// a product by a microcode assist, slower than the exponential itself.
func ExpSub(x []float32, m float32) float32 { return expSubImpl(x, m) }

func expSubGeneric(x []float32, m float32) float32 {
	var s float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		s += e
	}
	return s
}

// GELUTanh sets, for i < len(dst), the tanh approximation of GELU:
//
//	dst[i] = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), x = x[i]
//
// evaluated in float64.
func GELUTanh(dst, x []float32) { geluTanhImpl(dst, x[:len(dst)]) }

func geluTanhGeneric(dst, x []float32) {
	for i, v := range x {
		f := float64(v)
		dst[i] = float32(0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f))))
	}
}

// Scale sets dst[i] = x[i] * s for i < len(dst).
func Scale(dst, x []float32, s float32) { scaleImpl(dst, x[:len(dst)], s) }

// Max returns the largest element of x (-math.MaxFloat32 when x is
// empty): attention's softmax takes it from the scores.
func Max(x []float32) float32 { return maxImpl(x) }

func maxGeneric(x []float32) float32 {
	// Four independent running maxima, so the comparisons do not wait
	// on each other.
	m0, m1, m2, m3 := float32(-math.MaxFloat32), float32(-math.MaxFloat32), float32(-math.MaxFloat32), float32(-math.MaxFloat32)
	i := 0
	for ; i+4 <= len(x); i += 4 {
		m0, m1, m2, m3 = max(m0, x[i]), max(m1, x[i+1]), max(m2, x[i+2]), max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(m0, m1, m2, m3)
}

func scaleGeneric(dst, x []float32, s float32) {
	for i, v := range x {
		dst[i] = v * s
	}
}

// Mul sets dst[i] = a[i] * b[i] for i < len(dst).
func Mul(dst, a, b []float32) { mulImpl(dst, a[:len(dst)], b[:len(dst)]) }

func mulGeneric(dst, a, b []float32) {
	for i, v := range a {
		dst[i] = v * b[i]
	}
}

// Add sets dst[i] = a[i] + b[i] for i < len(dst).
func Add(dst, a, b []float32) { addImpl(dst, a[:len(dst)], b[:len(dst)]) }

func addGeneric(dst, a, b []float32) {
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

// Argmax returns the index of the first largest element of x (0 when x is
// empty), as the plain scan argmaxGeneric does: the block of
// argmaxBlock elements with the largest Max (the first such block), then
// the first element in it equal to that maximum. Where x holds a NaN (then
// Dot(x, x) is NaN, and the vector maxima do not order it as the scan
// does) or no element equals the maximum (every element -Inf), the plain
// scan decides. Greedy decoding takes it over a vocabulary of logits every
// token.
func Argmax(x []float32) int {
	if len(x) == 0 {
		return 0
	}
	if d := Dot(x, x); d != d {
		return argmaxGeneric(x)
	}
	best, at := float32(math.Inf(-1)), 0
	for lo := 0; lo < len(x); lo += argmaxBlock {
		if m := Max(x[lo:min(lo+argmaxBlock, len(x))]); m > best {
			best, at = m, lo
		}
	}
	for i, v := range x[at:min(at+argmaxBlock, len(x))] {
		if v == best {
			return at + i
		}
	}
	return argmaxGeneric(x)
}

// argmaxBlock is the span of Argmax's blocks.
const argmaxBlock = 2048

// argmaxGeneric returns the index of the first element that no later
// element exceeds, comparing each with the best so far (0 when x is
// empty).
func argmaxGeneric(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
