//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// archOverlays returns the amd64 overlays: AVX2 (with FMA, F16C and BMI2),
// then AVX-512 F/BW/VL with VNNI. x/sys/cpu reports the AVX and AVX-512
// features only when the OS saves their registers.
func archOverlays() []Overlay {
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C && cpu.X86.HasBMI2
	vnni := avx2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI
	o := []Overlay{
		{
			Name:       "avx2",
			Supported:  avx2,
			BatchExact: true,
			QuantizeQ8: quantizeQ8Avx2Go,
			Q4MatMul: func(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
				q4MatMulWith(&q4Avx2Sets, dst, ldd, w, x, n0, n1)
			},
			W8MatMul: func(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
				w8MatMulWith(&w8Avx2, dst, ldd, w, x, n0, n1)
			},
			Q6MatMul: q6MatMulAvx2,
			Dot:      func(a, b []float32) float32 { return dotWith(dotAvx2, 8, a, b) },
			Axpy:     func(y []float32, alpha float32, x []float32) { axpyWith(axpyAvx2, 8, y, alpha, x) },
			DotF16:   func(a []float32, b []uint16) float32 { return dotF16With(dotF16Avx2, 8, a, b) },
			AxpyF16:  func(y []float32, alpha float32, x []uint16) { axpyF16With(axpyF16Avx2, 8, y, alpha, x) },
			DotKVQ4:  func(q []float32, src []uint8) float32 { return dotKVQ4With(dotKVQ4Avx2, q, src) },
			AxpyKVQ4: func(y []float32, alpha float32, src []uint8) { axpyKVQ4With(axpyKVQ4Avx2, y, alpha, src) },
			ColumnsF16: func(dst []uint16, stride int, src []float32, ld, T, n int) {
				columnsF16With(columnsF16Avx2, 8, dst, stride, src, ld, T, n)
			},
		},
		{
			Name:       "avx512vnni",
			Supported:  vnni,
			BatchExact: true,
			QuantizeQ8: quantizeQ8VnniGo,
			Q4MatMul: func(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
				q4MatMulWith(&q4VnniSets, dst, ldd, w, x, n0, n1)
			},
			W8MatMul: func(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
				w8MatMulWith(&w8Vnni, dst, ldd, w, x, n0, n1)
			},
			Q6MatMul: q6MatMulVnni,
			Dot:      func(a, b []float32) float32 { return dotWith(dotVnni, 16, a, b) },
			Axpy:     func(y []float32, alpha float32, x []float32) { axpyWith(axpyVnni, 16, y, alpha, x) },
			DotF16:   func(a []float32, b []uint16) float32 { return dotF16With(dotF16Vnni, 16, a, b) },
			AxpyF16:  func(y []float32, alpha float32, x []uint16) { axpyF16With(axpyF16Vnni, 16, y, alpha, x) },
			DotKVQ4:  func(q []float32, src []uint8) float32 { return dotKVQ4With(dotKVQ4Vnni, q, src) },
			AxpyKVQ4: func(y []float32, alpha float32, src []uint8) { axpyKVQ4With(axpyKVQ4Vnni, y, alpha, src) },
			ColumnsF16: func(dst []uint16, stride int, src []float32, ld, T, n int) {
				columnsF16With(columnsF16Vnni, 16, dst, stride, src, ld, T, n)
			},
		},
	}
	actOverlay(&o[0], false)
	actOverlay(&o[1], true)
	rowsOverlay(&o[0], false)
	rowsOverlay(&o[1], true)
	o[0].q4Records, o[1].q4Records = q4Avx2Sets.layout, q4VnniSets.layout
	o[0].w8Records, o[1].w8Records = w8Avx2.layout, w8Vnni.layout
	o[1].q4Zeros = func(dst []float32, ldd int, sym *Q4, zs []float32, x *Q8, n0, n1 int) {
		q4MatMulZerosWith(&q4VnniSets, dst, ldd, sym, zs, x, n0, n1)
	}
	return o
}

// decodeWalks lists the one-token walks over rows this CPU's products
// have (Tune picks), in order of preference (pickWalk): rows and tiles of
// 4 where the AVX2 or AVX-512 products are in use, rows asking ahead,
// and with AVX-512 rows with the activations from memory (whose rows
// walk holds them in registers), with and without asking ahead; none
// (one fixed walk) with the generic ones.
func decodeWalks() []int32 {
	if overlays[1].Supported {
		return []int32{walkRows, walkRowsPrefetch, walkRowsMemory, walkRowsMemoryPrefetch, walkTiles4}
	}
	if overlays[0].Supported {
		return []int32{walkRows, walkRowsPrefetch, walkTiles4}
	}
	return nil
}
