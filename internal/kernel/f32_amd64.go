//go:build !purego

package kernel

import (
	"unsafe"

	"github.com/aotlm/aotlm/internal/tensor"
)

// The Go sides of the generated float32 kernels: the assembly covers
// whole vectors, the loops here the last elements.

func quantizeQ8Avx2Go(q []int8, d []float32, sum []int32, x []float32) {
	if len(d) == 0 || len(q) < len(d)*QK || len(sum) < len(d) || len(x) < len(d)*QK {
		quantizeQ8Generic(q, d, sum, x)
		return
	}
	quantizeQ8Avx2(unsafe.SliceData(q), unsafe.SliceData(d), unsafe.SliceData(sum), unsafe.SliceData(x), len(d))
}

func quantizeQ8VnniGo(q []int8, d []float32, sum []int32, x []float32) {
	if len(d) == 0 || len(q) < len(d)*QK || len(sum) < len(d) || len(x) < len(d)*QK {
		quantizeQ8Generic(q, d, sum, x)
		return
	}
	quantizeQ8Vnni(unsafe.SliceData(q), unsafe.SliceData(d), unsafe.SliceData(sum), unsafe.SliceData(x), len(d))
}

// dotWith returns Σ a[i]*b[i] with kern on the first n - n%lanes
// elements.
func dotWith(kern func(a, b *float32, n int) float32, lanes int, a, b []float32) float32 {
	b = b[:len(a)]
	m := len(a) &^ (lanes - 1)
	var s float32
	if m > 0 {
		s = kern(unsafe.SliceData(a), unsafe.SliceData(b), m)
	}
	for i := m; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

func axpyWith(kern func(y *float32, alpha float32, x *float32, n int), lanes int, y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	m := len(y) &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(y), alpha, unsafe.SliceData(x), m)
	}
	for i := m; i < len(y); i++ {
		y[i] += alpha * x[i]
	}
}

func dotF16With(kern func(a *float32, b *uint16, n int) float32, lanes int, a []float32, b []uint16) float32 {
	b = b[:len(a)]
	m := len(a) &^ (lanes - 1)
	var s float32
	if m > 0 {
		s = kern(unsafe.SliceData(a), unsafe.SliceData(b), m)
	}
	for i := m; i < len(a); i++ {
		s += a[i] * tensor.F16ToF32(b[i])
	}
	return s
}

func axpyF16With(kern func(y *float32, alpha float32, x *uint16, n int), lanes int, y []float32, alpha float32, x []uint16) {
	x = x[:len(y)]
	m := len(y) &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(y), alpha, unsafe.SliceData(x), m)
	}
	for i := m; i < len(y); i++ {
		y[i] += alpha * tensor.F16ToF32(x[i])
	}
}
