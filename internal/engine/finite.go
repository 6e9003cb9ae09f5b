package engine

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
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
// quantized rows by their layout's rule, on as many goroutines as
// GOMAXPROCS, and returns a *NonFiniteError naming the first NaN or
// infinity (by tensor name, then row) and counting them all; nil when
// every value is finite.
func (e *Engine) CheckFinite() error {
	names := make([]string, 0, len(e.weights)+len(e.qweights))
	for n := range e.weights {
		names = append(names, n)
	}
	for n := range e.qweights {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	found := make([]*NonFiniteError, len(names)) // each tensor's first, with its count
	errs := make([]error, len(names))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Go(func() {
			var buf []float32
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= len(names) {
					return
				}
				found[k], errs[k] = e.tensorFinite(names[k], &buf)
			}
		})
	}
	wg.Wait()
	var first *NonFiniteError
	var count int64
	for k := range names {
		if errs[k] != nil {
			return errs[k]
		}
		if f := found[k]; f != nil {
			count += f.Count
			if first == nil {
				first = f
			}
		}
	}
	if first != nil {
		first.Count = count
		return first
	}
	return nil
}

// tensorFinite scans one weight; buf is the caller's row buffer.
func (e *Engine) tensorFinite(name string, buf *[]float32) (*NonFiniteError, error) {
	var first *NonFiniteError
	// note counts v's non-finite values; v is rows of cols values from
	// row on
	note := func(row, cols int, v []float32) {
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				if first == nil {
					first = &NonFiniteError{Tensor: name, Row: row + j/cols, Col: j % cols, Value: x}
				}
				first.Count++
			}
		}
	}
	if w, ok := e.weights[name]; ok {
		cols := len(w)
		if info, _, err := e.tensor(name); err == nil && len(info.Shape) > 0 && info.Shape[len(info.Shape)-1] > 0 {
			cols = int(info.Shape[len(info.Shape)-1])
		}
		note(0, max(cols, 1), w)
		return first, nil
	}
	q := e.qweights[name]
	if q.rowOf == nil {
		return nil, fmt.Errorf("engine: weight %q cannot be read back by rows", name)
	}
	if cap(*buf) < q.K {
		*buf = make([]float32, q.K)
	}
	b := (*buf)[:q.K]
	for r := range q.N {
		q.rowOf(b, r)
		note(r, q.K, b)
	}
	return first, nil
}
