//go:build !purego

package kernel

import (
	"unsafe"

	"github.com/aotlm/aotlm/internal/tensor"
)

// The Go sides of the generated row kernels. Each checks the span of the
// strided operand against its length (an out-of-range call panics here,
// never reads past the slice in assembly); the AVX2 kernels cover
// n - n%8 columns and the loops here the rest, the AVX-512 ones all of n.

// rowsKern is the signature of the generated row kernels on float32.
type rowsKern func(dst, v *float32, m *float32, n, rows, stride int)

// rowsKernF16 is the signature of the generated row kernels on binary16.
type rowsKernF16 func(dst, v *float32, m *uint16, n, rows, stride int)

func axpyRowsWith(kern rowsKern, lanes int, dst, alpha, x []float32, stride int) {
	s := rowsSpan("AxpyRows", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	x = x[:s]
	n := len(dst)
	m := n &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(alpha), unsafe.SliceData(x), m, len(alpha), stride)
	}
	for j := m; j < n; j++ {
		d := dst[j]
		for r, a := range alpha {
			d += a * x[r*stride+j]
		}
		dst[j] = d
	}
}

func dotRowsWith(kern rowsKern, lanes int, dst, w, y []float32, stride int) {
	s := rowsSpan("DotRows", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	y = y[:s]
	n := len(w)
	m := n &^ (lanes - 1)
	kern(unsafe.SliceData(dst), unsafe.SliceData(w), unsafe.SliceData(y), m, len(dst), stride)
	if m == n {
		return
	}
	for r := range dst {
		row := y[r*stride+m : r*stride+n]
		d := dst[r]
		for j, v := range row {
			d += w[m+j] * v
		}
		dst[r] = d
	}
}

func axpyRowsF16With(kern rowsKernF16, lanes int, dst, alpha []float32, x []uint16, stride int) {
	s := rowsSpan("AxpyRowsF16", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	x = x[:s]
	n := len(dst)
	m := n &^ (lanes - 1)
	if m > 0 {
		kern(unsafe.SliceData(dst), unsafe.SliceData(alpha), unsafe.SliceData(x), m, len(alpha), stride)
	}
	for j := m; j < n; j++ {
		d := dst[j]
		for r, a := range alpha {
			d += a * tensor.F16ToF32(x[r*stride+j])
		}
		dst[j] = d
	}
}

func dotRowsF16With(kern rowsKernF16, lanes int, dst, w []float32, y []uint16, stride int) {
	s := rowsSpan("DotRowsF16", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	y = y[:s]
	n := len(w)
	m := n &^ (lanes - 1)
	kern(unsafe.SliceData(dst), unsafe.SliceData(w), unsafe.SliceData(y), m, len(dst), stride)
	if m == n {
		return
	}
	for r := range dst {
		row := y[r*stride+m : r*stride+n]
		d := dst[r]
		for j, v := range row {
			d += w[m+j] * tensor.F16ToF32(v)
		}
		dst[r] = d
	}
}

// rowsOverlay sets the row kernel fields of o to the kernels of one ISA:
// AVX2 with a Go tail, or AVX-512 with masked tails (lanes 1: the
// assembly takes every n).
func rowsOverlay(o *Overlay, zmm bool) {
	if !zmm {
		o.AxpyRows = func(dst, alpha, x []float32, stride int) { axpyRowsWith(axpyRowsAvx2, 8, dst, alpha, x, stride) }
		o.DotRows = func(dst, w, y []float32, stride int) { dotRowsWith(dotRowsAvx2, 8, dst, w, y, stride) }
		o.AxpyRowsF16 = func(dst, alpha []float32, x []uint16, stride int) {
			axpyRowsF16With(axpyRowsF16Avx2, 8, dst, alpha, x, stride)
		}
		o.DotRowsF16 = func(dst, w []float32, y []uint16, stride int) {
			dotRowsF16With(dotRowsF16Avx2, 8, dst, w, y, stride)
		}
		return
	}
	o.AxpyRows = func(dst, alpha, x []float32, stride int) { axpyRowsWith(axpyRowsVnni, 1, dst, alpha, x, stride) }
	o.DotRows = func(dst, w, y []float32, stride int) { dotRowsWith(dotRowsVnni, 1, dst, w, y, stride) }
	o.AxpyRowsF16 = func(dst, alpha []float32, x []uint16, stride int) {
		axpyRowsF16With(axpyRowsF16Vnni, 1, dst, alpha, x, stride)
	}
	o.DotRowsF16 = func(dst, w []float32, y []uint16, stride int) {
		dotRowsF16With(dotRowsF16Vnni, 1, dst, w, y, stride)
	}
}
