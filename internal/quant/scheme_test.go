package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSchemeTableComplete: every registered scheme has every part of its
// entry, a layout, and a recipe spelling that round-trips.
func TestSchemeTableComplete(t *testing.T) {
	want := []Kind{KindF16, KindLPBQ, KindLPBQ5, KindQ4, KindQ4K, KindQ6K, KindW8}
	got := Schemes()
	if len(got) != len(want) {
		t.Fatalf("%d schemes registered, want %d", len(got), len(want))
	}
	for i, s := range got {
		if s.Kind != want[i] {
			t.Errorf("scheme %d is %q, want %q", i, s.Kind, want[i])
		}
		if missing := s.Missing(); missing != "" {
			t.Errorf("%s: entry has no %s", s.Kind, missing)
		}
		if s.Blocks != nil && !slicesContains(s.Blocks, s.DefaultBlock) {
			t.Errorf("%s: default block %d is not one of %v", s.Kind, s.DefaultBlock, s.Blocks)
		}
		if s.BlockPacked != (strings.HasSuffix(s.Layout, "-p") && s.Super == 0) {
			t.Errorf("%s: BlockPacked %v for layout %s", s.Kind, s.BlockPacked, s.Layout)
		}
		if info, ok := Lookup(s.Kind); !ok || info != s {
			t.Errorf("%s: Lookup does not find the entry", s.Kind)
		}
		sc := Scheme{Kind: s.Kind, Block: s.DefaultBlock}
		if err := sc.valid(); err != nil {
			t.Errorf("%s: the default scheme is not valid: %v", s.Kind, err)
		}
		if err := sc.Validate(); (err == nil) != s.Recipe {
			t.Errorf("%s: recipe %v, Validate says %v", s.Kind, s.Recipe, err)
		}
	}
	if _, ok := Lookup("q3"); ok {
		t.Error("Lookup found an unregistered scheme")
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSchemeRoundTrip: each scheme's reference quantizer, then its
// dequantization, gives standard normal weights back within the entry's
// Tolerance (relative L2 error), and no worse than 1/8 of it better: a
// tolerance far above the error would test nothing.
func TestSchemeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 4))
	const rows, cols = 8, 512
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for _, s := range Schemes() {
		t.Run(string(s.Kind), func(t *testing.T) {
			sc := Scheme{Kind: s.Kind, Block: s.DefaultBlock}
			if s.Kind == KindQ4 {
				for _, sym := range []bool{true, false} {
					sc.Sym = sym
					roundTrip(t, w, rows, cols, sc, s.Tolerance)
				}
				return
			}
			roundTrip(t, w, rows, cols, sc, s.Tolerance)
		})
	}
}

func roundTrip(t *testing.T, w []float32, rows, cols int, sc Scheme, tol float64) {
	t.Helper()
	q, err := Quantize(w, rows, cols, sc)
	if err != nil {
		t.Fatal(err)
	}
	if q.Scheme.Kind != sc.Kind || q.Rows != rows || q.Cols != cols {
		t.Fatalf("%v: got scheme %v of [%d, %d]", sc, q.Scheme, q.Rows, q.Cols)
	}
	st, err := Compare(w, q.Dequantize())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: relative error %.4g (tolerance %.4g)", sc, st.Relative, tol)
	if st.Relative > tol || st.Relative < tol/8 {
		t.Errorf("%v: relative error %.4g, want in [%.4g, %.4g]", sc, st.Relative, tol/8, tol)
	}
	if byRow, _ := q.Error(w); byRow != st {
		t.Errorf("%v: Error %v, Compare %v", sc, byRow, st)
	}
	if b := q.BitsPerWeight(); !(b > 0 && b <= 16) || math.IsNaN(b) {
		t.Errorf("%v: %g bits a weight", sc, b)
	}
}

// TestQ4KRefusals: q4k needs whole super-blocks, and recipes cannot
// choose it.
func TestQ4KRefusals(t *testing.T) {
	if _, err := QuantizeQ4K(make([]float32, 2*288), 2, 288); err == nil {
		t.Error("q4k accepted rows of 288 inputs")
	}
	err := Scheme{Kind: KindQ4K, Block: 32}.Validate()
	if err == nil || !strings.Contains(err.Error(), "GGUF") {
		t.Errorf("a recipe chose q4k: %v", err)
	}
	if err := (Scheme{Kind: KindQ4K, Block: 64}).valid(); err == nil {
		t.Error("q4k accepted groups of 64")
	}
}

// TestQ4KRestates: a q4k weight's per-group scales and zero points stand
// for the values of its super-blocks, up to the float32 rounding of the
// zero point (what compile stores when the weight is not packed).
func TestQ4KRestates(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 44))
	const rows, cols = 4, 512
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64() + 0.5)
	}
	q, err := QuantizeQ4K(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	want := q.Dequantize()
	asQ4 := *q
	asQ4.Scheme, asQ4.K4 = Scheme{Kind: KindQ4, Block: 32}, nil
	for i, v := range asQ4.Dequantize() {
		if d := math.Abs(float64(v - want[i])); d > 1e-6*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("weight %d: q4 restatement %g, q4k %g", i, v, want[i])
		}
	}
}

// TestFitWidth: a super-block scheme over a width it does not divide
// becomes W8, as quantize stores it; other schemes stay as they are.
func TestFitWidth(t *testing.T) {
	q6 := Scheme{Kind: KindQ6K}
	lp := Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}
	for _, tc := range []struct {
		s    Scheme
		cols int
		want Scheme
	}{
		{q6, 512, q6}, {q6, 192, Scheme{Kind: KindW8}}, {q6, 2048, q6},
		{lp, 192, lp}, {lp, 172, lp},
	} {
		if got := FitWidth(tc.s, tc.cols); got != tc.want {
			t.Errorf("FitWidth(%v, %d) = %v, want %v", tc.s, tc.cols, got, tc.want)
		}
	}
}
