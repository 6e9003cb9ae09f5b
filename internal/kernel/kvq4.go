package kernel

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/tensor"
)

// The 4-bit KV cache row: one key or value head of one position, E values
// (E a power of two) rotated by the orthonormal Walsh-Hadamard transform
// (RotateHead) and cut into groups of KVQ4Group(E) values. Each group is
// stored as 4-bit codes c with a binary16 step d and offset m, the value
// read back being d*c + m: the group's codes first for all groups (byte i
// of a group's gs/2 holds element i in its low nibble and element
// i+gs/2 in its high one), then each group's d and m, little-endian. The
// rotation spreads an outlier over the whole head, so a group's range is
// set by the head's typical values, not by its largest one.

// kvq4MaxGroup is the most values a group of a 4-bit row holds.
const kvq4MaxGroup = 32

// KVQ4Group returns the values per group of a 4-bit row of E values: 32,
// or E when E is smaller.
func KVQ4Group(E int) int { return min(E, kvq4MaxGroup) }

// KVQ4RowBytes returns the bytes of a 4-bit row of E values: E/2 of codes
// and 4 (a binary16 step and offset) per group.
func KVQ4RowBytes(E int) int { return E/2 + 4*(E/KVQ4Group(E)) }

// CheckKVQ4 reports whether rows of E values can be stored 4-bit: E must
// be a power of two of at least 2 (the Walsh-Hadamard transform's order).
func CheckKVQ4(E int) error {
	if E < 2 || E&(E-1) != 0 {
		return fmt.Errorf("kernel: a 4-bit KV row needs a power-of-two head dimension of at least 2, not %d", E)
	}
	return nil
}

// RotateHead applies the orthonormal Walsh-Hadamard transform H/sqrt(n) to
// x in place (n = len(x), a power of two). The transform is symmetric and
// its own inverse, so rotating a query and a key keeps their dot product,
// and rotating a sum of rotated values brings it back.
func RotateHead(x []float32) {
	fwhtWith(x, butterflyImpl)
	Scale(x, x, float32(1/math.Sqrt(float64(len(x)))))
}

// QuantizeKVQ4 stores the E = len(y) rotated values y as a 4-bit row in
// dst[:KVQ4RowBytes(E)]: per group, the binary16 step d and offset m of
// kvq4Fit, and c = clamp(round((y-m)/d), 0, 15) with those rounded d and
// m (0 when d is 0 or y is NaN).
func QuantizeKVQ4(dst []uint8, y []float32) {
	E := len(y)
	gs := KVQ4Group(E)
	dst = dst[:KVQ4RowBytes(E)]
	codes, meta := dst[:E/2], dst[E/2:]
	for g := 0; g < E/gs; g++ {
		grp := y[g*gs : (g+1)*gs]
		dh, mh := kvq4Fit(grp)
		meta[4*g], meta[4*g+1] = uint8(dh), uint8(dh>>8)
		meta[4*g+2], meta[4*g+3] = uint8(mh), uint8(mh>>8)
		d, m := tensor.F16ToF32(dh), tensor.F16ToF32(mh)
		inv := kvq4Inv(d)
		cg := codes[g*gs/2 : (g+1)*gs/2]
		half := gs / 2
		for i := range cg {
			cg[i] = kvq4Code((grp[i]-m)*inv) | kvq4Code((grp[i+half]-m)*inv)<<4
		}
	}
}

// kvq4Inv returns 1/d, or 0 when d is 0 or not finite.
func kvq4Inv(d float32) float32 {
	if d == 0 || d-d != 0 {
		return 0
	}
	return 1 / d
}

// kvq4Shrinks are the fractions of a group's range kvq4Fit starts from,
// narrowed about its middle: a narrower grid clips the extreme values and
// places the others more finely.
var kvq4Shrinks = [...]float32{1, 0.9, 0.8, 0.7}

// kvq4Fits is the number of least-squares refits from each start.
const kvq4Fits = 2

// kvq4Fit returns the binary16 step and offset of a group of values: from
// the group's range [min, max] and narrower ones (kvq4Shrinks), the codes
// are set and the step and offset refit by least squares (kvq4Fits
// times), and the pair with the smallest squared error of the rounded
// values is kept. An all-NaN group gets 0, 0.
func kvq4Fit(grp []float32) (dh, mh uint16) {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range grp {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo > hi { // all NaN
		return 0, 0
	}
	dh, mh = tensor.F32ToF16((hi-lo)/15), tensor.F32ToF16(lo)
	best := kvq4Err(grp, dh, mh)
	mid := lo/2 + hi/2
	for _, f := range kvq4Shrinks {
		d, m := f*(hi-lo)/15, mid-f*(hi/2-lo/2)
		for it := 0; it <= kvq4Fits; it++ {
			ch, cm := tensor.F32ToF16(d), tensor.F32ToF16(m)
			if e := kvq4Err(grp, ch, cm); e < best {
				best, dh, mh = e, ch, cm
			}
			if it == kvq4Fits {
				break
			}
			var ok bool
			if d, m, ok = kvq4Refit(grp, tensor.F16ToF32(ch), tensor.F16ToF32(cm)); !ok {
				break
			}
		}
	}
	return dh, mh
}

// kvq4Refit sets each value's code with step d and offset m, then returns
// the step and offset of the least-squares line through (code, value);
// ok is false when the codes are all equal or the step is not positive.
func kvq4Refit(grp []float32, d, m float32) (d2, m2 float32, ok bool) {
	inv := kvq4Inv(d)
	var n, sc, scc, sy, scy float64
	for _, v := range grp {
		c := float64(kvq4Code((v - m) * inv))
		n++
		sc += c
		scc += c * c
		sy += float64(v)
		scy += c * float64(v)
	}
	det := n*scc - sc*sc
	if det <= 0 {
		return 0, 0, false
	}
	dd := (n*scy - sc*sy) / det
	if !(dd > 0) {
		return 0, 0, false
	}
	return float32(dd), float32((sy - dd*sc) / n), true
}

// kvq4Err returns the squared error of a group stored with the binary16
// step dh and offset mh.
func kvq4Err(grp []float32, dh, mh uint16) float64 {
	d, m := tensor.F16ToF32(dh), tensor.F16ToF32(mh)
	inv := kvq4Inv(d)
	var e float64
	for _, v := range grp {
		r := float64(d*float32(kvq4Code((v-m)*inv)) + m - v)
		e += r * r
	}
	return e
}

// kvq4Code rounds x to nearest even and clamps it to [0, 15]; NaN is 0.
func kvq4Code(x float32) uint8 {
	r := math.RoundToEven(float64(x))
	switch {
	case !(r >= 0):
		return 0
	case r > 15:
		return 15
	}
	return uint8(r)
}

// kvq4Meta returns group g's step and offset from a row's meta bytes.
func kvq4Meta(meta []uint8, g int) (d, m float32) {
	return tensor.F16ToF32(uint16(meta[4*g]) | uint16(meta[4*g+1])<<8),
		tensor.F16ToF32(uint16(meta[4*g+2]) | uint16(meta[4*g+3])<<8)
}

// DequantizeKVQ4 sets dst (E values) to the rotated values the 4-bit row
// src stands for: d*c + m per element.
func DequantizeKVQ4(dst []float32, src []uint8) {
	E := len(dst)
	gs, half := KVQ4Group(E), KVQ4Group(E)/2
	codes, meta := src[:E/2], src[E/2:KVQ4RowBytes(E)]
	for g := 0; g < E/gs; g++ {
		d, m := kvq4Meta(meta, g)
		cg, out := codes[g*half:(g+1)*half], dst[g*gs:(g+1)*gs]
		for i, b := range cg {
			out[i] = d*float32(b&15) + m
			out[i+half] = d*float32(b>>4) + m
		}
	}
}

// DotKVQ4 returns the dot product of the E = len(q) rotated query values
// q with the values of the 4-bit row src: per group d*Σ c*q + m*Σ q.
func DotKVQ4(q []float32, src []uint8) float32 {
	return dotKVQ4Impl(q, src[:KVQ4RowBytes(len(q))])
}

// dotKVQ4Generic is DotKVQ4 in Go.
func dotKVQ4Generic(q []float32, src []uint8) float32 {
	E := len(q)
	gs, half := KVQ4Group(E), KVQ4Group(E)/2
	codes, meta := src[:E/2], src[E/2:KVQ4RowBytes(E)]
	var s float32
	for g := 0; g < E/gs; g++ {
		d, m := kvq4Meta(meta, g)
		qg, cg := q[g*gs:(g+1)*gs], codes[g*half:(g+1)*half]
		var sc, sq float32
		for i, b := range cg {
			a, c := qg[i], qg[i+half]
			sc += a*float32(b&15) + c*float32(b>>4)
			sq += a + c
		}
		s += d*sc + m*sq
	}
	return s
}

// AxpyKVQ4 adds alpha times the values of the 4-bit row src to the E =
// len(y) values of y.
func AxpyKVQ4(y []float32, alpha float32, src []uint8) {
	axpyKVQ4Impl(y, alpha, src[:KVQ4RowBytes(len(y))])
}

// axpyKVQ4Generic is AxpyKVQ4 in Go.
func axpyKVQ4Generic(y []float32, alpha float32, src []uint8) {
	E := len(y)
	gs, half := KVQ4Group(E), KVQ4Group(E)/2
	codes, meta := src[:E/2], src[E/2:KVQ4RowBytes(E)]
	for g := 0; g < E/gs; g++ {
		d, m := kvq4Meta(meta, g)
		ad, am := alpha*d, alpha*m
		yg, cg := y[g*gs:(g+1)*gs], codes[g*half:(g+1)*half]
		for i, b := range cg {
			yg[i] += ad*float32(b&15) + am
			yg[i+half] += ad*float32(b>>4) + am
		}
	}
}
