package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Error budgets of the elementwise overlays against the generic versions
// (which use float64 exp and tanh):
//
//   - expTolerance: the float32 exp is within 2e-7 relative of the exact
//     value, plus expFlush absolute: the overlays return 0 for exp(v)
//     with v below -87 (e^-87 is 1.65e-38, under 2^-125), where a
//     subnormal result would cost Intel cores a microcode assist (the
//     file comment of _gen/act.go).
//   - siluTolerance: relative, exp's error plus the rounding of 1+e, the
//     division and (SiLUMul) the product.
//   - GELUTanh: relative siluTolerance plus geluArgTolerance·|2u|·s, the
//     float32 rounding of the argument 2u = 2·sqrt(2/pi)·(x+0.044715x³)
//     amplified by exp where the result depends on it (s = e/(1+e), e =
//     exp(-2u)), plus 2.3e-16·|x| absolute: the float64 reference loses
//     that much in 1+tanh(u) for negative x.
//   - Scale, Mul, Add: bit for bit.
//   - ExpSub's sum: (n+2)·2^-23 relative, float32 sums of positive terms
//     in two orders.
const (
	expTolerance     = 2e-7
	expFlush         = 0x1p-125
	siluTolerance    = 1e-6
	geluArgTolerance = 3e-7
)

// specials are the values planted among the random inputs.
var specials = []float32{-1e30, 0, 88, -88, 100, -100, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}

// actInputs returns n values at an unaligned start: normal of the given
// scale, with the specials planted at random places when plant is set.
func actInputs(r *rand.Rand, n int, scale float32, plant bool) []float32 {
	off := r.IntN(4)
	x := randFloats(r, n+off, scale)[off:]
	if plant && n > 0 {
		for _, v := range specials {
			if r.IntN(3) == 0 {
				x[r.IntN(n)] = v
			}
		}
	}
	return x
}

// near reports whether got is want within rel·|want| + abs, NaN matching
// NaN and infinities matching exactly.
func near(got, want float32, rel, abs float64) bool {
	g, w := float64(got), float64(want)
	switch {
	case math.IsNaN(w) || math.IsNaN(g):
		return math.IsNaN(w) && math.IsNaN(g)
	case math.IsInf(w, 0) || math.IsInf(g, 0):
		return g == w
	}
	return math.Abs(g-w) <= rel*math.Abs(w)+abs
}

// withGuard returns a slice of n elements followed by the guard value.
func withGuard(n int) []float32 {
	d := make([]float32, n+1)
	d[n] = guard
	return d[:n]
}

func checkGuard(t *testing.T, what string, d []float32) {
	t.Helper()
	if d[:len(d)+1][len(d)] != guard {
		t.Fatalf("%s of %d wrote past its end", what, len(d))
	}
}

// geluTol is the tolerance of GELUTanh at x (see the budgets above).
func geluTol(x float32) (rel, abs float64) {
	f := float64(x)
	v := 2 * math.Sqrt(2/math.Pi) * (f + 0.044715*f*f*f)
	s := 1 / (1 + math.Exp(v)) // e/(1+e) with e = exp(-v)
	return siluTolerance + geluArgTolerance*math.Abs(v)*s, 2.3e-16 * math.Abs(f)
}

func TestOverlaysAct(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, o := range supported(t) {
		for n := 0; n <= 300; n++ {
			for _, scale := range []float32{1, 5, 30} {
				x := actInputs(r, n, scale, scale == 30 || n%7 == 0)
				y := actInputs(r, n, 1, false)
				want, got := make([]float32, n), withGuard(n)
				unary := []struct {
					name string
					f, g func(dst, x []float32)
				}{{"SiLU", o.SiLU, siluGeneric}, {"GELUTanh", o.GELUTanh, geluTanhGeneric}}
				for _, u := range unary {
					if u.f == nil {
						continue
					}
					u.g(want, x)
					u.f(got, x)
					checkGuard(t, o.Name+" "+u.name, got)
					for i := range n {
						rel, abs := siluTolerance, 0.0
						if u.name == "GELUTanh" {
							rel, abs = geluTol(x[i])
						}
						if !near(got[i], want[i], rel, abs) {
							t.Fatalf("%s %s of %d (scale %g): [%d] of %g = %g, want %g", o.Name, u.name, n, scale, i, x[i], got[i], want[i])
						}
					}
				}
				if o.SiLUMul != nil {
					siluMulGeneric(want, x, y)
					o.SiLUMul(got, x, y)
					checkGuard(t, o.Name+" SiLUMul", got)
					for i := range n {
						if !near(got[i], want[i], siluTolerance, 0) {
							t.Fatalf("%s SiLUMul of %d: [%d] of %g, %g = %g, want %g", o.Name, n, i, x[i], y[i], got[i], want[i])
						}
					}
				}
				if o.ExpSub != nil {
					checkExpSub(t, o, x, n, scale)
				}
				if o.Max != nil && !slices.ContainsFunc(x[:n], func(v float32) bool { return v != v }) {
					// Exact: the largest element whatever the order
					// (a NaN's result is left open).
					if got, want := o.Max(x[:n]), maxGeneric(x[:n]); got != want {
						t.Fatalf("%s Max of %d (scale %g): %g, want %g", o.Name, n, scale, got, want)
					}
				}
				exact := []struct {
					name string
					f, g func(dst, a, b []float32)
				}{{"Mul", o.Mul, mulGeneric}, {"Add", o.Add, addGeneric}}
				s := float32(r.NormFloat64())
				exact = append(exact, struct {
					name string
					f, g func(dst, a, b []float32)
				}{"Scale", nil, func(d, a, _ []float32) { scaleGeneric(d, a, s) }})
				if o.Scale != nil {
					exact[2].f = func(d, a, _ []float32) { o.Scale(d, a, s) }
				}
				for _, e := range exact {
					if e.f == nil {
						continue
					}
					e.g(want, x, y)
					e.f(got, x, y)
					checkGuard(t, o.Name+" "+e.name, got)
					for i := range n {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("%s %s of %d: [%d] of %g, %g = %g, want %g", o.Name, e.name, n, i, x[i], y[i], got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// checkExpSub runs o.ExpSub on a copy of x with m its largest non-NaN
// value against the generic version.
func checkExpSub(t *testing.T, o Overlay, x []float32, n int, scale float32) {
	t.Helper()
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v) // NaN compares false
	}
	if math.IsInf(float64(m), 0) {
		m = 0
	}
	want := append([]float32(nil), x...)
	got := append(withGuard(n)[:0], x...)
	ws := expSubGeneric(want, m)
	gs := o.ExpSub(got, m)
	checkGuard(t, o.Name+" ExpSub", got)
	for i := range n {
		if !near(got[i], want[i], expTolerance, expFlush) {
			t.Fatalf("%s ExpSub of %d (scale %g, m %g): [%d] of %g = %g, want %g", o.Name, n, scale, m, i, x[i], got[i], want[i])
		}
	}
	if !near(gs, ws, float64(n+2)*0x1p-23, 0) {
		t.Fatalf("%s ExpSub of %d (scale %g): sum %g, want %g", o.Name, n, scale, gs, ws)
	}
}

// TestOverlaysExpAccuracy checks the overlays' exp (ExpSub with m = 0)
// against float64 exp over [-88, 88]: an even sweep and random points,
// with the exact specials of the range's ends.
func TestOverlaysExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const n = 1 << 18
	x := make([]float32, n)
	for i := range x {
		if i%2 == 0 {
			x[i] = -88 + 176*float32(i)/n
		} else {
			x[i] = float32(r.Float64()*176 - 88)
		}
	}
	x[0], x[1], x[2], x[3] = -88, 88, 0, -0x1p-30
	for _, o := range supported(t) {
		if o.ExpSub == nil {
			continue
		}
		y := append([]float32(nil), x...)
		o.ExpSub(y, 0)
		var worst float64
		for i, v := range x {
			e := math.Exp(float64(v))
			d := math.Abs(float64(y[i]) - e)
			if d > expTolerance*e+expFlush {
				t.Fatalf("%s: exp(%g) = %g, want %g (relative error %.3g)", o.Name, v, y[i], e, d/e)
			}
			if e >= 0x1p-126 {
				worst = max(worst, d/e)
			}
		}
		t.Logf("%s: exp over [-88, 88]: largest relative error %.3g (normal results)", o.Name, worst)
		// Past the ends: 0 below, +Inf above, NaN kept; at the flush's
		// edge either side of -87, the exponential or (below) 0.
		z := []float32{-1e30, -104, -105, float32(math.Inf(-1)), 89, 100, 1e30, float32(math.Inf(1)), float32(math.NaN()),
			-87.0001, -88, -86.9999, -87, -1e30, -1e30, -1e30}
		edge := slices.Clone(z[9:13])
		o.ExpSub(z, 0)
		for i, v := range edge {
			e, g := math.Exp(float64(v)), float64(z[9+i])
			if d := math.Abs(g - e); d > expTolerance*e+expFlush || v >= -87 && d > expTolerance*e {
				t.Fatalf("%s: exp(%g) = %g, want %g", o.Name, v, g, e)
			}
		}
		for i, want := range []float64{0, 0, 0, 0, math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1), math.NaN()} {
			if g := float64(z[i]); g != want && !(math.IsNaN(g) && math.IsNaN(want)) {
				t.Fatalf("%s: exp special %d: %g, want %g", o.Name, i, g, want)
			}
		}
	}
}

// TestActInPlace runs the exported functions with dst the input, as
// callers do, against the generic versions.
func TestActInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const n = 203
	x := randFloats(r, n, 4)
	y := randFloats(r, n, 1)
	for _, c := range []struct {
		name     string
		f, g     func(d []float32)
		rel, abs float64
	}{
		{"SiLU", func(d []float32) { SiLU(d, d) }, func(d []float32) { siluGeneric(d, d) }, siluTolerance, 0},
		{"SiLUMul", func(d []float32) { SiLUMul(d, d, y) }, func(d []float32) { siluMulGeneric(d, d, y) }, siluTolerance, 0},
		{"ExpSub", func(d []float32) { ExpSub(d, 20) }, func(d []float32) { expSubGeneric(d, 20) }, expTolerance, expFlush},
		{"GELUTanh", func(d []float32) { GELUTanh(d, d) }, func(d []float32) { geluTanhGeneric(d, d) }, 1e-5, 1e-14},
		{"Scale", func(d []float32) { Scale(d, d, 0.3) }, func(d []float32) { scaleGeneric(d, d, 0.3) }, 0, 0},
		{"Mul", func(d []float32) { Mul(d, d, y) }, func(d []float32) { mulGeneric(d, d, y) }, 0, 0},
		{"Add", func(d []float32) { Add(d, y, d) }, func(d []float32) { addGeneric(d, y, d) }, 0, 0},
	} {
		got, want := append([]float32(nil), x...), append([]float32(nil), x...)
		c.f(got)
		c.g(want)
		for i := range n {
			if !near(got[i], want[i], c.rel, c.abs) {
				t.Fatalf("%s in place (%s): [%d] of %g = %g, want %g", c.name, Active(), i, x[i], got[i], want[i])
			}
		}
	}
}

// TestOverlaysRotate checks each overlay's Rotate against the generic
// version bit for bit (both round each product before the sum): every
// length to 130, the four inputs at unaligned starts, a and b halves of
// one head as RoPE passes them, values of several scales with the
// specials planted, and a guard after each output.
func TestOverlaysRotate(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, o := range supported(t) {
		if o.Rotate == nil {
			continue
		}
		for n := 0; n <= 130; n++ {
			for _, scale := range []float32{1, 300} {
				head := actInputs(r, 2*n, scale, n%5 == 0)
				angles := actInputs(r, n, 3, false)
				cos, sin := make([]float32, n), make([]float32, n)
				for i, v := range angles {
					cos[i], sin[i] = float32(math.Cos(float64(v))), float32(math.Sin(float64(v)))
				}
				wa, wb := slices.Clone(head[:n]), slices.Clone(head[n:])
				rotateGeneric(wa, wb, cos, sin)
				ga, gb := append(withGuard(n)[:0], head[:n]...), append(withGuard(n)[:0], head[n:]...)
				o.Rotate(ga, gb, cos, sin)
				checkGuard(t, o.Name+" Rotate a", ga)
				checkGuard(t, o.Name+" Rotate b", gb)
				for i := range n {
					for _, p := range [][2]float32{{ga[i], wa[i]}, {gb[i], wb[i]}} {
						if math.Float32bits(p[0]) != math.Float32bits(p[1]) && !(p[0] != p[0] && p[1] != p[1]) {
							t.Fatalf("%s Rotate of %d (scale %g): [%d] of (%g, %g) by (%g, %g) = (%g, %g), want (%g, %g)",
								o.Name, n, scale, i, head[i], head[n+i], cos[i], sin[i], ga[i], gb[i], wa[i], wb[i])
						}
					}
				}
			}
		}
	}
}

// TestRotateMeaning: rotating (1, 0) by an angle gives its cosine and
// sine, and a rotation by -theta after one by theta returns the pair
// within rounding.
func TestRotateMeaning(t *testing.T) {
	const n = 37
	a, b := make([]float32, n), make([]float32, n)
	cos, sin := make([]float32, n), make([]float32, n)
	for i := range n {
		th := 0.17 * float64(i)
		a[i], cos[i], sin[i] = 1, float32(math.Cos(th)), float32(math.Sin(th))
	}
	Rotate(a, b, cos, sin)
	for i := range n {
		if a[i] != cos[i] || b[i] != sin[i] {
			t.Fatalf("(1, 0) rotated by %g: (%g, %g), want (%g, %g)", 0.17*float64(i), a[i], b[i], cos[i], sin[i])
		}
		sin[i] = -sin[i]
	}
	Rotate(a, b, cos, sin)
	for i := range n {
		if math.Abs(float64(a[i])-1) > 1e-6 || math.Abs(float64(b[i])) > 1e-6 {
			t.Fatalf("rotated back [%d]: (%g, %g), want (1, 0)", i, a[i], b[i])
		}
	}
}
