package quant

import (
	"fmt"
	"github.com/aotlm/aotlm/internal/kernel"
	"math"
)

// Activation-aware scaling (AWQ, Lin et al., 2023) and SmoothQuant-style
// migration (Xiao et al., 2022) both rewrite a linear y = x W^T as
// y = (x / s) (W diag(s))^T with a per-input-channel scale s > 0: exact in
// float, and the division by s is folded into whatever produces x (an
// RMSNorm gain, the rows of a previous linear). They differ in the aim:
//
//   - AWQ scales up the weight columns of channels with large activations,
//     so those weights are rounded relatively more finely, and searches the
//     strength: s = mean|x|^alpha (normalized so max(s)*min(s) = 1) for
//     alpha on a grid in [0, 1), keeping the alpha whose quantized layer
//     output on calibration inputs is closest to the float output.
//   - Smoothing moves activation outliers into the weights so that both are
//     easy to quantize: s_j = max|x_j|^alpha / max_i|W_ij|^(1-alpha).

// Weight is one row-major matrix [Rows, Cols] with the scheme it is to be
// quantized with.
type Weight struct {
	W      []float32
	Rows   int
	Scheme Scheme
}

// AWQOptions tunes AWQScales.
type AWQOptions struct {
	// Grid is the number of alpha values tried, 0, 1/Grid, ...,
	// (Grid-1)/Grid (20 when zero, as the AWQ paper).
	Grid int
}

// AWQResult is the outcome of the search.
type AWQResult struct {
	Scales  []float32 // s [K]; 1 everywhere when alpha = 0 is best
	Alpha   float64
	Err     float64 // squared output error at Alpha
	BaseErr float64 // squared output error without scaling (alpha = 0)
}

// AWQScales searches the scales of the weights ws, which all read the same
// input of k channels: meanAbs [k] is the calibration inputs' mean |x| per
// channel and x [m, k] a sample of those inputs on which the output error
// sum_i ||x W_i^T - (x/s) Q(W_i diag(s))^T||^2 is measured.
func AWQScales(ws []Weight, k int, meanAbs []float64, x []float32, opts AWQOptions) (AWQResult, error) {
	grid := opts.Grid
	if grid == 0 {
		grid = 20
	}
	if grid < 1 || len(meanAbs) != k || k == 0 || len(x)%k != 0 || len(x) == 0 {
		return AWQResult{}, fmt.Errorf("quant: awq: bad arguments (grid %d, %d means, %d inputs for %d channels)", grid, len(meanAbs), len(x), k)
	}
	for i, w := range ws {
		if len(w.W) != w.Rows*k {
			return AWQResult{}, fmt.Errorf("quant: awq: weight %d has %d values, not [%d, %d]", i, len(w.W), w.Rows, k)
		}
	}
	m := len(x) / k
	ref := make([][]float64, len(ws)) // x W^T in float64
	for i, w := range ws {
		ref[i] = matmulT(x, m, k, w.W, w.Rows)
	}
	best := AWQResult{Alpha: -1}
	s := make([]float32, k)
	xs := make([]float32, len(x))
	ws2 := make([]float32, 0)
	for g := range grid {
		alpha := float64(g) / float64(grid)
		awqScales(s, meanAbs, alpha)
		for i := range x {
			xs[i] = x[i] / s[i%k]
		}
		var e float64
		for i, w := range ws {
			ws2 = ws2[:0]
			for j, v := range w.W {
				ws2 = append(ws2, v*s[j%k])
			}
			q, err := Quantize(ws2, w.Rows, k, w.Scheme)
			if err != nil {
				return AWQResult{}, fmt.Errorf("quant: awq: %w", err)
			}
			y := matmulT(xs, m, k, q.Dequantize(), w.Rows)
			for j := range y {
				d := y[j] - ref[i][j]
				e += d * d
			}
		}
		if g == 0 {
			best.BaseErr = e
		}
		if best.Alpha < 0 || e < best.Err {
			best.Alpha, best.Err = alpha, e
			best.Scales = append(best.Scales[:0], s...)
		}
	}
	return best, nil
}

// awqScales writes mean|x|^alpha normalized by sqrt(max*min) into s; a
// channel never seen (mean 0) gets the smallest positive mean.
func awqScales(s []float32, meanAbs []float64, alpha float64) {
	lo := math.Inf(1)
	for _, v := range meanAbs {
		if v > 0 {
			lo = min(lo, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo = 1
	}
	hi, small := 0.0, math.Inf(1)
	tmp := make([]float64, len(s))
	for i, v := range meanAbs {
		tmp[i] = math.Pow(max(v, lo), alpha)
		hi, small = max(hi, tmp[i]), min(small, tmp[i])
	}
	norm := math.Sqrt(hi * small)
	for i := range s {
		s[i] = float32(tmp[i] / norm)
	}
}

// matmulT returns x [m, k] times w^T (w [n, k]): each product is a dot of
// k float32 terms on the SIMD row kernel (kernel.DotRows, one weight row
// against every row of x), widened to float64.
func matmulT(x []float32, m, k int, w []float32, n int) []float64 {
	out := make([]float64, m*n)
	col := make([]float32, m)
	for j := range n {
		kernel.DotRows(col, w[j*k:(j+1)*k], x[:m*k], k)
		for i, v := range col {
			out[i*n+j] = float64(v)
		}
	}
	return out
}

// SmoothScales returns SmoothQuant's migration scales for weights ws that
// read the same input of k channels whose calibrated max |x| per channel is
// actMax: s_j = actMax_j^alpha / max_i |W_ij|^(1-alpha), 1 where either is
// zero. alpha is in [0, 1].
func SmoothScales(ws []Weight, k int, actMax []float64, alpha float64) ([]float32, error) {
	if !(alpha >= 0 && alpha <= 1) {
		return nil, fmt.Errorf("quant: smoothing alpha %v is not in [0, 1]", alpha)
	}
	if len(actMax) != k {
		return nil, fmt.Errorf("quant: smoothing: %d activation maxima for %d channels", len(actMax), k)
	}
	wmax := make([]float64, k)
	for i, w := range ws {
		if len(w.W) != w.Rows*k {
			return nil, fmt.Errorf("quant: smoothing: weight %d has %d values, not [%d, %d]", i, len(w.W), w.Rows, k)
		}
		for j, v := range w.W {
			wmax[j%k] = max(wmax[j%k], math.Abs(float64(v)))
		}
	}
	s := make([]float32, k)
	for j := range s {
		s[j] = 1
		if actMax[j] > 0 && wmax[j] > 0 {
			s[j] = float32(math.Pow(actMax[j], alpha) / math.Pow(wmax[j], 1-alpha))
		}
	}
	return s, nil
}
