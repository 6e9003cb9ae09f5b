package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// benchShapes are real (N, K) weight shapes: Qwen3-0.6B q/o-like, q,
// gate/up, down, and SmolLM2 / larger models' projections.
var benchShapes = [][2]int{{1024, 1024}, {2048, 1024}, {3072, 1024}, {1024, 3072}, {576, 576}, {1536, 576}, {2048, 2048}, {8192, 2048}, {2048, 8192}}

// benchImpl is one implementation of the products under benchmark.
type benchImpl struct {
	name string
	q4   func(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int)
	w8   func(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int)
}

// benchImpls lists the generic kernels and every supported overlay.
func benchImpls() []benchImpl {
	out := []benchImpl{{"generic", q4MatMulGeneric, w8MatMulGeneric}}
	for _, o := range Overlays() {
		if o.Supported {
			out = append(out, benchImpl{o.Name, o.Q4MatMul, o.W8MatMul})
		}
	}
	return out
}

// reportTile reports the throughput of one op on a [N, K] weight and T
// tokens: weight GB/s for one token, GFLOP/s (2*N*K*T per op) for tiles.
func reportTile(b *testing.B, N, K, T, weightBytes int) {
	if T == 1 {
		b.SetBytes(int64(weightBytes))
		return
	}
	b.ReportMetric(2*float64(N)*float64(K)*float64(T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// benchQ4 runs the 4-bit product of LPBQ form on shapes for T tokens.
func benchQ4(b *testing.B, shapes [][2]int, T int) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range shapes {
		N, K := sh[0], sh[1]
		w := randQ4(r, N, K, true, false)
		x, _ := randQ8(r, T, K)
		dst := make([]float32, T*N)
		for _, im := range benchImpls() {
			if im.q4 == nil || (im.name == "generic" && T > 1 && N*K > 1<<22) {
				continue
			}
			b.Run(fmt.Sprintf("%dx%d/%s", N, K, im.name), func(b *testing.B) {
				for b.Loop() {
					im.q4(dst, N, w, x, 0, N)
				}
				reportTile(b, N, K, T, len(w.Nib)+len(w.Codes))
			})
			if T == 1 && N*K > 1<<26 && im.name != "generic" {
				// A streamed weight split between two threads, as
				// the engine's pool splits a decode step.
				b.Run(fmt.Sprintf("%dx%d/%s/threads=2", N, K, im.name), func(b *testing.B) {
					for b.Loop() {
						inHalves(N, func(n0, n1 int) { im.q4(dst, N, w, x, n0, n1) })
					}
					reportTile(b, N, K, T, len(w.Nib)+len(w.Codes))
				})
			}
		}
	}
}

// BenchmarkQ4MatMulT1 times one token; the last two shapes are streamed
// from memory: Qwen3's classifier, and rows as narrow as SmolLM2's (576)
// in a matrix larger than the caches.
func BenchmarkQ4MatMulT1(b *testing.B) {
	benchQ4(b, append(benchShapes, [2]int{151936, 1024}, [2]int{270336, 576}), 1)
}

func BenchmarkQ4MatMulT32(b *testing.B) { benchQ4(b, benchShapes, 32) }

func BenchmarkQ4MatMulT64(b *testing.B) { benchQ4(b, benchShapes, 64) }

// inHalves runs f on rows [0, N/2) in a new goroutine and on [N/2, N)
// in this one, and waits for both.
func inHalves(N int, f func(n0, n1 int)) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f(0, N/2)
	}()
	f(N/2, N)
	wg.Wait()
}

// benchW8 runs the 8-bit product on shapes for T tokens.
func benchW8(b *testing.B, shapes [][2]int, T int) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, sh := range shapes {
		N, K := sh[0], sh[1]
		w := randW8(r, N, K)
		x, _ := randQ8(r, T, K)
		dst := make([]float32, T*N)
		for _, im := range benchImpls() {
			if im.w8 == nil || (im.name == "generic" && N*K > 1<<22) {
				continue
			}
			b.Run(fmt.Sprintf("%dx%d/%s", N, K, im.name), func(b *testing.B) {
				for b.Loop() {
					im.w8(dst, N, w, x, 0, N)
				}
				reportTile(b, N, K, T, len(w.U))
			})
			if T == 1 && N*K > 1<<26 && im.name != "generic" {
				b.Run(fmt.Sprintf("%dx%d/%s/threads=2", N, K, im.name), func(b *testing.B) {
					for b.Loop() {
						inHalves(N, func(n0, n1 int) { im.w8(dst, N, w, x, n0, n1) })
					}
					reportTile(b, N, K, T, len(w.U))
				})
			}
		}
	}
}

// w8Shapes are the 8-bit product's shapes: in cache, and (the last) a
// 16 MB weight streamed from memory.
var w8Shapes = [][2]int{{1024, 1024}, {3072, 1024}, {2048, 8192}}

// BenchmarkW8MatMulT1 adds Qwen3-0.6B's classifier (155 MB, streamed).
func BenchmarkW8MatMulT1(b *testing.B) { benchW8(b, append(w8Shapes, [2]int{151936, 1024}), 1) }

func BenchmarkW8MatMulT64(b *testing.B) { benchW8(b, w8Shapes[:2], 64) }

// actSizes are activation lengths: a hidden and an FFN width.
var actSizes = []int{3072, 8192}

// BenchmarkSiLUMul times the gated unit; bytes are the two inputs read
// and the output written.
func BenchmarkSiLUMul(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	impls := []struct {
		name string
		f    func(dst, gate, up []float32)
	}{{"generic", siluMulGeneric}}
	for _, o := range Overlays() {
		if o.Supported && o.SiLUMul != nil {
			impls = append(impls, struct {
				name string
				f    func(dst, gate, up []float32)
			}{o.Name, o.SiLUMul})
		}
	}
	for _, n := range actSizes {
		g, u, d := randFloats(r, n, 3), randFloats(r, n, 1), make([]float32, n)
		for _, im := range impls {
			b.Run(fmt.Sprintf("%d/%s", n, im.name), func(b *testing.B) {
				b.SetBytes(int64(12 * n))
				for b.Loop() {
					im.f(d, g, u)
				}
			})
		}
	}
}

// BenchmarkExpSub times softmax's exponentials in place; bytes are the
// row read and written. Besides rows of actSizes (scores within 13 of
// m), "row=130" is one decode step's attention row (its last vector
// padded) and "far" scores down to 120 below m, whose exponentials
// would be subnormal or 0: each cost an Intel core a microcode assist
// a vector until the overlays flushed them to 0.
func BenchmarkExpSub(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	impls := []struct {
		name string
		f    func(x []float32, m float32) float32
	}{{"generic", expSubGeneric}}
	for _, o := range Overlays() {
		if o.Supported && o.ExpSub != nil {
			impls = append(impls, struct {
				name string
				f    func(x []float32, m float32) float32
			}{o.Name, o.ExpSub})
		}
	}
	type input struct {
		name string
		src  []float32
	}
	var inputs []input
	for _, n := range actSizes {
		inputs = append(inputs, input{fmt.Sprint(n), randFloats(r, n, 3)})
	}
	row := randFloats(r, 130, 3)
	far := slices.Clone(row)
	for i := range far {
		far[i] = 10 - 120*float32(i%17)/16
	}
	inputs = append(inputs, input{"row=130", row}, input{"row=130/far", far})
	for _, in := range inputs {
		src, n := in.src, len(in.src)
		x := make([]float32, n)
		for _, im := range impls {
			b.Run(fmt.Sprintf("%s/%s", in.name, im.name), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					copy(x, src) // keep the inputs from decaying to exp(exp(...))
					im.f(x, 10)
				}
			})
		}
	}
}

// BenchmarkRows times the attention row kernels on n = 512 positions and
// 64 or 128 rows (stride n+8), with "percall" the same work as one
// dispatched Axpy or Dot call per row; GFLOP/s counts 2*n*rows per op.
func BenchmarkRows(b *testing.B) {
	r := rand.New(rand.NewPCG(19, 20))
	impls := rowsImpls(b)
	impls[1] = rowsImpl{name: "percall",
		axpyRows: func(dst, alpha, x []float32, stride int) {
			for i, a := range alpha {
				Axpy(dst, a, x[i*stride:])
			}
		},
		dotRows: func(dst, w, y []float32, stride int) {
			for i := range dst {
				dst[i] = Dot(w, y[i*stride:])
			}
		},
		axpyRowsF16: func(dst, alpha []float32, x []uint16, stride int) {
			for i, a := range alpha {
				AxpyF16(dst, a, x[i*stride:])
			}
		},
		dotRowsF16: func(dst, w []float32, y []uint16, stride int) {
			for i := range dst {
				dst[i] = DotF16(w, y[i*stride:])
			}
		},
		dotRowsF16W: func(dst []float32, w []uint16, y []float32, stride int) {
			for i := range dst {
				dst[i] = DotF16(y[i*stride:i*stride+len(w)], w)
			}
		},
	}
	const n = 512
	for _, R := range []int{64, 128} {
		st := n + 8
		x := randFloats(r, R*st, 1)
		h := make([]uint16, len(x))
		for i, v := range x {
			h[i] = tensor.F32ToF16(v)
		}
		u := make([]uint8, len(x))
		for i := range u {
			u[i] = uint8(r.IntN(256))
		}
		alpha, w := randFloats(r, R, 0.1), randFloats(r, n, 1)
		wh := make([]uint16, n)
		for i, v := range w {
			wh[i] = tensor.F32ToF16(v)
		}
		dst := make([]float32, max(n, R))
		ops := []struct {
			name string
			run  func(im rowsImpl)
		}{
			{"axpy", func(im rowsImpl) { im.axpyRows(dst[:n], alpha, x, st) }},
			{"dot", func(im rowsImpl) { im.dotRows(dst[:R], w, x, st) }},
			{"axpyF16", func(im rowsImpl) { im.axpyRowsF16(dst[:n], alpha, h, st) }},
			{"dotF16", func(im rowsImpl) { im.dotRowsF16(dst[:R], w, h, st) }},
			{"axpyU8", func(im rowsImpl) { im.axpyRowsU8(dst[:n], alpha, u, st) }},
			{"dotU8", func(im rowsImpl) { im.dotRowsU8(dst[:R], w, u, st) }},
			{"dotF16W", func(im rowsImpl) { im.dotRowsF16W(dst[:R], wh, x, st) }},
		}
		for _, op := range ops {
			for _, im := range impls {
				if im.axpyRowsU8 == nil && strings.HasSuffix(op.name, "U8") {
					continue // no per-row uint8 kernel to compose
				}
				b.Run(fmt.Sprintf("%s/%dx%d/%s", op.name, R, n, im.name), func(b *testing.B) {
					for b.Loop() {
						op.run(im)
					}
					b.ReportMetric(2*float64(n*R)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkQ4KMatMul times a weight in the K4 form (Q4_K super-blocks,
// 4.75 bits a weight) taken as it is, against the same weight expanded
// to the per-block form (6 bits a weight: a float32 scale and zero-point
// term per block) that products without the form run. Both report the
// 4-bit codes' bytes (N*K/2) per op, so their MB/s compare as speeds.
// The last shape, Qwen3-0.6B's classifier, is streamed from memory.
func BenchmarkQ4KMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, T := range []int{1, 64} {
		for _, sh := range [][2]int{{3072, 1024}, {1024, 3072}, {151936, 1024}} {
			N, K := sh[0], sh[1]
			if T > 1 && N*K > 1<<26 {
				continue
			}
			w := randQ4K(r, N, K)
			ex := *w
			ex.expandK4()
			x, _ := randQ8(r, T, K)
			dst := make([]float32, T*N)
			for _, o := range Overlays() {
				if !o.Supported || o.Q4MatMul == nil {
					continue
				}
				forms := []struct {
					name string
					run  func(n0, n1 int)
				}{{"expanded", func(n0, n1 int) { o.Q4MatMul(dst, N, ex.sym, x, n0, n1); ex.addZeroTerms(dst, N, x, n0, n1) }}}
				if o.q4Zeros != nil {
					forms[0].run = func(n0, n1 int) { o.q4Zeros(dst, N, ex.sym, ex.zs, x, n0, n1) }
				}
				forms = append(forms, struct {
					name string
					run  func(n0, n1 int)
				}{"k4", func(n0, n1 int) { o.Q4MatMul(dst, N, w, x, n0, n1) }})
				for _, f := range forms {
					b.Run(fmt.Sprintf("T%d/%dx%d/%s/%s", T, N, K, o.Name, f.name), func(b *testing.B) {
						for b.Loop() {
							f.run(0, N)
						}
						reportTile(b, N, K, T, N*K/2)
					})
					if T == 1 && N*K > 1<<26 {
						b.Run(fmt.Sprintf("T%d/%dx%d/%s/%s/threads=2", T, N, K, o.Name, f.name), func(b *testing.B) {
							for b.Loop() {
								inHalves(N, f.run)
							}
							reportTile(b, N, K, T, N*K/2)
						})
					}
				}
			}
		}
	}
}
