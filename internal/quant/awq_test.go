package quant

import (
	"math"
	"math/rand"
	"testing"
)

// TestAWQAgainstPlainSearch checks AWQScales against a plain restatement of
// the search (scales, normalization, output error by a direct triple loop)
// over the same grid, on inputs with a few outlier channels: the same alpha
// wins with the same error, the error at alpha 0 is plain rounding's, and
// scaling helps on such inputs.
func TestAWQAgainstPlainSearch(t *testing.T) {
	const n, k, m = 12, 64, 48
	r := rand.New(rand.NewSource(4))
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	x := make([]float32, m*k)
	mean := make([]float64, k)
	for i := range x {
		v := r.NormFloat64()
		if i%k < 4 {
			v *= 30 // outlier channels
		}
		x[i] = float32(v)
		mean[i%k] += math.Abs(float64(x[i])) / m
	}
	s := Scheme{Kind: KindQ4, Block: 32, Sym: true}
	ws := []Weight{{W: w, Rows: n, Scheme: s}}
	res, err := AWQScales(ws, k, mean, x, AWQOptions{Grid: 10})
	if err != nil {
		t.Fatal(err)
	}
	bestA, bestE := -1.0, 0.0
	var bestS []float64
	for g := range 10 {
		a := float64(g) / 10
		sc := make([]float64, k)
		hi, lo := 0.0, math.Inf(1)
		for j := range k {
			sc[j] = math.Pow(mean[j], a)
			hi, lo = max(hi, sc[j]), min(lo, sc[j])
		}
		for j := range k {
			sc[j] /= math.Sqrt(hi * lo)
		}
		scaled := make([]float32, n*k)
		for i := range scaled {
			scaled[i] = w[i] * float32(sc[i%k])
		}
		q, err := Quantize(scaled, n, k, s)
		if err != nil {
			t.Fatal(err)
		}
		dq := q.Dequantize()
		var e float64
		for i := range m {
			for o := range n {
				var yf, yq float64
				for j := range k {
					yf += float64(x[i*k+j]) * float64(w[o*k+j])
					yq += float64(x[i*k+j]/float32(sc[j])) * float64(dq[o*k+j])
				}
				e += (yf - yq) * (yf - yq)
			}
		}
		if g == 0 && math.Abs(e-res.BaseErr) > 1e-5*e { // AWQScales' products are float32 sums
			t.Errorf("error at alpha 0: %v, plain %v", res.BaseErr, e)
		}
		if bestA < 0 || e < bestE {
			bestA, bestE, bestS = a, e, sc
		}
	}
	if res.Alpha != bestA || math.Abs(res.Err-bestE) > 1e-5*bestE {
		t.Fatalf("alpha %v error %v, plain search: alpha %v error %v", res.Alpha, res.Err, bestA, bestE)
	}
	for j := range k {
		if math.Abs(float64(res.Scales[j])-bestS[j]) > 1e-6*bestS[j] {
			t.Fatalf("scale %d = %v, plain %v", j, res.Scales[j], bestS[j])
		}
	}
	if !(res.Alpha > 0 && res.Err < 0.9*res.BaseErr) {
		t.Errorf("outlier channels: alpha %v, error %v vs %v unscaled; want a scaling that helps", res.Alpha, res.Err, res.BaseErr)
	}
}

// TestSmoothIdentity checks smoothing's two facts: the scales follow
// s_j = max|x_j|^a / max|W_:j|^(1-a), and (x/s)(W diag(s))^T equals x W^T.
func TestSmoothIdentity(t *testing.T) {
	const n, k, m = 6, 16, 5
	r := rand.New(rand.NewSource(6))
	w := make([]float32, n*k)
	x := make([]float32, m*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	amax := make([]float64, k)
	for i := range x {
		x[i] = float32(r.NormFloat64() * float64(1+i%k))
		amax[i%k] = max(amax[i%k], math.Abs(float64(x[i])))
	}
	s, err := SmoothScales([]Weight{{W: w, Rows: n}}, k, amax, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for j := range k {
		wm := 0.0
		for o := range n {
			wm = max(wm, math.Abs(float64(w[o*k+j])))
		}
		want := math.Sqrt(amax[j]) / math.Sqrt(wm)
		if math.Abs(float64(s[j])-want) > 1e-6*want {
			t.Fatalf("s[%d] = %v, want %v", j, s[j], want)
		}
	}
	xs, wsc := make([]float32, len(x)), make([]float32, len(w))
	for i := range x {
		xs[i] = x[i] / s[i%k]
	}
	for i := range w {
		wsc[i] = w[i] * s[i%k]
	}
	a, b := matmulT(x, m, k, w, n), matmulT(xs, m, k, wsc, n)
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-5*(1+math.Abs(a[i])) {
			t.Fatalf("output %d: %v smoothed, %v original", i, b[i], a[i])
		}
	}
	if _, err := SmoothScales(nil, k, amax, 1.5); err == nil {
		t.Error("alpha 1.5 accepted")
	}
}
