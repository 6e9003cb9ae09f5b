package quant

import (
	"math"
	"testing"
)

// q4Data are the matrices the q4 and HQQ tests use (64 x 256).
func q4Data() map[string][]float32 {
	w := gaussian(31, 64*256, 1)
	clear(w[256*2 : 256*2+64]) // zero groups
	for i := 256 * 7; i < 256*7+32; i++ {
		w[i] = 0.25 // a constant group
	}
	for i := 256 * 9; i < 256*9+32; i++ {
		w[i] = -3 // a negative constant group
	}
	pos := gaussian(33, 64*256, 1)
	for i := range pos {
		pos[i] = float32(math.Abs(float64(pos[i]))) + 1 // all positive: zero point < 0
	}
	return map[string][]float32{
		"gauss":    w,
		"outliers": withOutliers(gaussian(32, 64*256, 0.02), 34, 0.01, 20),
		"positive": pos,
	}
}

// TestQ4ErrorBound: symmetric values in -8..7 (-7..7 without HQQ), asymmetric
// in 0..15; |w - w'| <= s/2 for every weight, s the group's scale. For the
// asymmetric form every weight lies within the group's [min, max], which the
// integer zero point covers to within half a step.
func TestQ4ErrorBound(t *testing.T) {
	for name, w := range q4Data() {
		for _, g := range []int{32, 64, 128} {
			for _, sym := range []bool{true, false} {
				q, err := QuantizeQ4(w, 64, 256, Q4Options{Group: g, Sym: sym})
				if err != nil {
					t.Fatal(err)
				}
				ng := q.BlocksPerRow()
				if len(q.Scales) != 64*ng || (sym != (q.Zeros == nil)) {
					t.Fatalf("%s g%d sym=%v: %d scales, zeros %v", name, g, sym, len(q.Scales), q.Zeros != nil)
				}
				deq := q.Dequantize()
				for i, v := range q.Q {
					lo, hi := int8(0), int8(15)
					if sym {
						lo, hi = -7, 7
					}
					if v < lo || v > hi {
						t.Fatalf("%s g%d sym=%v: q[%d] = %d outside %d..%d", name, g, sym, i, v, lo, hi)
					}
					gi := i/256*ng + i%256/g
					s := float64(q.Scales[gi])
					if sym && s != float64(float32(absMax(w[i/g*g:i/g*g+g])/7)) {
						t.Fatalf("%s g%d: scale %g is not amax/7", name, g, s)
					}
					if !sym && q.Zeros[gi] != float32(math.Round(float64(q.Zeros[gi]))) {
						t.Fatalf("%s g%d: zero point %v not an integer without HQQ", name, g, q.Zeros[gi])
					}
					if e := math.Abs(float64(w[i]) - float64(deq[i])); !within(e, s/2, 16*s) {
						t.Fatalf("%s g%d sym=%v: w[%d] = %v error %g > s/2 = %g", name, g, sym, i, w[i], e, s/2)
					}
				}
			}
		}
	}
}

// TestQ4Constant: constant and zero groups come back exactly (up to the
// float32 rounding of 15*(c/15)).
func TestQ4Constant(t *testing.T) {
	w := q4Data()["gauss"]
	for _, sym := range []bool{true, false} {
		q, err := QuantizeQ4(w, 64, 256, Q4Options{Group: 32, Sym: sym})
		if err != nil {
			t.Fatal(err)
		}
		deq := q.Dequantize()
		for _, span := range [][2]int{{256 * 2, 256*2 + 64}, {256 * 7, 256*7 + 32}, {256 * 9, 256*9 + 32}} {
			for i := span[0]; i < span[1]; i++ {
				if math.Abs(float64(deq[i]-w[i])) > 1e-6*math.Abs(float64(w[i])) {
					t.Fatalf("sym=%v: constant group value %v -> %v", sym, w[i], deq[i])
				}
			}
		}
	}
}

// TestQ4Padding: K = 172 with G = 32 gives 6 groups, the last of 12 values,
// marked Padded, and the bound still holds.
func TestQ4Padding(t *testing.T) {
	w := gaussian(41, 8*172, 1)
	for _, sym := range []bool{true, false} {
		for _, hqq := range []bool{false, true} {
			q, err := QuantizeQ4(w, 8, 172, Q4Options{Group: 32, Sym: sym, HQQ: hqq})
			if err != nil {
				t.Fatal(err)
			}
			if !q.Padded || q.BlocksPerRow() != 6 || len(q.Scales) != 48 {
				t.Fatalf("sym=%v: padded=%v groups=%d scales=%d", sym, q.Padded, q.BlocksPerRow(), len(q.Scales))
			}
			last := w[172-12 : 172] // row 0, group 5: 12 real values
			if want := float32(absMax(last) / 7); sym && !hqq && q.Scales[5] != want {
				t.Fatalf("last group scale %v, want amax/7 of its 12 values = %v", q.Scales[5], want)
			}
			deq := q.Dequantize()
			for i := 160; i < 172; i++ {
				if e := math.Abs(float64(w[i] - deq[i])); !hqq && !within(e, float64(q.Scales[5])/2, 16*float64(q.Scales[5])) {
					t.Fatalf("sym=%v: padded group error %g > s/2", sym, e)
				}
			}
		}
	}
	if _, err := QuantizeQ4(w, 8, 172, Q4Options{Group: 0}); err == nil {
		t.Error("group 0 accepted")
	}
	if _, err := QuantizeQ4(w[:10], 8, 172, Q4Options{Group: 32}); err == nil {
		t.Error("short input accepted")
	}
}
