package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestRotateHead: rotating twice gives x back within 1e-6 of its largest
// value, and the rotation keeps dot products (within 1e-5 relative to
// |a||b|) and matches H x / sqrt(n) with the reference transform.
func TestRotateHead(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 8, 32, 64, 128, 256} {
		a, b := randKV(r, n, 3), randKV(r, n, 1)
		ra, rb := append([]float32(nil), a...), append([]float32(nil), b...)
		RotateHead(ra)
		RotateHead(rb)
		want := append([]float32(nil), a...)
		fwhtGeneric(want)
		inv := 1 / math.Sqrt(float64(n))
		for i := range want {
			if d := math.Abs(float64(ra[i]) - float64(want[i])*inv); d > 1e-5*3*math.Sqrt(float64(n)) {
				t.Fatalf("n=%d: rotated[%d] = %g, want %g", n, i, ra[i], float64(want[i])*inv)
			}
		}
		var d0, d1, na, nb float64
		for i := range a {
			d0 += float64(a[i]) * float64(b[i])
			d1 += float64(ra[i]) * float64(rb[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		if math.Abs(d0-d1) > 1e-5*math.Sqrt(na*nb) {
			t.Fatalf("n=%d: dot product %g after rotation, %g before", n, d1, d0)
		}
		RotateHead(ra)
		for i := range a {
			if d := math.Abs(float64(ra[i] - a[i])); d > 1e-6*3 {
				t.Fatalf("n=%d: twice rotated[%d] = %g, want %g", n, i, ra[i], a[i])
			}
		}
	}
}

// TestQuantizeKVQ4: a stored row reads back (DequantizeKVQ4) within an
// RMS error of half a step of the group's plain min-max grid, never worse
// than that grid (the fit keeps the best), and its dot products and
// axpys (DotKVQ4, AxpyKVQ4) agree with a float64 loop over the read-back
// values within 1e-5 relative, on random rows with and without an
// outlier.
func TestQuantizeKVQ4(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, E := range []int{2, 8, 16, 32, 64, 128, 256} {
		for trial := range 40 {
			y := randKV(r, E, 2)
			if trial%2 == 1 {
				y[r.IntN(E)] *= 12
			}
			row := make([]uint8, KVQ4RowBytes(E))
			QuantizeKVQ4(row, y)
			back := make([]float32, E)
			DequantizeKVQ4(back, row)
			gs := KVQ4Group(E)
			for g := 0; g < E/gs; g++ {
				grp := y[g*gs : (g+1)*gs]
				lo, hi := grp[0], grp[0]
				for _, v := range grp {
					lo, hi = min(lo, v), max(hi, v)
				}
				var sse float64
				for i := g * gs; i < (g+1)*gs; i++ {
					d := float64(back[i] - y[i])
					sse += d * d
				}
				plain := kvq4Err(grp, tensor.F32ToF16((hi-lo)/15), tensor.F32ToF16(lo))
				if sse > plain*(1+1e-6)+1e-12 {
					t.Fatalf("E=%d group %d: squared error %g, the min-max grid's %g", E, g, sse, plain)
				}
				step := float64(hi-lo) / 15
				if rms := math.Sqrt(sse / float64(gs)); rms > 0.51*step {
					t.Fatalf("E=%d group %d: RMS error %g, more than half a step of %g", E, g, rms, step)
				}
			}
			q := randKV(r, E, 1)
			var want, scale float64
			for i := range q {
				want += float64(q[i]) * float64(back[i])
				scale += math.Abs(float64(q[i]) * float64(back[i]))
			}
			if got := DotKVQ4(q, row); math.Abs(float64(got)-want) > 1e-5*scale+1e-7 {
				t.Fatalf("E=%d: DotKVQ4 = %g, want %g", E, got, want)
			}
			acc := randKV(r, E, 1)
			exp := append([]float32(nil), acc...)
			AxpyKVQ4(acc, 0.37, row)
			for i := range acc {
				w := float64(exp[i]) + 0.37*float64(back[i])
				if math.Abs(float64(acc[i])-w) > 1e-5*(math.Abs(w)+1) {
					t.Fatalf("E=%d: AxpyKVQ4[%d] = %g, want %g", E, i, acc[i], w)
				}
			}
		}
	}
}

// TestQuantizeKVQ4Special: constant groups read back exactly, NaN and
// infinite values store without a panic, and head dimensions the
// rotation cannot take are refused.
func TestQuantizeKVQ4Special(t *testing.T) {
	y := []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}
	row := make([]uint8, KVQ4RowBytes(8))
	QuantizeKVQ4(row, y)
	back := make([]float32, 8)
	DequantizeKVQ4(back, row)
	for i, v := range back {
		if v != 0.5 {
			t.Fatalf("constant group: back[%d] = %g, want 0.5", i, v)
		}
	}
	nan := float32(math.NaN())
	for _, bad := range [][]float32{
		{nan, nan, nan, nan},
		{nan, 1, 2, 3},
		{float32(math.Inf(1)), 1, 2, 3},
	} {
		row := make([]uint8, KVQ4RowBytes(4))
		QuantizeKVQ4(row, bad)
		DequantizeKVQ4(make([]float32, 4), row)
	}
	for _, E := range []int{0, 1, 3, 40, 96} {
		if CheckKVQ4(E) == nil {
			t.Fatalf("head dimension %d accepted for a 4-bit cache", E)
		}
	}
	if err := CheckKVQ4(64); err != nil {
		t.Fatal(err)
	}
	if KVQ4RowBytes(8) != 8 || KVQ4RowBytes(32) != 20 || KVQ4RowBytes(128) != 80 {
		t.Fatalf("row bytes %d, %d, %d; want 8, 20, 80", KVQ4RowBytes(8), KVQ4RowBytes(32), KVQ4RowBytes(128))
	}
}

// randKV returns n normal values times scale.
func randKV(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

// TestOverlaysKVQ4: each supported overlay's DotKVQ4 and AxpyKVQ4 match
// the Go references (dotKVQ4Generic, axpyKVQ4Generic) on random rows of
// heads of 8 to 256 values, some with random code and meta bytes: the dot
// within dotTolerance relative to Σ|q·x| over the row's values x, each
// axpy output within 1e-5 relative to |y| + |alpha·x|; the axpy writes
// nothing past its row.
func TestOverlaysKVQ4(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for _, o := range supported(t) {
		if o.DotKVQ4 == nil && o.AxpyKVQ4 == nil {
			continue
		}
		t.Logf("overlay %s: 4-bit row kernels", o.Name)
		for _, E := range []int{8, 16, 32, 64, 128, 256} {
			R := KVQ4RowBytes(E)
			for trial := range 30 {
				src := make([]uint8, R)
				if trial%3 == 2 {
					for i := range src[:E/2] {
						src[i] = uint8(r.IntN(256))
					}
					for g := 0; g < E/KVQ4Group(E); g++ {
						d, m := tensor.F32ToF16(r.Float32()), tensor.F32ToF16(float32(r.NormFloat64()))
						meta := src[E/2+4*g:]
						meta[0], meta[1], meta[2], meta[3] = uint8(d), uint8(d>>8), uint8(m), uint8(m>>8)
					}
				} else {
					QuantizeKVQ4(src, randKV(r, E, 2))
				}
				x := make([]float32, E)
				DequantizeKVQ4(x, src)
				q := randKV(r, E, 1)
				if o.DotKVQ4 != nil {
					var mag float64
					for i := range q {
						mag += math.Abs(float64(q[i] * x[i]))
					}
					got, want := o.DotKVQ4(q, src), dotKVQ4Generic(q, src)
					if d := math.Abs(float64(got - want)); !(d <= dotTolerance*mag+1e-6) {
						t.Fatalf("%s: DotKVQ4 E=%d trial %d: %g, want %g", o.Name, E, trial, got, want)
					}
				}
				if o.AxpyKVQ4 != nil {
					alpha := float32(r.NormFloat64())
					y0 := append(randKV(r, E, 1), 12345)
					y1 := append([]float32(nil), y0...)
					axpyKVQ4Generic(y0[:E], alpha, src)
					o.AxpyKVQ4(y1[:E], alpha, src)
					if y1[E] != 12345 {
						t.Fatalf("%s: AxpyKVQ4 E=%d wrote past its row", o.Name, E)
					}
					for i := range E {
						tol := 1e-5 * (math.Abs(float64(y0[i])) + math.Abs(float64(alpha*x[i])))
						if d := math.Abs(float64(y1[i] - y0[i])); !(d <= tol+1e-7) {
							t.Fatalf("%s: AxpyKVQ4 E=%d trial %d: y[%d] = %g, want %g", o.Name, E, trial, i, y1[i], y0[i])
						}
					}
				}
			}
		}
	}
}
