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

// rowElem is an element type of the strided operand: float32, binary16
// or a biased byte.
type rowElem interface{ float32 | uint16 | uint8 }

// rowsKern is the signature of the generated row kernels.
type rowsKern[E rowElem] func(dst, v *float32, m *E, n, rows, stride int)

func axpyRowsWith[E rowElem](op string, kern rowsKern[E], lanes int, dec func(E) float32, dst, alpha []float32, x []E, stride int) {
	s := rowsSpan(op, len(alpha), len(dst), stride, len(x))
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
			d += a * dec(x[r*stride+j])
		}
		dst[j] = d
	}
}

func dotRowsWith[E rowElem](op string, kern rowsKern[E], lanes int, dec func(E) float32, dst, w []float32, y []E, stride int) {
	s := rowsSpan(op, len(dst), len(w), stride, len(y))
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
			d += w[m+j] * dec(v)
		}
		dst[r] = d
	}
}

// dotRowsF16WWith is dotRowsWith for dotRowsF16W's kernels, whose w is
// binary16 and whose rows are float32.
func dotRowsF16WWith(kern func(dst *float32, w *uint16, y *float32, n, rows, stride int), lanes int, dst []float32, w []uint16, y []float32, stride int) {
	s := rowsSpan("DotRowsF16W", len(dst), len(w), stride, len(y))
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
			d += tensor.F16ToF32(w[m+j]) * v
		}
		dst[r] = d
	}
}

func identity(v float32) float32 { return v }

// u8Value is the integer a biased byte stands for, as float32.
func u8Value(u uint8) float32 { return float32(int32(u) - U8Bias) }

// rowsOverlay sets the row kernel fields of o to the kernels of one ISA:
// AVX2 with a Go tail, or AVX-512 with masked tails (lanes 1: the
// assembly takes every n).
func rowsOverlay(o *Overlay, zmm bool) {
	if !zmm {
		o.AxpyRows = func(dst, alpha, x []float32, stride int) {
			axpyRowsWith("AxpyRows", axpyRowsAvx2, 8, identity, dst, alpha, x, stride)
		}
		o.DotRows = func(dst, w, y []float32, stride int) {
			dotRowsWith("DotRows", dotRowsAvx2, 8, identity, dst, w, y, stride)
		}
		o.AxpyRowsF16 = func(dst, alpha []float32, x []uint16, stride int) {
			axpyRowsWith("AxpyRowsF16", axpyRowsF16Avx2, 8, tensor.F16ToF32, dst, alpha, x, stride)
		}
		o.DotRowsF16 = func(dst, w []float32, y []uint16, stride int) {
			dotRowsWith("DotRowsF16", dotRowsF16Avx2, 8, tensor.F16ToF32, dst, w, y, stride)
		}
		o.DotRowsF16W = func(dst []float32, w []uint16, y []float32, stride int) {
			dotRowsF16WWith(dotRowsF16WAvx2, 8, dst, w, y, stride)
		}
		o.AxpyRowsU8 = func(dst, alpha []float32, x []uint8, stride int) {
			axpyRowsWith("AxpyRowsU8", axpyRowsU8Avx2, 8, u8Value, dst, alpha, x, stride)
		}
		o.DotRowsU8 = func(dst, w []float32, y []uint8, stride int) {
			dotRowsWith("DotRowsU8", dotRowsU8Avx2, 8, u8Value, dst, w, y, stride)
		}
		return
	}
	o.AxpyRows = func(dst, alpha, x []float32, stride int) {
		axpyRowsWith("AxpyRows", axpyRowsVnni, 1, identity, dst, alpha, x, stride)
	}
	o.DotRows = func(dst, w, y []float32, stride int) {
		dotRowsWith("DotRows", dotRowsVnni, 1, identity, dst, w, y, stride)
	}
	o.AxpyRowsF16 = func(dst, alpha []float32, x []uint16, stride int) {
		axpyRowsWith("AxpyRowsF16", axpyRowsF16Vnni, 1, tensor.F16ToF32, dst, alpha, x, stride)
	}
	o.scoresU8 = scoresVnni
	h, b := wrapRowsM[uint16], wrapRowsM[uint8]
	o.axpyRowsMF16 = [attnMultiMax + 1]rowsMKernel[uint16]{2: h(axpyRows2F16Vnni), 3: h(axpyRows3F16Vnni), 4: h(axpyRows4F16Vnni)}
	o.dotRowsMF16 = [attnMultiMax + 1]rowsMKernel[uint16]{2: h(dotRows2F16Vnni), 3: h(dotRows3F16Vnni), 4: h(dotRows4F16Vnni)}
	o.axpyRowsMU8 = [attnMultiMax + 1]rowsMKernel[uint8]{2: b(axpyRows2U8Vnni), 3: b(axpyRows3U8Vnni), 4: b(axpyRows4U8Vnni)}
	o.dotRowsMU8 = [attnMultiMax + 1]rowsMKernel[uint8]{2: b(dotRows2U8Vnni), 3: b(dotRows3U8Vnni), 4: b(dotRows4U8Vnni)}
	ha, ba := wrapRowsAhead[uint16], wrapRowsAhead[uint8]
	o.dotRowsAF16 = [attnMultiMax + 1]rowsAheadKernel[uint16]{1: ha(dotRows1F16VnniPf), 2: ha(dotRows2F16VnniPf), 3: ha(dotRows3F16VnniPf), 4: ha(dotRows4F16VnniPf)}
	o.dotRowsAU8 = [attnMultiMax + 1]rowsAheadKernel[uint8]{1: ba(dotRows1U8VnniPf), 2: ba(dotRows2U8VnniPf), 3: ba(dotRows3U8VnniPf), 4: ba(dotRows4U8VnniPf)}
	o.axpyRowsAF16 = [attnMultiMax + 1]rowsAheadKernel[uint16]{2: ha(axpyRows2F16VnniPf), 3: ha(axpyRows3F16VnniPf), 4: ha(axpyRows4F16VnniPf)}
	o.axpyRowsAU8 = [attnMultiMax + 1]rowsAheadKernel[uint8]{2: ba(axpyRows2U8VnniPf), 3: ba(axpyRows3U8VnniPf), 4: ba(axpyRows4U8VnniPf)}
	o.DotRowsF16 = func(dst, w []float32, y []uint16, stride int) {
		dotRowsWith("DotRowsF16", dotRowsF16Vnni, 1, tensor.F16ToF32, dst, w, y, stride)
	}
	o.DotRowsF16W = func(dst []float32, w []uint16, y []float32, stride int) {
		dotRowsF16WWith(dotRowsF16WVnni, 1, dst, w, y, stride)
	}
	o.AxpyRowsU8 = func(dst, alpha []float32, x []uint8, stride int) {
		axpyRowsWith("AxpyRowsU8", axpyRowsU8Vnni, 1, u8Value, dst, alpha, x, stride)
	}
	o.DotRowsU8 = func(dst, w []float32, y []uint8, stride int) {
		dotRowsWith("DotRowsU8", dotRowsU8Vnni, 1, u8Value, dst, w, y, stride)
	}
}

// wrapRowsM makes a generated multi-vector row kernel a rowsMKernel.
func wrapRowsM[E multiElem](k func(dst *float32, ld int, v *float32, lv int, m *E, n, rows, stride int)) rowsMKernel[E] {
	return func(dst []float32, ld int, v []float32, lv int, m []E, n, rows, stride int) {
		k(unsafe.SliceData(dst), ld, unsafe.SliceData(v), lv, unsafe.SliceData(m), n, rows, stride)
	}
}

// wrapRowsAhead makes a generated dot kernel that asks ahead a
// rowsAheadKernel.
func wrapRowsAhead[E multiElem](k func(dst *float32, ld int, v *float32, lv int, m *E, n, rows, stride, ahead int)) rowsAheadKernel[E] {
	return func(dst []float32, ld int, v []float32, lv int, m []E, n, rows, stride, ahead int) {
		k(unsafe.SliceData(dst), ld, unsafe.SliceData(v), lv, unsafe.SliceData(m), n, rows, stride, ahead)
	}
}
