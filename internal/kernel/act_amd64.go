//go:build !purego

package kernel

import (
	"math"
	"unsafe"
)

// The Go sides of the generated elementwise kernels: the assembly covers
// whole vectors, the generic versions the last elements. The callers
// (Overlay fields, through the exported functions) pass inputs of
// len(dst) elements.

func unaryWith(kern func(dst, x *float32, n int), lanes int, generic func(dst, x []float32), dst, x []float32) {
	x = x[:len(dst)]
	m := len(dst) &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(x), m)
	}
	if m < len(dst) {
		generic(dst[m:], x[m:])
	}
}

func binaryWith(kern func(dst, a, b *float32, n int), lanes int, generic func(dst, a, b []float32), dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	m := len(dst) &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), m)
	}
	if m < len(dst) {
		generic(dst[m:], a[m:], b[m:])
	}
}

func scaleWith(kern func(dst, x *float32, s float32, n int), lanes int, dst, x []float32, s float32) {
	x = x[:len(dst)]
	m := len(dst) &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(x), s, m)
	}
	scaleGeneric(dst[m:], x[m:], s)
}

// expSubWith runs kern on the whole vectors of x and on its last ones
// padded to a vector (with m, whose exponential is 1, left out of the
// sum: a padding whose exponential is subnormal or 0 would cost Intel
// cores a microcode assist), so every element takes the same
// exponential.
func expSubWith(zmm bool, x []float32, m float32) float32 {
	// The kernels are called directly (not through a func value), so
	// that buf stays on the stack.
	kern, lanes := expSubAvx2, 8
	if zmm {
		kern, lanes = expSubVnni, 16
	}
	k := len(x) &^ (lanes - 1)
	var s float32
	if k > 0 {
		s = kern(unsafe.SliceData(x), m, k)
	}
	if t := len(x) - k; t > 0 {
		var buf [16]float32
		copy(buf[:t], x[k:])
		for i := t; i < lanes; i++ {
			buf[i] = m
		}
		if zmm {
			expSubVnni(&buf[0], m, lanes)
		} else {
			expSubAvx2(&buf[0], m, lanes)
		}
		for i, e := range buf[:t] {
			x[k+i] = e
			s += e
		}
	}
	return s
}

// maxWith runs kern on the whole vectors of x and the loop on the rest.
func maxWith(kern func(x *float32, n int, floor float32) float32, lanes int, x []float32) float32 {
	k := len(x) &^ (lanes - 1)
	m := float32(-math.MaxFloat32)
	if k > 0 {
		m = kern(unsafe.SliceData(x), k, m)
	}
	for _, v := range x[k:] {
		m = max(m, v)
	}
	return m
}

// actOverlay sets the elementwise fields of o to the kernels of one ISA.
func actOverlay(o *Overlay, zmm bool) {
	lanes := 8
	silu, siluMul, gelu, mx := siluAvx2, siluMulAvx2, geluTanhAvx2, maxAvx2
	scale, mul, add, bfly, rot := scaleAvx2, mulAvx2, addAvx2, butterflyAvx2, rotateAvx2
	if zmm {
		lanes = 16
		silu, siluMul, gelu, mx = siluVnni, siluMulVnni, geluTanhVnni, maxVnni
		scale, mul, add, bfly, rot = scaleVnni, mulVnni, addVnni, butterflyVnni, rotateVnni
	}
	o.SiLU = func(dst, x []float32) { unaryWith(silu, lanes, siluGeneric, dst, x) }
	o.SiLUMul = func(dst, gate, up []float32) { binaryWith(siluMul, lanes, siluMulGeneric, dst, gate, up) }
	o.ExpSub = func(x []float32, m float32) float32 { return expSubWith(zmm, x, m) }
	o.Max = func(x []float32) float32 { return maxWith(mx, lanes, x) }
	o.GELUTanh = func(dst, x []float32) { unaryWith(gelu, lanes, geluTanhGeneric, dst, x) }
	o.Scale = func(dst, x []float32, s float32) { scaleWith(scale, lanes, dst, x, s) }
	o.Mul = func(dst, a, b []float32) { binaryWith(mul, lanes, mulGeneric, dst, a, b) }
	o.Add = func(dst, a, b []float32) { binaryWith(add, lanes, addGeneric, dst, a, b) }
	o.Rotate = func(a, b, cos, sin []float32) {
		m := len(a) &^ (lanes - 1)
		if m > 0 {
			rot(unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(cos), unsafe.SliceData(sin), m)
		}
		if m < len(a) {
			rotateGeneric(a[m:], b[m:], cos[m:], sin[m:])
		}
	}
	decay, decayNT := decayRowsAvx2, decayRowsNTAvx2
	if zmm {
		decay, decayNT = decayRowsVnni, decayRowsNTVnni
	}
	o.DecayRows = func(dst, x, acc, m, k, q []float32, s float32, next []float32) {
		kern := decay
		d := unsafe.SliceData(dst)
		if d != unsafe.SliceData(x) && uintptr(unsafe.Pointer(d))%64 == 0 && len(m)%16 == 0 {
			// whole aligned lines of another state than x (which the
			// first pass brought near): stored past the caches
			kern = decayNT
		}
		decayRowsWith(kern, lanes, dst, x, acc, m, k, q, s, next)
	}
	o.Butterfly = func(a, b []float32) {
		b = b[:len(a)]
		m := len(a) &^ (lanes - 1)
		if m > 0 {
			bfly(unsafe.SliceData(a), unsafe.SliceData(b), m)
		}
		if m < len(a) {
			butterflyGeneric(a[m:], b[m:])
		}
	}
}

// decayRowsWith runs kern on the columns of whole vectors and
// decayRowsCols on the rest; DecayRows has checked the lengths (next
// holds as many rows as x).
func decayRowsWith(kern func(dst, x, o, m, k, q *float32, decay float32, n, rows, stride int, ahead *float32), lanes int, dst, x, o, m, k, q []float32, decay float32, next []float32) {
	n := len(m)
	c := n &^ (lanes - 1)
	if c > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(o), unsafe.SliceData(m), unsafe.SliceData(k), unsafe.SliceData(q), decay, c, len(k), n, unsafe.SliceData(next))
	}
	if c < n {
		decayRowsCols(dst, x, o, m, k, q, decay, c, n)
	}
}
