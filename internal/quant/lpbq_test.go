package quant

import (
	"math"
	"strings"
	"testing"
)

// refLPBQ is a straightforward implementation of the published LPBQ rule,
// written independently of lpbq.go, all arithmetic in float64 from the
// float32 inputs, S stored as float32 and k computed against the stored S:
//
//	s_b = max|w_b|/7; S = float32(max_b s_b / 16); k_b = clamp(round(s_b/S), 1, 16)
//	q = clamp(round(w/s_b), -7, 7)   (q = 0 where s_b = 0; k = 1 where S = 0)
func refLPBQ(w []float32, rows, cols, B int) (q []int8, k []uint8, S []float32) {
	nb := (cols + B - 1) / B
	q, k, S = make([]int8, rows*cols), make([]uint8, rows*nb), make([]float32, rows)
	for r := 0; r < rows; r++ {
		s := make([]float64, nb)
		smax := 0.0
		for c := 0; c < cols; c++ {
			a := math.Abs(float64(w[r*cols+c]))
			if a > s[c/B] {
				s[c/B] = a
			}
		}
		for b := range s {
			s[b] /= 7
			if s[b] > smax {
				smax = s[b]
			}
		}
		S[r] = float32(smax / 16)
		for b := range s {
			kb := 1.0
			if S[r] != 0 {
				kb = math.Min(16, math.Max(1, math.RoundToEven(s[b]/float64(S[r]))))
			}
			k[r*nb+b] = uint8(kb)
		}
		for c := 0; c < cols; c++ {
			if s[c/B] == 0 {
				continue
			}
			v := math.RoundToEven(float64(w[r*cols+c]) / s[c/B])
			q[r*cols+c] = int8(math.Min(7, math.Max(-7, v)))
		}
	}
	return q, k, S
}

// lpbqCases are shapes and data the LPBQ tests run on: N(0,1) weights, the
// shipped block sizes, a K that no block divides (172, the stories260K FFN
// width), a block of zeros and a row of zeros.
func lpbqCases() []struct {
	name            string
	w               []float32
	rows, cols, blk int
} {
	type c = struct {
		name            string
		w               []float32
		rows, cols, blk int
	}
	zeros := gaussian(7, 8*128, 1)
	clear(zeros[0:32])          // first block of row 0
	clear(zeros[128*3 : 128*4]) // all of row 3
	return []c{
		{"gauss-b16", gaussian(1, 64*256, 1), 64, 256, 16},
		{"gauss-b32", gaussian(2, 64*256, 1), 64, 256, 32},
		{"gauss-b64", gaussian(3, 64*256, 1), 64, 256, 64},
		{"gauss-b128", gaussian(4, 32*256, 1), 32, 256, 128},
		{"outliers-b32", withOutliers(gaussian(5, 64*256, 0.02), 6, 0.01, 20), 64, 256, 32},
		{"k172-b32", gaussian(8, 16*172, 1), 16, 172, 32},
		{"k172-b64", gaussian(9, 16*172, 1), 16, 172, 64},
		{"zeros-b32", zeros, 8, 128, 32},
	}
}

func TestLPBQReferenceBitExact(t *testing.T) {
	for _, tc := range lpbqCases() {
		got, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, LPBQReference)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		q, k, S := refLPBQ(tc.w, tc.rows, tc.cols, tc.blk)
		for i := range q {
			if got.Q[i] != q[i] {
				t.Fatalf("%s: q[%d,%d] = %d, reference rule gives %d", tc.name, i/tc.cols, i%tc.cols, got.Q[i], q[i])
			}
		}
		for i := range k {
			if got.Codes[i] != k[i] {
				t.Fatalf("%s: code %d = %d, reference rule gives %d", tc.name, i, got.Codes[i], k[i])
			}
		}
		for i := range S {
			if math.Float32bits(got.Scales[i]) != math.Float32bits(S[i]) {
				t.Fatalf("%s: S[%d] = %v, reference rule gives %v", tc.name, i, got.Scales[i], S[i])
			}
		}
	}
}

// TestLPBQInvariants: ints in -7..7, codes in 1..16 (16 on each non-zero
// row's largest block), and Dequantize equal bit for bit to float32(q*k)*S.
func TestLPBQInvariants(t *testing.T) {
	for _, tc := range lpbqCases() {
		for _, mode := range []LPBQMode{LPBQReference, LPBQRefined} {
			got, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, mode)
			if err != nil {
				t.Fatal(err)
			}
			nb := got.BlocksPerRow()
			if len(got.Codes) != tc.rows*nb || len(got.Scales) != tc.rows || len(got.Q) != tc.rows*tc.cols {
				t.Fatalf("%s/%s: sizes q=%d codes=%d scales=%d", tc.name, mode, len(got.Q), len(got.Codes), len(got.Scales))
			}
			for i, v := range got.Q {
				if v < -7 || v > 7 {
					t.Fatalf("%s/%s: q[%d] = %d outside -7..7", tc.name, mode, i, v)
				}
			}
			for r := range tc.rows {
				has16 := false
				for b := range nb {
					k := got.Codes[r*nb+b]
					if k < 1 || k > 16 {
						t.Fatalf("%s/%s: code[%d,%d] = %d outside 1..16", tc.name, mode, r, b, k)
					}
					has16 = has16 || k == 16
				}
				if got.Scales[r] != 0 && !has16 {
					t.Errorf("%s/%s: row %d has no block with code 16", tc.name, mode, r)
				}
			}
			deq := got.Dequantize()
			for i, v := range deq {
				r, c := i/tc.cols, i%tc.cols
				want := float32(int32(got.Q[i])*int32(got.Codes[r*nb+c/tc.blk])) * got.Scales[r]
				if math.Float32bits(v) != math.Float32bits(want) {
					t.Fatalf("%s/%s: w'[%d,%d] = %v, q*k*S = %v", tc.name, mode, r, c, v, want)
				}
				// q*k*S is exact in float64 (7 + 24 significant bits), so
				// w' must be its single rounding to float32.
				exact := float64(got.Q[i]) * float64(got.Codes[r*nb+c/tc.blk]) * float64(got.Scales[r])
				if v != float32(exact) {
					t.Fatalf("%s/%s: w'[%d,%d] = %v is not float32(q*k*S) = %v", tc.name, mode, r, c, v, float32(exact))
				}
			}
		}
	}
}

// TestLPBQZeros: zero blocks get k = 1 and q = 0, zero rows S = 0; nothing
// is NaN.
func TestLPBQZeros(t *testing.T) {
	tc := lpbqCases()[7]
	for _, mode := range []LPBQMode{LPBQReference, LPBQRefined} {
		got, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, mode)
		if err != nil {
			t.Fatal(err)
		}
		nb := got.BlocksPerRow()
		if got.Codes[0] != 1 {
			t.Errorf("%s: zero block code = %d, want 1", mode, got.Codes[0])
		}
		if got.Scales[3] != 0 {
			t.Errorf("%s: zero row S = %v, want 0", mode, got.Scales[3])
		}
		for b := range nb {
			if got.Codes[3*nb+b] != 1 {
				t.Errorf("%s: zero row code %d = %d, want 1", mode, b, got.Codes[3*nb+b])
			}
		}
		for c := range 32 {
			if got.Q[c] != 0 || got.Q[3*tc.cols+c] != 0 {
				t.Fatalf("%s: zero weights quantized to non-zero", mode)
			}
		}
		for i, v := range got.Dequantize() {
			if v != v || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: w'[%d] = %v", mode, i, v)
			}
			if (i < 32 || (i >= 3*tc.cols && i < 4*tc.cols)) && v != 0 {
				t.Fatalf("%s: zero weight %d dequantizes to %v", mode, i, v)
			}
		}
	}
	all, err := QuantizeLPBQ(make([]float32, 4*64), 4, 64, 32, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all.Dequantize() {
		if v != 0 {
			t.Fatalf("all-zero matrix dequantizes to %v", v)
		}
	}
}

// TestLPBQRefinedNotWorse: on every row of random Gaussian weights Refined's
// squared error is <= Reference's; in fact per element, since Refined picks
// the nearest grid point of the same grid {-7..7}*k*S. Also checked by brute
// force against every grid point. The improvement is measured and logged.
func TestLPBQRefinedNotWorse(t *testing.T) {
	for _, tc := range lpbqCases() {
		ref, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, LPBQReference)
		if err != nil {
			t.Fatal(err)
		}
		fin, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, LPBQRefined)
		if err != nil {
			t.Fatal(err)
		}
		nb := fin.BlocksPerRow()
		for i := range ref.Codes {
			if ref.Codes[i] != fin.Codes[i] {
				t.Fatalf("%s: modes disagree on code %d", tc.name, i)
			}
		}
		dr, df := ref.Dequantize(), fin.Dequantize()
		improved := 0
		for r := range tc.rows {
			var er, ef float64
			for c := range tc.cols {
				i := r*tc.cols + c
				a := math.Abs(float64(tc.w[i]) - float64(dr[i]))
				b := math.Abs(float64(tc.w[i]) - float64(df[i]))
				er, ef = er+a*a, ef+b*b
				step := float64(fin.Codes[r*nb+c/tc.blk]) * float64(fin.Scales[r])
				if !within(b, a, step) {
					t.Fatalf("%s: w[%d,%d]: refined error %g > reference %g", tc.name, r, c, b, a)
				}
				for j := -7; j <= 7; j++ {
					g := math.Abs(float64(tc.w[i]) - float64(float32(int32(j)*int32(fin.Codes[r*nb+c/tc.blk]))*fin.Scales[r]))
					if !within(b, g, step) {
						t.Fatalf("%s: w[%d,%d]: grid point %d is closer (%g < %g)", tc.name, r, c, j, g, b)
					}
				}
			}
			if ef > er*(1+relTol) {
				t.Fatalf("%s: row %d: refined SSE %g > reference %g", tc.name, r, ef, er)
			}
			if ef < er {
				improved++
			}
		}
		sr, _ := ref.Error(tc.w)
		sf, _ := fin.Error(tc.w)
		t.Logf("%s: reference %v | refined %v | rows improved %d/%d", tc.name, sr, sf, improved, tc.rows)
		if strings.HasPrefix(tc.name, "gauss") && improved == 0 {
			t.Errorf("%s: refinement improved no row of N(0,1) weights", tc.name)
		}
	}
}

// TestLPBQErrorBudget asserts a per-block bound on the max error, derived
// from the rule. In a block with scale s, code k and d = k*S:
//
//	Reference: q = round(w/s) with |w| <= 7s, so |w - q*s| <= s/2 and
//	  |w - q*d| <= |w - q*s| + |q|*|s - d| <= s/2 + 7|s - d|.
//	Refined: q is the nearest point of {-7..7}*d. If |w| <= 7.5d the error is
//	  at most d/2; otherwise q = +-7 and the error is |w| - 7d <= 7(s - d).
//	  So max err <= max(d/2, 7(s - d)).
//
// and |s - d| <= max(S/2, S - s) since k is s/S rounded and clamped to >= 1.
func TestLPBQErrorBudget(t *testing.T) {
	for _, tc := range lpbqCases() {
		for _, mode := range []LPBQMode{LPBQReference, LPBQRefined} {
			got, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, mode)
			if err != nil {
				t.Fatal(err)
			}
			nb := got.BlocksPerRow()
			deq := got.Dequantize()
			var worst float64 // max over blocks of err / budget
			for r := range tc.rows {
				S := float64(got.Scales[r])
				for b := range nb {
					lo, hi := r*tc.cols+b*tc.blk, r*tc.cols+min((b+1)*tc.blk, tc.cols)
					s := absMax(tc.w[lo:hi]) / 7
					d := float64(got.Codes[r*nb+b]) * S
					if math.Abs(s-d) > math.Max(S/2, S-s)*(1+relTol) {
						t.Fatalf("%s/%s: block [%d,%d]: |s - kS| = %g > max(S/2, S-s)", tc.name, mode, r, b, math.Abs(s-d))
					}
					budget := s/2 + 7*math.Abs(s-d)
					if mode == LPBQRefined {
						budget = math.Max(d/2, 7*(s-d))
					}
					var maxErr float64
					for i := lo; i < hi; i++ {
						maxErr = math.Max(maxErr, math.Abs(float64(tc.w[i])-float64(deq[i])))
					}
					if !within(maxErr, budget, 7*s) {
						t.Fatalf("%s/%s: block [%d,%d]: max err %g > budget %g (s=%g kS=%g)", tc.name, mode, r, b, maxErr, budget, s, d)
					}
					if budget > 0 {
						worst = math.Max(worst, maxErr/budget)
					}
				}
			}
			t.Logf("%s/%s: max err / budget = %.3f", tc.name, mode, worst)
		}
	}
}

// TestLPBQPadding: a K that the block does not divide quantizes exactly as
// the same rows padded with zeros to whole blocks, and says it was padded.
func TestLPBQPadding(t *testing.T) {
	const rows, cols, blk = 16, 172, 32
	if BlockDivides(cols, blk) || !BlockDivides(192, blk) || BlockDivides(cols, 0) {
		t.Fatal("BlockDivides wrong")
	}
	w := gaussian(11, rows*cols, 1)
	padW := make([]float32, rows*192)
	for r := range rows {
		copy(padW[r*192:], w[r*cols:(r+1)*cols])
	}
	for _, mode := range []LPBQMode{LPBQReference, LPBQRefined} {
		got, err := QuantizeLPBQ(w, rows, cols, blk, mode)
		if err != nil {
			t.Fatal(err)
		}
		pad, err := QuantizeLPBQ(padW, rows, 192, blk, mode)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Padded || pad.Padded {
			t.Fatalf("%s: Padded = %v / %v, want true / false", mode, got.Padded, pad.Padded)
		}
		if got.BlocksPerRow() != 6 {
			t.Fatalf("blocks per row = %d, want 6", got.BlocksPerRow())
		}
		for r := range rows {
			for c := range cols {
				if got.Q[r*cols+c] != pad.Q[r*192+c] {
					t.Fatalf("%s: q[%d,%d] differs from the zero-padded matrix", mode, r, c)
				}
			}
			for c := cols; c < 192; c++ {
				if pad.Q[r*192+c] != 0 {
					t.Fatalf("%s: zero padding quantized to %d", mode, pad.Q[r*192+c])
				}
			}
		}
		for i := range got.Codes {
			if got.Codes[i] != pad.Codes[i] {
				t.Fatalf("%s: code %d differs from the zero-padded matrix", mode, i)
			}
		}
		for i := range got.Scales {
			if got.Scales[i] != pad.Scales[i] {
				t.Fatalf("%s: S[%d] differs from the zero-padded matrix", mode, i)
			}
		}
	}
}

func TestLPBQBadInput(t *testing.T) {
	w := gaussian(1, 4*64, 1)
	nan := append([]float32(nil), w...)
	nan[70] = float32(math.NaN())
	inf := append([]float32(nil), w...)
	inf[3] = float32(math.Inf(-1))
	huge := append([]float32(nil), w...)
	huge[5] = 1e38
	for _, tc := range []struct {
		name       string
		w          []float32
		rows, cols int
		blk        int
		mode       LPBQMode
		want       string
	}{
		{"short", w[:100], 4, 64, 32, "", "100 values for shape [4, 64]"},
		{"negative", w, -4, 64, 32, "", "negative shape"},
		{"overflow", w, 1 << 40, 1 << 40, 32, "", "too large"},
		{"over the bound", w, MaxElements/64 + 1, 64, 32, "", "too large"},
		// a table past 2^31 values (Gemma 4 E2B's per-layer embedding) is
		// within the bound: only the missing values are refused
		{"large table", w, 262144, 8960, 32, "", "256 values for shape [262144, 8960]"},
		{"nan", nan, 4, 64, 32, "", "weight [1, 6]"},
		{"inf", inf, 4, 64, 32, "", "weight [0, 3]"},
		{"huge", huge, 4, 64, 32, "", "exceeds"},
		{"block0", w, 4, 64, 0, "", "block size 0"},
		{"mode", w, 4, 64, 32, "fast", `unknown mode "fast"`},
	} {
		_, err := QuantizeLPBQ(tc.w, tc.rows, tc.cols, tc.blk, tc.mode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	// an empty matrix is fine
	if q, err := QuantizeLPBQ(nil, 0, 64, 32, ""); err != nil || len(q.Dequantize()) != 0 {
		t.Errorf("empty matrix: %v", err)
	}
}
