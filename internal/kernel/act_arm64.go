//go:build !purego

package kernel

import "unsafe"

// The elementwise kernels of act_arm64.s cover the first n&^3 elements;
// the wrappers run the generic versions on the rest. The callers
// (Overlay fields, through the exported functions) pass inputs of
// len(dst) elements.

//go:noescape
func siluNEON(dst, x *float32, n int)

//go:noescape
func siluMulNEON(dst, gate, up *float32, n int)

//go:noescape
func expSubNEON(x *float32, m float32, n int) float32

//go:noescape
func geluTanhNEON(dst, x *float32, n int)

//go:noescape
func scaleNEON(dst, x *float32, s float32, n int)

//go:noescape
func mulNEON(dst, a, b *float32, n int)

//go:noescape
func addNEON(dst, a, b *float32, n int)

func neonUnary(kern func(dst, x *float32, n int), generic func(dst, x []float32), dst, x []float32) {
	x = x[:len(dst)]
	m := len(dst) &^ 3
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(x), m)
	}
	if m < len(dst) {
		generic(dst[m:], x[m:])
	}
}

func neonBinary(kern func(dst, a, b *float32, n int), generic func(dst, a, b []float32), dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	m := len(dst) &^ 3
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), m)
	}
	if m < len(dst) {
		generic(dst[m:], a[m:], b[m:])
	}
}

func siluArm64(dst, x []float32) { neonUnary(siluNEON, siluGeneric, dst, x) }

func geluTanhArm64(dst, x []float32) { neonUnary(geluTanhNEON, geluTanhGeneric, dst, x) }

func siluMulArm64(dst, gate, up []float32) {
	neonBinary(siluMulNEON, siluMulGeneric, dst, gate, up)
}

func mulArm64(dst, a, b []float32) { neonBinary(mulNEON, mulGeneric, dst, a, b) }

func addArm64(dst, a, b []float32) { neonBinary(addNEON, addGeneric, dst, a, b) }

func scaleArm64(dst, x []float32, s float32) {
	x = x[:len(dst)]
	m := len(dst) &^ 3
	if m > 0 {
		scaleNEON(unsafe.SliceData(dst), unsafe.SliceData(x), s, m)
	}
	scaleGeneric(dst[m:], x[m:], s)
}

func expSubArm64(x []float32, m float32) float32 {
	k := len(x) &^ 3
	var s float32
	if k > 0 {
		s = expSubNEON(unsafe.SliceData(x), m, k)
	}
	return s + expSubGeneric(x[k:], m)
}
