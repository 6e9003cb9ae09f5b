package quant

import (
	"math"
	"math/rand"
	"sort"
	"testing"
)

// gptqData returns a random weight [n, k] and calibration inputs [m, k]
// whose channels have very different scales and are correlated, as real
// activations are.
func gptqData(seed int64, n, k, m int) (w []float32, x []float64) {
	r := rand.New(rand.NewSource(seed))
	w = make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	x = make([]float64, m*k)
	scale := make([]float64, k)
	for c := range scale {
		scale[c] = math.Exp(2 * r.NormFloat64())
	}
	for i := range m {
		common := r.NormFloat64()
		for c := range k {
			x[i*k+c] = scale[c] * (r.NormFloat64() + 0.5*common)
		}
	}
	return w, x
}

// hessian returns X^T X.
func hessian(x []float64, m, k int) []float64 {
	h := make([]float64, k*k)
	for i := range m {
		row := x[i*k : (i+1)*k]
		for a := range k {
			for b := range k {
				h[a*k+b] += row[a] * row[b]
			}
		}
	}
	return h
}

// invertDirect inverts a small matrix by Gauss-Jordan elimination with
// partial pivoting: the plain reference of the test below.
func invertDirect(a []float64, k int) []float64 {
	m := append([]float64(nil), a...)
	inv := make([]float64, k*k)
	for i := range k {
		inv[i*k+i] = 1
	}
	for c := range k {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(m[r*k+c]) > math.Abs(m[p*k+c]) {
				p = r
			}
		}
		for j := range k {
			m[c*k+j], m[p*k+j] = m[p*k+j], m[c*k+j]
			inv[c*k+j], inv[p*k+j] = inv[p*k+j], inv[c*k+j]
		}
		d := m[c*k+c]
		for j := range k {
			m[c*k+j] /= d
			inv[c*k+j] /= d
		}
		for r := range k {
			if r == c {
				continue
			}
			f := m[r*k+c]
			for j := range k {
				m[r*k+j] -= f * m[c*k+j]
				inv[r*k+j] -= f * inv[c*k+j]
			}
		}
	}
	return inv
}

// TestGPTQAgainstDirectSolve checks QuantizeGPTQ (Cholesky form) against the
// plain sequential optimal-brain-surgeon procedure: before each column i,
// invert the dampened H restricted to the columns not yet quantized, round
// w_i to the W8 grid, and move the remaining weights by
// -(w_i - q_i) / Hinv[i,i] * Hinv[:,i]. Both must choose the same integers.
func TestGPTQAgainstDirectSolve(t *testing.T) {
	const n, k, m = 5, 24, 200
	w, x := gptqData(1, n, k, m)
	h := hessian(x, m, k)
	got, err := QuantizeGPTQ(w, n, k, Scheme{Kind: KindW8}, h, GPTQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hd := append([]float64(nil), h...)
	var mean float64
	for i := range k {
		mean += h[i*k+i]
	}
	for i := range k {
		hd[i*k+i] += 0.01 * mean / k
	}
	diffs := 0
	for r := range n {
		row := make([]float64, k)
		amax := 0.0
		for c := range k {
			row[c] = float64(w[r*k+c])
			amax = max(amax, math.Abs(row[c]))
		}
		s := float64(float32(amax / 127))
		for i := range k {
			rest := k - i
			sub := make([]float64, rest*rest)
			for a := range rest {
				for b := range rest {
					sub[a*rest+b] = hd[(i+a)*k+i+b]
				}
			}
			hinv := invertDirect(sub, rest)
			q := math.Max(-127, math.Min(127, math.RoundToEven(row[i]/s)))
			if int8(q) != got.Q[r*k+i] {
				diffs++
			}
			e := (row[i] - q*s) / hinv[0]
			for j := 1; j < rest; j++ {
				row[i+j] -= e * hinv[j*rest]
			}
		}
	}
	if diffs != 0 {
		t.Fatalf("%d of %d integers differ from the direct solve", diffs, n*k)
	}
}

// outputError returns tr((W - W') H (W - W')^T), the calibration inputs'
// squared output error.
func outputError(w, wq []float32, h []float64, n, k int) float64 {
	var e float64
	d := make([]float64, k)
	for r := range n {
		for c := range k {
			d[c] = float64(w[r*k+c]) - float64(wq[r*k+c])
		}
		for a := range k {
			for b := range k {
				e += d[a] * h[a*k+b] * d[b]
			}
		}
	}
	return e
}

// TestGPTQLowersOutputError checks, for every scheme with an integer grid,
// that GPTQ's output error on the calibration inputs is below plain
// rounding's on the same grid (scales, codes and zero points unchanged).
func TestGPTQLowersOutputError(t *testing.T) {
	const n, k, m = 8, 64, 300
	w, x := gptqData(2, n, k, m)
	h := hessian(x, m, k)
	for _, s := range []Scheme{{Kind: KindW8}, {Kind: KindLPBQ, Block: 32}, {Kind: KindQ4, Block: 32, Sym: true}, {Kind: KindQ4, Block: 32}} {
		rtn, err := Quantize(w, n, k, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, act := range []bool{false, true} {
			g, err := QuantizeGPTQ(w, n, k, s, h, GPTQOptions{ActOrder: act})
			if err != nil {
				t.Fatal(err)
			}
			if !equalF32(rtn.Scales, g.Scales) || string(rtn.Codes) != string(g.Codes) || !equalF32(rtn.Zeros, g.Zeros) {
				t.Errorf("%v: GPTQ changed the grid", s)
			}
			er, eg := outputError(w, rtn.Dequantize(), h, n, k), outputError(w, g.Dequantize(), h, n, k)
			t.Logf("%v act-order %v: output error %.4g, rounding %.4g", s, act, eg, er)
			if !(eg < 0.9*er) {
				t.Errorf("%v act-order %v: output error %.4g with GPTQ, %.4g with rounding: want at least 10%% lower", s, act, eg, er)
			}
		}
	}
	if _, err := QuantizeGPTQ(w, n, k, Scheme{Kind: KindW8}, h[:10], GPTQOptions{}); err == nil {
		t.Error("a hessian of the wrong size was accepted")
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInverseUpperFactor checks U from inverseUpperFactor on random
// symmetric positive definite matrices: upper triangular with a positive
// diagonal, and U^T U a = I within 1e-9 (float64, condition numbers of a
// few hundred at most here).
func TestInverseUpperFactor(t *testing.T) {
	rng := rand.New(rand.NewSource(78))
	for _, k := range []int{1, 2, 5, 33, 100} {
		// a = X^T X + k I from random X [2k, k]
		x := make([]float64, 2*k*k)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		a := make([]float64, k*k)
		for r := range 2 * k {
			for i := range k {
				for j := range k {
					a[i*k+j] += x[r*k+i] * x[r*k+j]
				}
			}
		}
		for i := range k {
			a[i*k+i] += float64(k)
		}
		u, err := inverseUpperFactor(a, k)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if !(u[i*k+i] > 0) {
				t.Fatalf("k=%d: U[%d,%d] = %v, not positive", k, i, i, u[i*k+i])
			}
			for j := range i {
				if u[i*k+j] != 0 {
					t.Fatalf("k=%d: U[%d,%d] = %v below the diagonal", k, i, j, u[i*k+j])
				}
			}
		}
		for i := range k { // (U^T U a)[i,j]
			for j := range k {
				var s float64
				for p := range k {
					var inv float64 // (U^T U)[i,p]
					for q := range k {
						inv += u[q*k+i] * u[q*k+p]
					}
					s += inv * a[p*k+j]
				}
				want := 0.0
				if i == j {
					want = 1
				}
				if math.Abs(s-want) > 1e-9 {
					t.Fatalf("k=%d: (U^T U a)[%d,%d] = %v", k, i, j, s)
				}
			}
		}
	}
	if _, err := inverseUpperFactor([]float64{1, 2, 2, 1}, 2); err == nil {
		t.Fatal("an indefinite matrix was factored")
	}
}

// TestGPTQBlockedUpdates checks the blocked column loop (float32 SIMD
// updates between blocks) against the plain float64 loop on widths of
// several blocks: the integers agree but for rare rounding ties (at most
// 0.1%) and the output error on the calibration inputs within 0.1%.
func TestGPTQBlockedUpdates(t *testing.T) {
	for _, s := range []Scheme{{Kind: KindW8}, {Kind: KindLPBQ, Block: 32}, {Kind: KindQ4, Block: 32}} {
		const n, k, m = 6, 3*gptqBlock + 44, 900
		w, x := gptqData(4, n, k, m)
		h := hessian(x, m, k)
		got, err := QuantizeGPTQ(w, n, k, s, h, GPTQOptions{ActOrder: true})
		if err != nil {
			t.Fatal(err)
		}
		want, err := Quantize(w, n, k, s)
		if err != nil {
			t.Fatal(err)
		}
		// the plain loop, float64 throughout
		perm := make([]int, k)
		for i := range perm {
			perm[i] = i
		}
		sort.SliceStable(perm, func(a, b int) bool { return h[perm[a]*k+perm[a]] > h[perm[b]*k+perm[b]] })
		hp := make([]float64, len(h))
		for a, pa := range perm {
			for b, pb := range perm {
				hp[a*k+b] = h[pa*k+pb]
			}
		}
		u, dead, err := gptqFactor(hp, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := gridOf(want)
		row := make([]float64, k)
		for r := range n {
			for i, c := range perm {
				row[i] = float64(w[r*k+c])
				if dead[i] {
					row[i] = 0
				}
			}
			for i := range k {
				e := (row[i] - g.round(r, perm[i], row[i])) / u[i*k+i]
				for j := i + 1; j < k; j++ {
					row[j] -= e * u[i*k+j]
				}
			}
		}
		diffs := 0
		for i := range got.Q {
			if got.Q[i] != want.Q[i] {
				diffs++
			}
		}
		eGot, eWant := outputError(w, got.Dequantize(), h, n, k), outputError(w, want.Dequantize(), h, n, k)
		t.Logf("%v: %d of %d integers differ; output error %.6g blocked, %.6g plain", s, diffs, n*k, eGot, eWant)
		if diffs > n*k/1000 || math.Abs(eGot-eWant) > 1e-3*eWant {
			t.Fatalf("%v: %d integers differ, output error %g vs %g", s, diffs, eGot, eWant)
		}
	}
}

// BenchmarkGPTQFactor times the factorization GPTQ does once per weight,
// at a hidden width of 1024.
func BenchmarkGPTQFactor(b *testing.B) {
	const k = 1024
	_, x := gptqData(9, 1, k, 2*k)
	h := hessian(x, 2*k, k)
	for b.Loop() {
		if _, _, err := gptqFactor(h, k, 0); err != nil {
			b.Fatal(err)
		}
	}
}
