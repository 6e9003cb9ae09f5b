//go:build !purego

package kernel

import "unsafe"

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

func expSubWith(kern func(x *float32, m float32, n int) float32, lanes int, x []float32, m float32) float32 {
	k := len(x) &^ (lanes - 1)
	var s float32
	if k > 0 {
		s = kern(unsafe.SliceData(x), m, k)
	}
	return s + expSubGeneric(x[k:], m)
}

// actOverlay sets the elementwise fields of o to the kernels of one ISA.
func actOverlay(o *Overlay, zmm bool) {
	lanes := 8
	silu, siluMul, expSub, gelu := siluAvx2, siluMulAvx2, expSubAvx2, geluTanhAvx2
	scale, mul, add, bfly := scaleAvx2, mulAvx2, addAvx2, butterflyAvx2
	if zmm {
		lanes = 16
		silu, siluMul, expSub, gelu = siluVnni, siluMulVnni, expSubVnni, geluTanhVnni
		scale, mul, add, bfly = scaleVnni, mulVnni, addVnni, butterflyVnni
	}
	o.SiLU = func(dst, x []float32) { unaryWith(silu, lanes, siluGeneric, dst, x) }
	o.SiLUMul = func(dst, gate, up []float32) { binaryWith(siluMul, lanes, siluMulGeneric, dst, gate, up) }
	o.ExpSub = func(x []float32, m float32) float32 { return expSubWith(expSub, lanes, x, m) }
	o.GELUTanh = func(dst, x []float32) { unaryWith(gelu, lanes, geluTanhGeneric, dst, x) }
	o.Scale = func(dst, x []float32, s float32) { scaleWith(scale, lanes, dst, x, s) }
	o.Mul = func(dst, a, b []float32) { binaryWith(mul, lanes, mulGeneric, dst, a, b) }
	o.Add = func(dst, a, b []float32) { binaryWith(add, lanes, addGeneric, dst, a, b) }
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
