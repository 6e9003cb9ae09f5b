package quant

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// solveDirect solves a x = b for a small square a [k, k] by Gauss-Jordan
// elimination (invertDirect): the plain reference of the tests below.
func solveDirect(a, b []float64, k int) []float64 {
	inv := invertDirect(a, k)
	x := make([]float64, k)
	for i := range k {
		for j := range k {
			x[i] += inv[i*k+j] * b[j]
		}
	}
	return x
}

// TestRefitScalesLeastSquares checks RefitScales on the schemes whose
// scales are continuous against the least-squares solve written out: with
// the integers held, w8's row scale is q^T H w / q^T H q, and q4's group
// scales of a row solve the normal equations A s = c with
// A[g,h] = a_g^T H a_h and c[g] = a_g^T H w, a_g the row's integers minus
// the zero point on group g and 0 elsewhere.
func TestRefitScalesLeastSquares(t *testing.T) {
	const n, k, m = 6, 96, 300
	w, x := gptqData(3, n, k, m)
	h := hessian(x, m, k)
	for _, s := range []Scheme{{Kind: KindW8}, {Kind: KindQ4, Block: 32, Sym: true}, {Kind: KindQ4, Block: 32}} {
		q, err := QuantizeGPTQ(w, n, k, s, h, GPTQOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ints := slices.Clone(q.Q)
		before, _ := OutputError(q, w, h)
		if err := RefitScales(q, w, h); err != nil {
			t.Fatal(err)
		}
		after, _ := OutputError(q, w, h)
		if !slices.Equal(ints, q.Q) {
			t.Errorf("%v: the integers changed", s)
		}
		if !(after <= before) {
			t.Errorf("%v: output error rose from %.6g to %.6g", s, before, after)
		}
		nb := max(q.BlocksPerRow(), 1)
		worst := 0.0
		for r := range n {
			a := make([][]float64, nb)
			for g := range nb {
				a[g] = make([]float64, k)
				for c := range k {
					if nb > 1 && c/s.Block != g {
						continue
					}
					z := 0.0
					if q.Zeros != nil {
						z = float64(q.Zeros[r*nb+g])
					}
					a[g][c] = float64(q.Q[r*k+c]) - z
				}
			}
			ha := func(u, v []float64) float64 {
				var t float64
				for i := range k {
					for j := range k {
						t += u[i] * h[i*k+j] * v[j]
					}
				}
				return t
			}
			wr := make([]float64, k)
			for c := range k {
				wr[c] = float64(w[r*k+c])
			}
			A := make([]float64, nb*nb)
			c := make([]float64, nb)
			for g := range nb {
				c[g] = ha(a[g], wr)
				for g2 := range nb {
					A[g*nb+g2] = ha(a[g], a[g2])
				}
			}
			want := solveDirect(A, c, nb)
			for g := range nb {
				got := float64(q.Scales[r*nb+g])
				worst = max(worst, math.Abs(got-want[g])/math.Abs(want[g]))
			}
		}
		t.Logf("%v: output error %.6g -> %.6g; largest relative scale difference from the solve %.2g", s, before, after, worst)
		if worst > 1e-4 {
			t.Errorf("%v: scales differ from the least-squares solve by up to %.2g relative (want 1e-4)", s, worst)
		}
	}
}

// TestRefitScalesLPBQ checks LPBQ's refit by brute force: with the
// integers held, no block's code can be set to another of 1..16 and lower
// the output error (each computed from Dequantize and the quadratic form
// written out), the row scale is at its least-squares value for the codes,
// and the error did not rise.
func TestRefitScalesLPBQ(t *testing.T) {
	const n, k, m = 6, 64, 300
	w, x := gptqData(4, n, k, m)
	h := hessian(x, m, k)
	for _, block := range []int{16, 32} {
		q, err := QuantizeGPTQ(w, n, k, Scheme{Kind: KindLPBQ, Block: block}, h, GPTQOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ints := slices.Clone(q.Q)
		oldCodes := slices.Clone(q.Codes)
		before := outputError(w, q.Dequantize(), h, n, k)
		if err := RefitScales(q, w, h); err != nil {
			t.Fatal(err)
		}
		after := outputError(w, q.Dequantize(), h, n, k)
		if !slices.Equal(ints, q.Q) {
			t.Errorf("block %d: the integers changed", block)
		}
		if !(after <= before) {
			t.Errorf("block %d: output error rose from %.6g to %.6g", block, before, after)
		}
		moved := 0
		for i := range oldCodes {
			if oldCodes[i] != q.Codes[i] {
				moved++
			}
		}
		t.Logf("block %d: output error %.6g -> %.6g, %d of %d codes changed", block, before, after, moved, len(q.Codes))
		if !(after < before) {
			t.Errorf("block %d: the refit did not lower the output error (%.6g)", block, after)
		}
		for i := range q.Codes {
			keep := q.Codes[i]
			for c := uint8(1); c <= 16; c++ {
				if c == keep {
					continue
				}
				q.Codes[i] = c
				if e := outputError(w, q.Dequantize(), h, n, k); e < after*(1-1e-9) {
					t.Errorf("block %d: code %d of block %d lowers the error to %.8g from %.8g", block, c, i, e, after)
				}
			}
			q.Codes[i] = keep
		}
		nb := q.BlocksPerRow()
		for r := range n {
			var num, den float64
			for c := range k {
				a := float64(int32(q.Q[r*k+c]) * int32(q.Codes[r*nb+c/block]))
				for d := range k {
					ad := float64(int32(q.Q[r*k+d]) * int32(q.Codes[r*nb+d/block]))
					num += a * h[c*k+d] * float64(w[r*k+d])
					den += a * h[c*k+d] * ad
				}
			}
			if got, want := float64(q.Scales[r]), num/den; math.Abs(got-want) > 1e-3*want {
				t.Errorf("block %d row %d: scale %.6g, least squares for its codes %.6g", block, r, got, want)
			}
		}
	}
	if err := RefitScales(&Quantized{Scheme: Scheme{Kind: KindW8}, Rows: 2, Cols: 3}, make([]float32, 6), make([]float64, 4)); err == nil {
		t.Error("a hessian of the wrong size was accepted")
	}
}

// TestGPTQRefitRounds checks GPTQOptions.Refit: for every scheme, the
// output error against the damped Hessian is at most plain GPTQ's, and
// the integers stay on the scheme's range.
func TestGPTQRefitRounds(t *testing.T) {
	const n, k, m = 8, 64, 300
	w, x := gptqData(5, n, k, m)
	h := hessian(x, m, k)
	hd, _ := dampHessian(h, k, 0.01)
	for _, s := range []Scheme{{Kind: KindW8}, {Kind: KindLPBQ, Block: 16}, {Kind: KindQ4, Block: 32, Sym: true}, {Kind: KindQ4, Block: 32}} {
		plain, err := QuantizeGPTQ(w, n, k, s, h, GPTQOptions{ActOrder: true})
		if err != nil {
			t.Fatal(err)
		}
		refit, err := QuantizeGPTQ(w, n, k, s, h, GPTQOptions{ActOrder: true, Refit: 2})
		if err != nil {
			t.Fatal(err)
		}
		ep, er := outputError(w, plain.Dequantize(), hd, n, k), outputError(w, refit.Dequantize(), hd, n, k)
		t.Logf("%v: output error %.6g with GPTQ, %.6g with 2 refit rounds", s, ep, er)
		if !(er <= ep) {
			t.Errorf("%v: refit rounds raised the output error from %.6g to %.6g", s, ep, er)
		}
		g, _ := gridOf(refit)
		for _, v := range refit.Q {
			if int(v) < g.lo || int(v) > g.hi {
				t.Fatalf("%v: integer %d outside %d..%d", s, v, g.lo, g.hi)
			}
		}
		for _, c := range refit.Codes {
			if c < 1 || c > 16 {
				t.Fatalf("%v: code %d outside 1..16", s, c)
			}
		}
	}
	if _, err := FactorGPTQ(h, k, GPTQOptions{Refit: -1}); err == nil {
		t.Error("a negative number of refit rounds was accepted")
	}
}

// BenchmarkGPTQRefit compares GPTQ's column loop on 256 rows of a
// 1024-wide weight (Qwen3-0.6B's hidden width) with and without two
// rounds of scale re-fitting, the factor made beforehand.
func BenchmarkGPTQRefit(b *testing.B) {
	const n, k = 256, 1024
	w, x := gptqData(9, n, k, 2*k)
	h := hessian(x, 2*k, k)
	for _, rounds := range []int{0, 2} {
		f, err := FactorGPTQ(h, k, GPTQOptions{ActOrder: true, Refit: rounds})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("refit=%d", rounds), func(b *testing.B) {
			for b.Loop() {
				q, err := Quantize(w, n, k, Scheme{Kind: KindLPBQ, Block: 32})
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Apply(q, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
