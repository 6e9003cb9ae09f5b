package engine

import "math"

// kvZero is the stored byte of the value 0 in a uint8 cache.
const kvZero = 128

// quantizeKV stores x with scale s: clamp(round_half_even(x/s), -127, 127)
// + 128; NaN and a zero scale store 128.
func quantizeKV(x, s float32) uint8 {
	if s == 0 {
		return kvZero
	}
	r := math.RoundToEven(float64(x / s))
	switch {
	case r != r:
		r = 0
	case r < -127:
		r = -127
	case r > 127:
		r = 127
	}
	return uint8(int(r) + kvZero)
}

// dequantizeKV reads a stored byte: float32(int(u)-128) * s.
func dequantizeKV(u uint8, s float32) float32 { return float32(int32(u)-kvZero) * s }

// headScale returns the scale of head g from one per layer or one per head.
func headScale(sc []float32, g int) float32 {
	if len(sc) == 1 {
		return sc[0]
	}
	return sc[g]
}

// attentionU8 is attention over a uint8 cache: the T rows of k and v are
// quantized into Ku, Vu at pos.. (head g with scale ks[g], vs[g]), and
// every cached value is dequantized where it is read, so the result equals
// attention over a float32 cache holding the dequantized values.
func attentionU8(a *attnArgs) {
	E, G, H, C := a.E, a.G, a.H, a.C
	kvc := G * E
	for t := 0; t < a.T; t++ {
		p := a.pos + t
		for g := 0; g < G; g++ {
			sk, sv := headScale(a.ks, g), headScale(a.vs, g)
			for e := 0; e < E; e++ {
				i := g*E + e
				a.Ku[p*C+i] = quantizeKV(a.k[t*kvc+i], sk)
				a.Vu[p*C+i] = quantizeKV(a.v[t*kvc+i], sv)
			}
		}
	}
	group := H / G
	end := a.pos + a.T
	for t := 0; t < a.T; t++ {
		p := a.pos + t
		first := 0
		if a.window > 0 && p-a.window+1 > 0 {
			first = p - a.window + 1
		}
		for h := 0; h < H; h++ {
			qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
			g := h / group
			sk, sv := headScale(a.ks, g), headScale(a.vs, g)
			mx := float32(-math.MaxFloat32)
			for j := first; j < end; j++ {
				if j > p {
					a.scores[j] = MaskValue
					continue
				}
				kj := a.Ku[j*C+g*E : j*C+(g+1)*E]
				var s float32
				for e, qv := range qh {
					s += qv * float32(dequantizeKV(kj[e], sk))
				}
				s *= a.scale
				a.scores[j] = s
				if s > mx {
					mx = s
				}
			}
			var sum float32
			for j := first; j < end; j++ {
				e := float32(math.Exp(float64(a.scores[j] - mx)))
				a.scores[j] = e
				sum += e
			}
			oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
			clear(oh)
			for j := first; j < end; j++ {
				w := a.scores[j] / sum
				vj := a.Vu[j*C+g*E : j*C+(g+1)*E]
				for e := range oh {
					oh[e] += w * float32(dequantizeKV(vj[e], sv))
				}
			}
		}
	}
}
