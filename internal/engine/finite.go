package engine

import (
	"fmt"
	"math"
	"slices"
)

// NonFiniteError is a weight holding a NaN or an infinity.
type NonFiniteError struct {
	Tensor   string
	Row, Col int
	Value    float32
	Count    int64 // non-finite values in all the weights
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("weights hold %d non-finite values: tensor %q row %d column %d is %v", e.Count, e.Tensor, e.Row, e.Col, e.Value)
}

// CheckFinite reads every weight the engine's plans use, dequantizing
// quantized rows by their layout's rule, and returns a *NonFiniteError
// naming the first NaN or infinity (by tensor name, then row) and
// counting them all; nil when every value is finite.
func (e *Engine) CheckFinite() error {
	var first *NonFiniteError
	var count int64
	// note counts v's non-finite values; v is rows of cols values from
	// row on
	note := func(name string, row, cols int, v []float32) {
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				count++
				if first == nil {
					first = &NonFiniteError{Tensor: name, Row: row + j/cols, Col: j % cols, Value: x}
				}
			}
		}
	}
	names := make([]string, 0, len(e.weights)+len(e.qweights))
	for n := range e.weights {
		names = append(names, n)
	}
	for n := range e.qweights {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf []float32
	for _, n := range slices.Compact(names) {
		if w, ok := e.weights[n]; ok {
			cols := len(w)
			if info, _, err := e.tensor(n); err == nil && len(info.Shape) > 0 && info.Shape[len(info.Shape)-1] > 0 {
				cols = int(info.Shape[len(info.Shape)-1])
			}
			note(n, 0, max(cols, 1), w)
			continue
		}
		q := e.qweights[n]
		if q.rowOf == nil {
			return fmt.Errorf("engine: weight %q cannot be read back by rows", n)
		}
		if cap(buf) < q.K {
			buf = make([]float32, q.K)
		}
		for r := range q.N {
			q.rowOf(buf[:q.K], r)
			note(n, r, q.K, buf[:q.K])
		}
	}
	if first != nil {
		first.Count = count
		return first
	}
	return nil
}
