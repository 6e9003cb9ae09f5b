package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/hugemem"
	"github.com/aotlm/aotlm/internal/tensor"
)

// randHalves returns n random binary16 values (never zero).
func randHalves(r *rand.Rand, n int) []uint16 {
	h := make([]uint16, n)
	for i, v := range randFloats(r, n, 1) {
		h[i] = tensor.F32ToF16(v)
	}
	return h
}

// randBytes returns n random biased bytes (uint8 cache codes).
func randBytes(r *rand.Rand, n int) []uint8 {
	b := make([]uint8, n)
	for i := range b {
		b[i] = uint8(r.IntN(256))
	}
	return b
}

// multiKernel is one overlay's multi-vector row kernels for M vectors
// on rows of E, with the overlay's one-vector kernels.
type multiKernel[E multiElem] struct {
	name      string
	M         int
	axpy, dot rowsMKernel[E]
	axpy1     func(dst, alpha []float32, x []E, stride int)
	dot1      func(dst, w []float32, y []E, stride int)
}

// multiKernels lists the supported overlays' multi-vector row kernels
// for binary16 rows and for biased bytes.
func multiKernels() ([]multiKernel[uint16], []multiKernel[uint8]) {
	var h []multiKernel[uint16]
	var b []multiKernel[uint8]
	for _, o := range Overlays() {
		if !o.Supported {
			continue
		}
		for M := 2; M <= attnMultiMax; M++ {
			if o.axpyRowsMF16[M] != nil && o.dotRowsMF16[M] != nil {
				h = append(h, multiKernel[uint16]{fmt.Sprintf("%s/f16/%d", o.Name, M), M, o.axpyRowsMF16[M], o.dotRowsMF16[M], o.AxpyRowsF16, o.DotRowsF16})
			}
			if o.axpyRowsMU8[M] != nil && o.dotRowsMU8[M] != nil {
				b = append(b, multiKernel[uint8]{fmt.Sprintf("%s/u8/%d", o.Name, M), M, o.axpyRowsMU8[M], o.dotRowsMU8[M], o.AxpyRowsU8, o.DotRowsU8})
			}
		}
	}
	return h, b
}

// TestAxpyRowsMSameAsOne: each of the M vectors of an overlay's
// multi-vector binary16 axpy gets bit for bit what the overlay's
// one-vector kernel gives it, for every n and rows count (odd ones, the
// masked tails), at padded strides, and nothing outside the n columns of
// each destination row changes. A column's sum must not depend on n
// either: the first n' < n columns equal a call with n'.
func TestAxpyRowsMSameAsOne(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	h, b := multiKernels()
	checkAxpyRowsM(t, r, h, randHalves)
	checkAxpyRowsM(t, r, b, randBytes)
}

func checkAxpyRowsM[E multiElem](t *testing.T, r *rand.Rand, kernels []multiKernel[E], rowsOf func(*rand.Rand, int) []E) {
	for _, o := range kernels {
		for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 100, 257} {
			for _, rows := range []int{1, 2, 3, 8, 65, 128} {
				ldd, lda, stride := n+3, rows+5, n+7
				x := rowsOf(r, (rows-1)*stride+n)
				M := o.M
				alpha := randFloats(r, (M-1)*lda+rows, 0.2)
				dst := make([]float32, (M-1)*ldd+n+4)
				for i := range dst {
					dst[i] = guard
				}
				init := randFloats(r, M*n, 1)
				for q := range M {
					copy(dst[q*ldd:q*ldd+n], init[q*n:])
				}
				o.axpy(dst, ldd, alpha, lda, x, n, rows, stride)
				for q := range M {
					one := append([]float32(nil), init[q*n:(q+1)*n]...)
					o.axpy1(one, alpha[q*lda:q*lda+rows], x, stride)
					for j := range n {
						if math.Float32bits(one[j]) != math.Float32bits(dst[q*ldd+j]) {
							t.Fatalf("%s n %d rows %d: vector %d column %d: %v alone, %v of M", o.name, n, rows, q, j, one[j], dst[q*ldd+j])
						}
					}
					end := len(dst)
					if q < M-1 {
						end = (q + 1) * ldd
					}
					for j := q*ldd + n; j < end; j++ {
						if dst[j] != guard {
							t.Fatalf("%s n %d rows %d: guard %d after vector %d written", o.name, n, rows, j, q)
						}
					}
					if n > 1 {
						short := append([]float32(nil), init[q*n:q*n+n-1]...)
						o.axpy1(short, alpha[q*lda:q*lda+rows], x, stride)
						for j := range short {
							if short[j] != one[j] {
								t.Fatalf("%s n %d rows %d: column %d is %v with n %d, %v with n %d", o.name, n, rows, j, short[j], n-1, one[j], n)
							}
						}
					}
				}
			}
		}
	}
}

// TestDotRowsMSameAsOne: each of the M vectors of an overlay's
// multi-vector binary16 dot gets bit for bit what the overlay's one-vector
// kernel gives it, and a vector zero past its own length n' gets what the
// one-vector kernel gives its first n' elements (attention pads a tile's
// shorter score rows with zeros); nothing outside each destination's
// rows changes.
func TestDotRowsMSameAsOne(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	h, b := multiKernels()
	checkDotRowsM(t, r, h, randHalves)
	checkDotRowsM(t, r, b, randBytes)
}

func checkDotRowsM[E multiElem](t *testing.T, r *rand.Rand, kernels []multiKernel[E], rowsOf func(*rand.Rand, int) []E) {
	for _, o := range kernels {
		for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 100, 257} {
			for _, rows := range []int{1, 2, 3, 8, 65} {
				ldd, ldw, stride := rows+3, n+5, n+9
				y := rowsOf(r, (rows-1)*stride+n)
				M := o.M
				w := randFloats(r, (M-1)*ldw+n, 1)
				lens := []int{n, max(1, n-1), max(1, n/2), max(1, n-17)}[:M]
				for q, l := range lens {
					clear(w[q*ldw+l : q*ldw+n])
				}
				dst := make([]float32, (M-1)*ldd+rows+4)
				for i := range dst {
					dst[i] = guard
				}
				o.dot(dst, ldd, w, ldw, y, n, rows, stride)
				for q, l := range lens {
					one := make([]float32, rows)
					o.dot1(one, w[q*ldw:q*ldw+l], y, stride)
					for e := range rows {
						if math.Float32bits(one[e]) != math.Float32bits(dst[q*ldd+e]) {
							t.Fatalf("%s n %d (vector %d of %d) rows %d: row %d: %v alone, %v of M", o.name, n, q, l, rows, e, one[e], dst[q*ldd+e])
						}
					}
					end := len(dst)
					if q < M-1 {
						end = (q + 1) * ldd
					}
					for j := q*ldd + rows; j < end; j++ {
						if dst[j] != guard {
							t.Fatalf("%s n %d rows %d: guard %d after vector %d written", o.name, n, rows, j, q)
						}
					}
				}
			}
		}
	}
}

// TestRowsMulti: the exported multi-vector forms (binary16 and uint8
// rows), for every count of vectors (groups of four and the rest), agree
// with the generic one-vector kernels within float32 rounding of sums of
// |terms|.
func TestRowsMulti(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9} {
		for _, n := range []int{1, 17, 64, 130} {
			rows := 33
			ldd, lda, stride := n+2, rows+1, n+3
			x := randHalves(r, (rows-1)*stride+n)
			alpha := randFloats(r, (m-1)*lda+rows, 0.3)
			dst := make([]float32, (m-1)*ldd+n)
			AxpyRowsF16Multi(dst, ldd, n, alpha, lda, rows, m, x, stride)
			for q := range m {
				want := make([]float32, n)
				axpyRowsF16Generic(want, alpha[q*lda:q*lda+rows], x, stride)
				for j := range n {
					var mag float64
					for e := range rows {
						mag += math.Abs(float64(alpha[q*lda+e] * tensor.F16ToF32(x[e*stride+j])))
					}
					if d := math.Abs(float64(dst[q*ldd+j] - want[j])); d > 1e-6*mag+1e-30 {
						t.Fatalf("axpy m %d n %d: vector %d column %d: %v, generic %v", m, n, q, j, dst[q*ldd+j], want[j])
					}
				}
			}
			// The uint8 forms against the generic loops (biased bytes).
			xu := randBytes(r, (rows-1)*stride+n)
			du := make([]float32, (m-1)*ldd+n)
			AxpyRowsU8Multi(du, ldd, n, alpha, lda, rows, m, xu, stride)
			wu := randFloats(r, (m-1)*(n+2)+n, 1)
			ou := make([]float32, (m-1)*(rows+1)+rows)
			DotRowsU8Multi(ou, rows+1, rows, wu, n+2, n, m, xu, stride)
			for q := range m {
				want := make([]float32, n)
				axpyRowsU8Generic(want, alpha[q*lda:q*lda+rows], xu, stride)
				for j := range n {
					var mag float64
					for e := range rows {
						mag += math.Abs(float64(alpha[q*lda+e] * float32(int32(xu[e*stride+j])-U8Bias)))
					}
					if d := math.Abs(float64(du[q*ldd+j] - want[j])); d > 1e-6*mag+1e-30 {
						t.Fatalf("u8 axpy m %d n %d: vector %d column %d: %v, generic %v", m, n, q, j, du[q*ldd+j], want[j])
					}
				}
				wantd := make([]float32, rows)
				dotRowsU8Generic(wantd, wu[q*(n+2):q*(n+2)+n], xu, stride)
				for e := range rows {
					var mag float64
					for j := range n {
						mag += math.Abs(float64(wu[q*(n+2)+j] * float32(int32(xu[e*stride+j])-U8Bias)))
					}
					if d := math.Abs(float64(ou[q*(rows+1)+e] - wantd[e])); d > 1e-6*mag+1e-30 {
						t.Fatalf("u8 dot m %d n %d: vector %d row %d: %v, generic %v", m, n, q, e, ou[q*(rows+1)+e], wantd[e])
					}
				}
			}
			out := make([]float32, (m-1)*(rows+1)+rows)
			w := randFloats(r, (m-1)*(n+2)+n, 1)
			DotRowsF16Multi(out, rows+1, rows, w, n+2, n, m, x, stride)
			for q := range m {
				want := make([]float32, rows)
				dotRowsF16Generic(want, w[q*(n+2):q*(n+2)+n], x, stride)
				for e := range rows {
					var mag float64
					for j := range n {
						mag += math.Abs(float64(w[q*(n+2)+j] * tensor.F16ToF32(x[e*stride+j])))
					}
					if d := math.Abs(float64(out[q*(rows+1)+e] - want[e])); d > 1e-6*mag+1e-30 {
						t.Fatalf("dot m %d n %d: vector %d row %d: %v, generic %v", m, n, q, e, out[q*(rows+1)+e], want[e])
					}
				}
			}
		}
	}
}

// TestRowsF16MultiBounds: a span past a slice panics before anything is
// written.
func TestRowsMultiBounds(t *testing.T) {
	x := make([]uint16, 100)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"axpy dst", func() { AxpyRowsF16Multi(make([]float32, 10), 8, 4, make([]float32, 20), 4, 4, 2, x, 10) }},
		{"axpy alpha", func() { AxpyRowsF16Multi(make([]float32, 20), 8, 4, make([]float32, 7), 4, 4, 2, x, 10) }},
		{"axpy x", func() { AxpyRowsF16Multi(make([]float32, 20), 8, 4, make([]float32, 20), 4, 20, 2, x, 10) }},
		{"dot w", func() { DotRowsF16Multi(make([]float32, 20), 8, 4, make([]float32, 7), 4, 4, 2, x, 10) }},
		{"dot y", func() { DotRowsF16Multi(make([]float32, 20), 8, 4, make([]float32, 20), 4, 40, 2, x, 10) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			c.f()
		})
	}
}

// BenchmarkRowsMulti times attention's binary16 and uint8 row kernels
// for four queries of one head (E = 128 rows, 512 slots): one
// multi-vector call against four one-vector calls.
func BenchmarkRowsMulti(b *testing.B) {
	r := rand.New(rand.NewPCG(67, 68))
	const n, rows, m = 512, 128, 4
	h, u := randHalves(r, rows*n), randBytes(r, rows*n)
	alpha := randFloats(r, m*rows, 0.1)
	w := randFloats(r, m*n, 1)
	dst := make([]float32, m*n)
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"axpyF16/multi", func() { AxpyRowsF16Multi(dst, n, n, alpha, rows, rows, m, h, n) }},
		{"axpyF16/single", func() {
			for q := range m {
				AxpyRowsF16(dst[q*n:(q+1)*n], alpha[q*rows:(q+1)*rows], h, n)
			}
		}},
		{"dotF16/multi", func() { DotRowsF16Multi(dst, rows, rows, w, n, n, m, h, n) }},
		{"dotF16/single", func() {
			for q := range m {
				DotRowsF16(dst[q*rows:(q+1)*rows], w[q*n:(q+1)*n], h, n)
			}
		}},
		{"axpyU8/multi", func() { AxpyRowsU8Multi(dst, n, n, alpha, rows, rows, m, u, n) }},
		{"axpyU8/single", func() {
			for q := range m {
				AxpyRowsU8(dst[q*n:(q+1)*n], alpha[q*rows:(q+1)*rows], u, n)
			}
		}},
		{"dotU8/multi", func() { DotRowsU8Multi(dst, rows, rows, w, n, n, m, u, n) }},
		{"dotU8/single", func() {
			for q := range m {
				DotRowsU8(dst[q*rows:(q+1)*rows], w[q*n:(q+1)*n], u, n)
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
			b.ReportMetric(2*float64(n*rows*m)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDecodeAttention times one decode step's attention over a
// head-major binary16 cache as the engine lays it out (the Qwen3-0.6B
// shape: 28 layers, 8 key/value heads of E = 128, 2 queries each), with
// a 2 MiB read before each layer that stands for the weights streamed in
// between, so that the keys and values come from memory as in decode
// (where the last-level cache holds less than the 117 MB cache). It
// reports the cache's bytes read a second (and ns per token); the
// "evict-only" case is the read alone, to subtract. The key pass asks
// for the values as it reads (DotRowsF16MultiAhead, as the engine does);
// "values-first" cases ask for them all before it instead.
func BenchmarkDecodeAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(71, 72))
	const layers, G, E, m, slots = 28, 8, 128, 2, 1024
	layer := G * slots * E
	kv := hugemem.Uint16s(2 * layers * layer)
	for i := range kv {
		kv[i] = 0x3c00 + uint16(r.IntN(1024)) // 1.0 to just under 2.0
	}
	evict := make([]byte, 2<<20)
	q := randFloats(r, G*m*E, 1)
	out := make([]float32, G*m*E)
	scores := make([]float32, m*slots)
	var sink byte
	step := func(n int, attend, valuesFirst bool) {
		for l := range layers {
			for i := 0; i < len(evict); i += 64 {
				sink += evict[i]
			}
			if !attend {
				continue
			}
			K, V := kv[2*l*layer:(2*l+1)*layer], kv[(2*l+1)*layer:(2*l+2)*layer]
			for g := range G {
				sc := scores[:m*n]
				if valuesFirst {
					PrefetchRun(V, g*slots*E, n*E)
					DotRowsF16Multi(sc, n, n, q[g*m*E:], E, E, m, K[g*slots*E:], E)
				} else {
					DotRowsF16MultiAhead(sc, n, n, q[g*m*E:], E, E, m, K[g*slots*E:], E, V[g*slots*E:])
				}
				clear(out[g*m*E : (g+1)*m*E])
				AxpyRowsF16Multi(out[g*m*E:], E, E, sc, n, n, m, V[g*slots*E:], E)
			}
		}
	}
	b.Run("evict-only", func(b *testing.B) {
		for b.Loop() {
			step(0, false, false)
		}
	})
	for _, n := range []int{64, 256, 1024} {
		for _, first := range []bool{false, true} {
			name := fmt.Sprintf("positions=%d", n)
			if first {
				name += "/values-first"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					step(n, true, first)
				}
				b.SetBytes(int64(2 * layers * G * n * E * 2))
			})
		}
	}
	benchSink = sink
}

// benchSink keeps the benchmarks' reads from being optimized away.
var benchSink byte
