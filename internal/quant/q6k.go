package quant

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Q6K stores a weight in ggml's Q6_K form: super-blocks of 256 inputs
// along a row, each with a float32 scale d and 16 groups of 16 inputs,
// each group with an int8 sub-scale:
//
//	w' = float32(d*float32(sub)) * float32(q)     q in -32..31
//
// (6.56 bits a weight as ggml stores d, 6.625 with our float32 d). Rows
// must be a whole number of super-blocks (Q6KSuper divides the columns).
//
// Quantization, per group: the scale that maps the group's largest
// magnitude to -32 or 31 with the other values rounded against it, and
// nearby scales (the extreme mapped to ±(24..32)), keeping the one with
// the least squared error; then d = max|group scale|/127, each sub-scale
// the rounded ratio, and every value rounded again against the scale the
// weight will use, d*sub.
const (
	Q6KSuper = 256
	Q6KGroup = 16
)

// KindQ6K is 6-bit in ggml's Q6_K super-blocks.
const KindQ6K Kind = "q6k"

func init() {
	register(&SchemeInfo{
		Kind:      KindQ6K,
		Rule:      "w = float32(d*float32(sub)) * float32(q), q in -32..31",
		Bits:      6.625,
		Super:     Q6KSuper,
		Layout:    "q6k-p",
		GGML:      "Q6_K",
		Recipe:    true,
		Tolerance: 0.03,
		check:     noModeNoHQQ,
		name:      kindName,
		json:      noFields,
		quantize: func(w []float32, rows, cols int, _ Scheme) (*Quantized, error) {
			return QuantizeQ6K(w, rows, cols)
		},
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
				i := r*q.Cols + c
				row[c] = float32(q.Scales[i/Q6KSuper]*float32(q.Sub[i/Q6KGroup])) * float32(v) // rounded as ggml rounds
			}
		},
		bits: func(q *Quantized) float64 {
			return (6*q.weights() + 8*float64(len(q.Sub)) + 32*float64(len(q.Scales))) / q.weights()
		},
	})
}

// QuantizeQ6K quantizes the row-major weight w [rows, cols] to Q6K.
func QuantizeQ6K(w []float32, rows, cols int) (*Quantized, error) {
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: q6k: %w", err)
	}
	if cols%Q6KSuper != 0 {
		return nil, fmt.Errorf("quant: q6k: %d columns are not a multiple of %d", cols, Q6KSuper)
	}
	n := rows * cols
	q := &Quantized{Scheme: Scheme{Kind: KindQ6K}, Rows: rows, Cols: cols,
		Q: make([]int8, n), Sub: make([]int8, n/Q6KGroup), Scales: make([]float32, n/Q6KSuper)}
	workers := min(runtime.GOMAXPROCS(0), max(rows/64, 1))
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := wk; s < n/Q6KSuper; s += workers {
				q6kSuper(q, w, s)
			}
		}()
	}
	wg.Wait()
	return q, nil
}

// q6kSuper quantizes super-block s of q from w.
func q6kSuper(q *Quantized, w []float32, s int) {
	var scales [Q6KSuper / Q6KGroup]float64
	var top float64
	for g := range scales {
		k := s*Q6KSuper + g*Q6KGroup
		scales[g] = groupScale(w[k : k+Q6KGroup])
		top = max(top, math.Abs(scales[g]))
	}
	d := float32(top / 127)
	q.Scales[s] = d
	for g := range scales {
		k := s*Q6KSuper + g*Q6KGroup
		sub := 0
		if d != 0 {
			sub = roundClamp(scales[g]/float64(d), -127, 127)
		}
		q.Sub[k/Q6KGroup] = int8(sub)
		step := float64(float32(d * float32(sub)))
		for i, v := range w[k : k+Q6KGroup] {
			c := 0
			if step != 0 {
				c = roundClamp(float64(v)/step, -32, 31)
			}
			q.Q[k+i] = int8(c)
		}
	}
}

// groupScale returns the scale of one group of 16 weights (see Q6K), 0
// for a group of zeros. It is signed: the extreme maps to -32 when the
// scale is positive and it is negative, so both signs reach 32 steps.
func groupScale(v []float32) float64 {
	var ext float64
	for _, x := range v {
		if math.Abs(float64(x)) > math.Abs(ext) {
			ext = float64(x)
		}
	}
	if ext == 0 {
		return 0
	}
	best, bestErr := 0.0, math.Inf(1)
	for m := 24; m <= 32; m++ {
		for _, scale := range []float64{-ext / float64(m), ext / float64(min(m, 31))} {
			var e float64
			for _, x := range v {
				d := float64(x) - float64(roundClamp(float64(x)/scale, -32, 31))*scale
				e += d * d
			}
			if e < bestErr {
				best, bestErr = scale, e
			}
		}
	}
	return best
}
