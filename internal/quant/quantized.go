package quant

import (
	"fmt"
	"math"
)

// MaxWeight is the largest magnitude a weight may have. Larger (or non-finite)
// values are refused: no real checkpoint holds them, and products such as
// q*k*S could otherwise overflow float32.
const MaxWeight = 1e30

// Quantized is one weight W [N, K] (Rows = N, Cols = K) after quantization.
// Which fields are set depends on Scheme.Kind (nb = ceil(K/B) blocks per row,
// ng = ceil(K/G) groups per row):
//
//	lpbq: Q [N*K] in -7..7; Codes [N*nb] in 1..16; Scales [N] (S per row)
//	      w'[n,c] = float32(Q*Codes[n,c/B]) * Scales[n]
//	lpbq5: as lpbq with Q in -15..15 and B = 32
//	w8:   Q [N*K] in -127..127; Scales [N]
//	      w'[n,c] = float32(Q) * Scales[n]
//	q4:   Q [N*K] in -8..7 (Sym) or 0..15; Scales [N*ng]; Zeros [N*ng] (not Sym)
//	      w'[n,c] = (float32(Q) - Zeros[n,c/G]) * Scales[n,c/G]
//	q4k:  as q4 asymmetric with G = 32, plus K4, whose formula the
//	      weights are (Scales and Zeros restate it per group)
//	q6k:  Q [N*K] in -32..31; Sub [N*K/16]; Scales [N*K/256] (d per super-block)
//	      w'[n,c] = float32(d*float32(Sub[i/16])) * float32(Q[i])   i = n*K + c
//	f16:  Half [N*K]; w' = tensor.F16ToF32(Half)
type Quantized struct {
	Scheme Scheme
	Rows   int // N
	Cols   int // K
	// Padded reports that Block does not divide Cols: the last block of each
	// row is short, quantized as if padded with zeros.
	Padded bool
	Q      []int8    // [N*K] one integer per weight
	Codes  []uint8   // [N*nb] LPBQ block codes k
	Scales []float32 // [N] (lpbq, w8) or [N*ng] (q4)
	Zeros  []float32 // [N*ng] q4 asymmetric zero points, in quantized units
	Half   []uint16  // [N*K] f16 bits
	Sub    []int8    // [N*K/16] q6k sub-scales
	// K4, on a q4k weight, holds its Q4_K super-blocks; the weights are
	// K4's formula, which Scales and Zeros restate per group (up to the
	// float32 rounding of Zeros).
	K4 *Q4KBlocks
}

// BlocksPerRow returns the number of blocks (LPBQ) or groups (q4) in one row,
// counting a padded last block; 0 for schemes without blocks.
func (q *Quantized) BlocksPerRow() int {
	if q.Scheme.Block <= 0 {
		return 0
	}
	return (q.Cols + q.Scheme.Block - 1) / q.Scheme.Block
}

// Dequantize returns the float32 weights [N*K] that q stands for, using the
// formulas on Quantized.
func (q *Quantized) Dequantize() []float32 {
	out := make([]float32, q.Rows*q.Cols)
	for r := range q.Rows {
		q.dequantizeRow(r, out[r*q.Cols:(r+1)*q.Cols])
	}
	return out
}

// dequantizeRow writes row r of the dequantized weights to row [K], by
// the rule of q's scheme.
func (q *Quantized) dequantizeRow(r int, row []float32) {
	schemes[q.Scheme.Kind].dequantizeRow(q, r, row)
}

// BitsPerWeight returns the storage cost of q in bits per weight, counting
// int values, block codes, scales and zero points at their packed sizes (4-bit
// values and codes, float32 scales, float32 zero points) and padding.
func (q *Quantized) BitsPerWeight() float64 {
	if q.Rows == 0 || q.Cols == 0 {
		return 0
	}
	return schemes[q.Scheme.Kind].bits(q)
}

// weights is the number of weights of q, as a float64.
func (q *Quantized) weights() float64 { return float64(q.Rows) * float64(q.Cols) }

// paddedWeights is the number of weights of q counting each row's padded
// last block.
func (q *Quantized) paddedWeights() float64 {
	return float64(q.Rows) * float64(q.BlocksPerRow()*q.Scheme.Block)
}

// ErrorStats summarizes the difference between weights and their
// quantized-then-dequantized values.
type ErrorStats struct {
	N        int     // number of values compared
	MaxAbs   float64 // max |w - w'|
	MeanAbs  float64 // mean |w - w'|
	RMSE     float64 // sqrt(mean (w - w')^2)
	Relative float64 // ||w - w'||_2 / ||w||_2 (0 when w is all zeros)
}

// String formats the statistics for reports.
func (e ErrorStats) String() string {
	return fmt.Sprintf("n=%d max_abs=%.4g mean_abs=%.4g rmse=%.4g rel=%.4g", e.N, e.MaxAbs, e.MeanAbs, e.RMSE, e.Relative)
}

// Compare returns the error statistics of approx against orig, computed in
// float64. The slices must have the same length.
func Compare(orig, approx []float32) (ErrorStats, error) {
	if len(orig) != len(approx) {
		return ErrorStats{}, fmt.Errorf("quant: compare: %d values against %d", len(orig), len(approx))
	}
	var acc errorSums
	acc.add(orig, approx)
	return acc.stats(), nil
}

// errorSums accumulates Compare's sums, in order, over consecutive parts.
type errorSums struct {
	n                   int
	maxAbs              float64
	sumAbs, sumSq, norm float64
}

func (e *errorSums) add(orig, approx []float32) {
	for i, w := range orig {
		d := math.Abs(float64(w) - float64(approx[i]))
		e.maxAbs = max(e.maxAbs, d)
		e.sumAbs += d
		e.sumSq += d * d
		e.norm += float64(w) * float64(w)
	}
	e.n += len(orig)
}

func (e *errorSums) stats() ErrorStats {
	st := ErrorStats{N: e.n, MaxAbs: e.maxAbs}
	if st.N > 0 {
		st.MeanAbs = e.sumAbs / float64(st.N)
		st.RMSE = math.Sqrt(e.sumSq / float64(st.N))
	}
	if e.norm > 0 {
		st.Relative = math.Sqrt(e.sumSq / e.norm)
	}
	return st
}

// Error returns the error statistics of q against the original weights,
// exactly Compare(orig, q.Dequantize()), dequantizing one row at a time.
func (q *Quantized) Error(orig []float32) (ErrorStats, error) {
	if len(orig) != q.Rows*q.Cols {
		return ErrorStats{}, fmt.Errorf("quant: compare: %d values against %d", len(orig), q.Rows*q.Cols)
	}
	var acc errorSums
	row := make([]float32, q.Cols)
	for r := range q.Rows {
		q.dequantizeRow(r, row)
		acc.add(orig[r*q.Cols:(r+1)*q.Cols], row)
	}
	return acc.stats(), nil
}

// MaxElements bounds the values of one weight: 2^36, room for the largest
// tables of released models (Gemma 4 E2B's per-layer embedding holds
// 262144 x 8960, 2.3 billion values) with int row offsets on the 64-bit
// platforms aotlm builds for.
const MaxElements = 1 << 36

// checkMatrix validates a row-major [rows, cols] weight: matching length, no
// non-finite value and no magnitude above MaxWeight.
func checkMatrix(w []float32, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("quant: negative shape [%d, %d]", rows, cols)
	}
	if cols != 0 && rows > MaxElements/cols {
		return fmt.Errorf("quant: shape [%d, %d] too large (more than %d values)", rows, cols, MaxElements)
	}
	if len(w) != rows*cols {
		return fmt.Errorf("quant: %d values for shape [%d, %d]", len(w), rows, cols)
	}
	for i, v := range w {
		if !(math.Abs(float64(v)) <= MaxWeight) {
			return fmt.Errorf("quant: weight [%d, %d] = %v is not finite or exceeds %g", i/cols, i%cols, v, MaxWeight)
		}
	}
	return nil
}

// roundClamp rounds x half to even and clamps it to [lo, hi]; NaN becomes 0.
func roundClamp(x float64, lo, hi int) int {
	r := math.RoundToEven(x)
	switch {
	case r != r:
		return 0
	case r < float64(lo):
		return lo
	case r > float64(hi):
		return hi
	}
	return int(r)
}

// absMax returns max |v| over v in float64.
func absMax(v []float32) float64 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}
