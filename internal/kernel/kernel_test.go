package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// guard is the value written around every output slice: an overlay that
// writes outside its range changes it.
const guard = float32(-12345.5)

func randFloats(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
		if v[i] == 0 {
			v[i] = scale
		}
	}
	return v
}

// randQ4 returns a random Q4 weight; lpbq picks the code form, asym adds
// zero points.
func randQ4(r *rand.Rand, N, K int, lpbq, asym bool) *Q4 {
	nb := K / QK
	u := make([]uint8, N*K)
	for i := range u {
		u[i] = uint8(r.IntN(16))
	}
	w := &Q4{N: N, K: K, Nib: make([]byte, N*K/2)}
	if err := PackNibbles(w.Nib, u, N, K); err != nil {
		panic(err)
	}
	if lpbq {
		w.Codes = make([]uint8, N*nb)
		for i := range w.Codes {
			w.Codes[i] = uint8(1 + r.IntN(16))
		}
		w.Scales = make([]float32, N)
		for i := range w.Scales {
			w.Scales[i] = 0.001 + r.Float32()*0.01
		}
	} else {
		w.Scales = make([]float32, N*nb)
		for i := range w.Scales {
			w.Scales[i] = 0.01 + r.Float32()*0.1
		}
	}
	if asym {
		w.Zeros = make([]float32, N*nb)
		for i := range w.Zeros {
			w.Zeros[i] = float32(r.IntN(16))
		}
	}
	return w
}

func randW8(r *rand.Rand, N, K int) *W8 {
	w := &W8{N: N, K: K, U: make([]uint8, N*K), Scales: make([]float32, N)}
	for i := range w.U {
		w.U[i] = uint8(1 + r.IntN(255))
	}
	for i := range w.Scales {
		w.Scales[i] = 0.001 + r.Float32()*0.01
	}
	return w
}

func randQ8(r *rand.Rand, T, K int) (*Q8, []float32) {
	x := randFloats(r, T*K, 1)
	// An outlier per row, as real activations have.
	for t := 0; t < T; t++ {
		x[t*K+r.IntN(K)] *= 20
	}
	a := NewQ8(T, K)
	a.Quantize(x, T)
	return a, x
}

// TestQ8Quantize checks the reference rule: every value within half a
// step of its block scale, the extreme at ±127, and Sum the sum of Q.
func TestQ8Quantize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a, x := randQ8(r, 3, 4*QK)
	for b := range a.D {
		var s int32
		var top int8
		for i := b * QK; i < (b+1)*QK; i++ {
			if e := math.Abs(float64(x[i]) - float64(a.Q[i])*float64(a.D[b])); e > float64(a.D[b])/2*1.0001 {
				t.Fatalf("block %d elem %d: %g quantized to %d*%g", b, i, x[i], a.Q[i], a.D[b])
			}
			s += int32(a.Q[i])
			top = max(top, a.Q[i], -a.Q[i])
		}
		if s != a.Sum[b] || top != 127 {
			t.Fatalf("block %d: sum %d (want %d), max |q| %d (want 127)", b, a.Sum[b], s, top)
		}
	}
	z := NewQ8(1, QK)
	z.Quantize(make([]float32, QK), 1)
	if z.D[0] != 0 || z.Sum[0] != 0 {
		t.Fatalf("zero block: d %g sum %d", z.D[0], z.Sum[0])
	}
}

// TestMatMulMeaning checks the generic kernels against a float64 product
// of the dequantized weight (Row) and the dequantized activations.
func TestMatMulMeaning(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const N, K, T = 7, 4 * QK, 3
	x, _ := randQ8(r, T, K)
	xf := make([]float64, T*K)
	for i := range xf {
		xf[i] = float64(x.Q[i]) * float64(x.D[i/QK])
	}
	check := func(name string, row func([]float32, int), mm func([]float32, int, *Q8, int, int)) {
		dst := make([]float32, T*N)
		mm(dst, N, x, 0, N)
		wr := make([]float32, K)
		for n := range N {
			row(wr, n)
			for tt := range T {
				var want, mag float64
				for k := range K {
					want += float64(wr[k]) * xf[tt*K+k]
					mag += math.Abs(float64(wr[k]) * xf[tt*K+k])
				}
				if d := math.Abs(float64(dst[tt*N+n]) - want); d > 1e-5*mag+1e-6 {
					t.Errorf("%s: [%d][%d] = %g, want %g (|diff| %g, Σ|terms| %g)", name, tt, n, dst[tt*N+n], want, d, mag)
				}
			}
		}
	}
	for _, c := range []struct {
		name       string
		lpbq, asym bool
	}{{"lpbq", true, false}, {"q4-sym", false, false}, {"q4-asym", false, true}} {
		w := randQ4(r, N, K, c.lpbq, c.asym)
		if err := w.Check(); err != nil {
			t.Fatal(err)
		}
		check(c.name, w.Row, func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) })
	}
	w8 := randW8(r, N, K)
	if err := w8.Check(); err != nil {
		t.Fatal(err)
	}
	check("w8", w8.Row, func(d []float32, l int, x *Q8, a, b int) { w8MatMulGeneric(d, l, w8, x, a, b) })
}

// matMulTolerance is the error budget of an overlay's product against the
// generic one: both sum exact integer block dot products, so only the
// float32 order of the block terms differs. The budget is relative to
// Σ_b |block term|, bounded here by Σ|w|·|x| computed in float64.
const matMulTolerance = 1e-5

func TestOverlaysQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, o := range supported(t) {
		if o.QuantizeQ8 == nil {
			continue
		}
		for nb := 0; nb <= 9; nb++ {
			for off := range 3 {
				x := randFloats(r, off+nb*QK, 3)[off:]
				if nb > 0 {
					x[r.IntN(len(x))] = 0 // zeros inside a block are fine
				}
				q0, d0, s0 := make([]int8, nb*QK), make([]float32, nb), make([]int32, nb)
				quantizeQ8Generic(q0, d0, s0, x)
				q1, d1, s1 := make([]int8, nb*QK+1), make([]float32, nb+1), make([]int32, nb+1)
				q1[nb*QK], d1[nb], s1[nb] = 77, guard, 77
				o.QuantizeQ8(q1[:nb*QK], d1[:nb], s1[:nb], x)
				if q1[nb*QK] != 77 || d1[nb] != guard || s1[nb] != 77 {
					t.Fatalf("%s: quantize of %d blocks wrote past its end", o.Name, nb)
				}
				for i := range q0 {
					if q0[i] != q1[i] {
						t.Fatalf("%s: %d blocks, offset %d: q[%d] = %d, want %d (x %g, d %g)", o.Name, nb, off, i, q1[i], q0[i], x[i], d0[i/QK])
					}
				}
				for b := range d0 {
					if d0[b] != d1[b] || s0[b] != s1[b] {
						t.Fatalf("%s: block %d: d %g sum %d, want %g %d", o.Name, b, d1[b], s1[b], d0[b], s0[b])
					}
				}
			}
		}
	}
}

// checkMatMul runs an overlay's product against the generic one for T
// rows and the row range [n0, n1), with guard values around every row of
// dst (ldd = N + 3).
func checkMatMul(t *testing.T, name string, N, K, T, n0, n1 int, rowAbs func(n int) []float32, x *Q8, xf []float32,
	ref, got func(dst []float32, ldd int, x *Q8, n0, n1 int)) {
	t.Helper()
	ldd := N + 3
	want := make([]float32, T*ldd)
	have := make([]float32, T*ldd+1)
	for i := range have {
		have[i] = guard
	}
	ref(want, ldd, x, n0, n1)
	got(have, ldd, x, n0, n1)
	for tt := 0; tt < T; tt++ {
		for n := 0; n < ldd; n++ {
			i := tt*ldd + n
			if n < n0 || n >= n1 {
				if have[i] != guard {
					t.Fatalf("%s: N %d K %d T %d rows [%d,%d): wrote dst[%d][%d] outside its range", name, N, K, T, n0, n1, tt, n)
				}
				continue
			}
			var mag float64
			for k, w := range rowAbs(n) {
				mag += float64(w) * math.Abs(float64(x.Q[tt*K+k])*float64(x.D[tt*(K/QK)+k/QK]))
			}
			if d := math.Abs(float64(have[i] - want[i])); d > matMulTolerance*mag+1e-7 || have[i] != have[i] {
				t.Fatalf("%s: N %d K %d T %d: dst[%d][%d] = %g, want %g (|diff| %g > %g)", name, N, K, T, tt, n, have[i], want[i], d, matMulTolerance*mag)
			}
		}
	}
	if have[T*ldd] != guard {
		t.Fatalf("%s: wrote past the end of dst", name)
	}
}

func TestOverlaysMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	// widths below, at and past whole chunks of 16 blocks (the AVX-512
	// and AVX2 4-bit kernels' unit), with groups and blocks left over
	shapes := [][2]int{{1, QK}, {3, 2 * QK}, {5, 3 * QK}, {16, 4 * QK}, {17, 8 * QK}, {33, 5 * QK}, {8, 32 * QK}, {9, 13 * QK},
		{12, 18 * QK}, {21, 23 * QK}, {6, 48 * QK}}
	for _, o := range supported(t) {
		for _, sh := range shapes {
			N, K := sh[0], sh[1]
			for _, T := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16} {
				x, xf := randQ8(r, T, K)
				n0 := r.IntN(N)
				n1 := n0 + 1 + r.IntN(N-n0)
				if T%2 == 0 || T == 1 && N >= 8 {
					n0, n1 = 0, N
				}
				abs := func(row func([]float32, int)) func(int) []float32 {
					return func(n int) []float32 {
						v := make([]float32, K)
						row(v, n)
						for i := range v {
							v[i] = abs32(v[i])
						}
						return v
					}
				}
				if o.Q4MatMul != nil {
					for _, f := range [][2]bool{{true, false}, {false, false}, {false, true}} {
						w := randQ4(r, N, K, f[0], f[1])
						checkMatMul(t, fmt.Sprintf("%s q4 lpbq=%v asym=%v", o.Name, f[0], f[1]), N, K, T, n0, n1, abs(w.Row), x, xf,
							func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
							func(d []float32, l int, x *Q8, a, b int) { o.Q4MatMul(d, l, w, x, a, b) })
					}
				}
				if o.W8MatMul != nil {
					w := randW8(r, N, K)
					checkMatMul(t, o.Name+" w8", N, K, T, n0, n1, abs(w.Row), x, xf,
						func(d []float32, l int, x *Q8, a, b int) { w8MatMulGeneric(d, l, w, x, a, b) },
						func(d []float32, l int, x *Q8, a, b int) { o.W8MatMul(d, l, w, x, a, b) })
				}
			}
		}
	}
}

// dotTolerance is the budget of a float32 dot product summed in another
// order: relative to Σ|a·b|, a few ulps per lane of accumulation.
const dotTolerance = 1e-5

func TestOverlaysFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, o := range supported(t) {
		for n := 0; n <= 300; n++ {
			off := r.IntN(4)
			a := randFloats(r, n+off, 1)[off:]
			b := randFloats(r, n+off, 1)[off:]
			h := make([]uint16, n+off)[off:]
			for i := range h {
				h[i] = tensor.F32ToF16(b[i])
			}
			var mag, magh float64
			for i := range a {
				mag += math.Abs(float64(a[i] * b[i]))
				magh += math.Abs(float64(a[i] * tensor.F16ToF32(h[i])))
			}
			if o.Dot != nil {
				if got, want := o.Dot(a, b), dotGeneric(a, b); math.Abs(float64(got-want)) > dotTolerance*mag+1e-7 {
					t.Fatalf("%s: dot of %d: %g, want %g", o.Name, n, got, want)
				}
			}
			if o.DotF16 != nil {
				if got, want := o.DotF16(a, h), dotF16Generic(a, h); math.Abs(float64(got-want)) > dotTolerance*magh+1e-7 {
					t.Fatalf("%s: dot f16 of %d: %g, want %g", o.Name, n, got, want)
				}
			}
			alpha := float32(r.NormFloat64())
			for _, f16 := range []bool{false, true} {
				if (f16 && o.AxpyF16 == nil) || (!f16 && o.Axpy == nil) {
					continue
				}
				y0 := randFloats(r, n+off+1, 1)[off:]
				y0[n] = guard
				y1 := append([]float32(nil), y0...)
				if f16 {
					axpyF16Generic(y0[:n], alpha, h)
					o.AxpyF16(y1[:n], alpha, h)
				} else {
					axpyGeneric(y0[:n], alpha, b)
					o.Axpy(y1[:n], alpha, b)
				}
				if y1[n] != guard {
					t.Fatalf("%s: axpy (f16 %v) of %d wrote past its end", o.Name, f16, n)
				}
				for i := range n {
					// One fused multiply-add against a multiply then add:
					// at most an ulp of the product apart.
					if d := math.Abs(float64(y1[i] - y0[i])); d > 1e-6*(math.Abs(float64(y0[i]))+math.Abs(float64(alpha))) {
						t.Fatalf("%s: axpy (f16 %v) of %d: y[%d] = %g, want %g", o.Name, f16, n, i, y1[i], y0[i])
					}
				}
			}
		}
	}
}

// supported returns the overlays this CPU can run, and logs the others.
func supported(t *testing.T) []Overlay {
	var out []Overlay
	for _, o := range Overlays() {
		if !o.Supported {
			t.Logf("overlay %s: not supported by this CPU, not tested", o.Name)
			continue
		}
		out = append(out, o)
	}
	return out
}

// TestOverlaysQ4Zeros: a weight with fractional zero points (as Q4_K and
// Q4_1 become), prepared with PrepareZeros, runs on each overlay's
// symmetric kernels plus the block terms and matches the plain-Go
// reference. The budget is matMulTolerance relative to
// Σ|sc|·(|u-8| + |8-z|)·|x|, the magnitudes the two parts add.
func TestOverlaysQ4Zeros(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	shapes := [][2]int{{1, QK}, {5, 3 * QK}, {17, 8 * QK}, {33, 5 * QK}, {9, 13 * QK}, {700, 2 * QK}}
	for _, o := range supported(t) {
		if o.Q4MatMul == nil {
			continue
		}
		for _, sh := range shapes {
			N, K := sh[0], sh[1]
			nb := K / QK
			for _, T := range []int{1, 2, 3, 5, 16} {
				x, xf := randQ8(r, T, K)
				n0 := r.IntN(N)
				n1 := n0 + 1 + r.IntN(N-n0)
				w := randQ4(r, N, K, false, true)
				for i := range w.Zeros {
					w.Zeros[i] = r.Float32()*20 - 2
				}
				w.PrepareZeros()
				rowAbs := func(n int) []float32 {
					v := make([]float32, K)
					for k := range v {
						b := w.Nib[(n*nb+k/QK)*16+k%16]
						u := float32(b & 15)
						if k%QK >= 16 {
							u = float32(b >> 4)
						}
						sc, z := w.Scales[n*nb+k/QK], w.Zeros[n*nb+k/QK]
						v[k] = abs32(sc) * (abs32(u-8) + abs32(8-z))
					}
					return v
				}
				checkMatMul(t, fmt.Sprintf("%s q4 zeros", o.Name), N, K, T, n0, n1, rowAbs, x, xf,
					func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
					func(d []float32, l int, x *Q8, a, b int) {
						o.Q4MatMul(d, l, w.sym, x, a, b)
						w.addZeroTerms(d, l, x, a, b)
					})
				if o.q4Zeros != nil {
					checkMatMul(t, fmt.Sprintf("%s q4 zeros fused", o.Name), N, K, T, n0, n1, rowAbs, x, xf,
						func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
						func(d []float32, l int, x *Q8, a, b int) { o.q4Zeros(d, l, w.sym, w.zs, x, a, b) })
				}
				checkMatMul(t, "MatMul q4 zeros", N, K, T, n0, n1, rowAbs, x, xf,
					func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
					w.MatMul)
			}
		}
	}
}

// TestQ4ExtremeValues runs the 4-bit products at the ends of every
// range: LPBQ codes of 255, weights all 15 (the largest block sum of
// u*q, which the AVX-512 kernels multiply by the code in int32: 32*15*127
// *255 must stay exact) or all 0 (the zero point's term alone), and
// activations all at +127 or alternating ±127, over widths with and
// without whole groups of 4 and 16 blocks, against the generic version.
func TestQ4ExtremeValues(t *testing.T) {
	for _, o := range supported(t) {
		if o.Q4MatMul == nil {
			continue
		}
		for _, K := range []int{QK, 5 * QK, 10 * QK, 18 * QK, 64 * QK, 257 * QK} {
			for _, u := range []uint8{15, 0} {
				for _, alt := range []bool{false, true} {
					const N = 9
					nb := K / QK
					codes := make([]uint8, N*K)
					for i := range codes {
						codes[i] = u
					}
					w := &Q4{N: N, K: K, Nib: make([]byte, N*K/2), Codes: make([]uint8, N*nb), Scales: make([]float32, N)}
					if err := PackNibbles(w.Nib, codes, N, K); err != nil {
						t.Fatal(err)
					}
					for i := range w.Codes {
						w.Codes[i] = 255
					}
					for i := range w.Scales {
						w.Scales[i] = 1e-3 * float32(i+1)
					}
					for _, T := range []int{1, 2, 4} {
						xf := make([]float32, T*K)
						for i := range xf {
							xf[i] = 1
							if alt && i%2 == 1 {
								xf[i] = -1
							}
						}
						x := NewQ8(T, K)
						x.Quantize(xf, T)
						name := fmt.Sprintf("%s K %d u %d alternating %v T %d", o.Name, K, u, alt, T)
						checkMatMul(t, name, N, K, T, 0, N, func(n int) []float32 {
							v := make([]float32, K)
							w.Row(v, n)
							for i := range v {
								v[i] = abs32(v[i])
							}
							return v
						}, x, xf,
							func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
							func(d []float32, l int, x *Q8, a, b int) { o.Q4MatMul(d, l, w, x, a, b) })
					}
				}
			}
		}
	}
}
