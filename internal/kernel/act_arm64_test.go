//go:build !purego

package kernel

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fma32 is a*b+c rounded once to float32 (exactly, through big.Float for
// finite operands).
func fma32(a, b, c float32) float32 {
	for _, v := range []float32{a, b, c} {
		if math.IsInf(float64(v), 0) || v != v {
			return float32(math.FMA(float64(a), float64(b), float64(c)))
		}
	}
	x := new(big.Float).SetPrec(600).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// expModel is the kernels' exp step by step in plain Go (act_arm64.s,
// _gen/act.go): the NEON version must match it bit for bit.
func expModel(v float32) float32 {
	if v != v {
		return v
	}
	v = min(max(v, -104), 89)
	t := float32(v * float32(1/math.Ln2))
	n := int32(math.RoundToEven(float64(t)))
	t = float32(n)
	ln2hi := float32(math.Ln2)
	v = fma32(-t, ln2hi, v)
	v = fma32(-t, float32(math.Ln2-float64(ln2hi)), v)
	p := float32(1.0 / 5040)
	for _, c := range []float64{1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1} {
		p = fma32(p, v, float32(c))
	}
	n1 := n >> 1
	s1 := math.Float32frombits(uint32(n1<<23) + 0x3f800000)
	s2 := math.Float32frombits(uint32((n-n1)<<23) + 0x3f800000)
	return float32(float32(p*s1) * s2)
}

// sigmoidTimesModel is x/(1+exp(v)) as the kernels round it.
func sigmoidTimesModel(x, v float32) float32 {
	return float32(x / float32(1+expModel(v)))
}

func geluModel(x float32) float32 {
	a := fma32(float32(x*x), 0.044715, 1)
	a = float32(float32(x*a) * float32(-2*math.Sqrt(2/math.Pi)))
	return sigmoidTimesModel(x, a)
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestArm64ActFields checks that the neon overlay carries every
// elementwise kernel, so that the overlay tests exercise them.
func TestArm64ActFields(t *testing.T) {
	o := Overlays()[0]
	if o.SiLU == nil || o.SiLUMul == nil || o.ExpSub == nil || o.GELUTanh == nil || o.Scale == nil || o.Mul == nil || o.Add == nil {
		t.Fatalf("neon overlay lacks elementwise kernels: %+v", o)
	}
}

// TestArm64ActModel checks the NEON kernels bit for bit against the
// plain-Go model of their algorithm (the amd64 kernels' numerics), on
// random values over exp's whole range, subnormal results included, and
// the specials.
func TestArm64ActModel(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const n = 4000
	x := make([]float32, n)
	for i := range x {
		switch i % 3 {
		case 0:
			x[i] = float32(r.Float64()*220 - 115)
		case 1:
			x[i] = float32(r.NormFloat64() * 4)
		default:
			x[i] = float32(r.NormFloat64() * 0.01)
		}
	}
	copy(x, specials)
	copy(x[len(specials):], []float32{-103.9, -104, -104.1, -87.4, -95, -100, 88.7, 88.8, 89, -0x1p-30, 0x1p-30, 1e-40})
	up := randFloats(r, n, 1)
	e := append([]float32(nil), x...)
	expSubNEON(&e[0], 0, n)
	s := make([]float32, n)
	siluNEON(&s[0], &x[0], n)
	sm := make([]float32, n)
	siluMulNEON(&sm[0], &x[0], &up[0], n)
	g := make([]float32, n)
	geluTanhNEON(&g[0], &x[0], n)
	subnormal := 0
	for i, v := range x {
		if w := expModel(v); !sameBits(e[i], w) {
			t.Fatalf("exp(%g) = %g (%#x), model %g (%#x)", v, e[i], math.Float32bits(e[i]), w, math.Float32bits(w))
		} else if w != 0 && w < 0x1p-126 {
			subnormal++
		}
		if w := sigmoidTimesModel(v, -v); !sameBits(s[i], w) {
			t.Fatalf("silu(%g) = %g, model %g", v, s[i], w)
		}
		if w := float32(sigmoidTimesModel(v, -v) * up[i]); !sameBits(sm[i], w) {
			t.Fatalf("silu(%g)*%g = %g, model %g", v, up[i], sm[i], w)
		}
		if w := geluModel(v); !sameBits(g[i], w) {
			t.Fatalf("gelu(%g) = %g, model %g", v, g[i], w)
		}
	}
	if subnormal < 10 {
		t.Fatalf("only %d subnormal exp results tested", subnormal)
	}
	t.Logf("%d values bit for bit, %d subnormal exp results", n, subnormal)
}

// TestArm64ExpSubSum checks the kernel's sum against the float64 sum of
// the values it wrote, for every length through the pair loop and the
// single vector.
func TestArm64ExpSubSum(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	for n := 4; n <= 64; n += 4 {
		x := randFloats(r, n, 3)
		got := expSubNEON(&x[0], 1, n)
		var want float64
		for _, v := range x {
			want += float64(v)
		}
		if math.Abs(float64(got)-want) > float64(n)*0x1p-23*want {
			t.Fatalf("n %d: sum %g, want %g", n, got, want)
		}
	}
}
