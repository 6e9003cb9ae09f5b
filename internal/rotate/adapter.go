package rotate

import (
	"fmt"
	"math/rand"

	"github.com/aotlm/aotlm/internal/quant"
)

// AdapterMap carries a low-rank pair (W + B·A) trained on the unrotated
// model over to the weights Apply rotated, so that the rotated linear
// plus the mapped pair computes what the unrotated linear plus the pair
// did. On the input side a linear after a folded norm holds W·diag(g)·Q,
// so A becomes A·diag(g)·Q, and R2's output projection holds W·H per
// head, so A becomes A·H there; on the output side a linear writing to
// the residual stream holds Qᵀ·W and R2's value projection Hᵀ·W per
// head, so B becomes Qᵀ·B or Hᵀ·B alike.
type AdapterMap struct {
	q      *Hadamard
	gains  map[string][]float32 // by linear: the folded gain of its columns
	in     map[string]bool      // R1 rotated the columns
	out    map[string]bool      // R1 rotated the rows
	values map[string]r2Side    // by value projection
	outs   map[string]r2Side    // by output projection
}

// maxRecordDim bounds the sizes a rotation record may give (a
// stream's width, heads, a head's size).
const maxRecordDim = 1 << 20

type r2Side struct {
	h         *Hadamard
	lo, heads int
}

// NewAdapterMap rebuilds the rotations rep records (their seed draws the
// same signs again) for mapping adapters; rep must be the report of
// the Apply that rotated the weights, with the folded gains it records.
func NewAdapterMap(rep *Report) (*AdapterMap, error) {
	m := &AdapterMap{gains: map[string][]float32{}, in: map[string]bool{}, out: map[string]bool{},
		values: map[string]r2Side{}, outs: map[string]r2Side{}}
	rng := rand.New(rand.NewSource(rep.Seed))
	if rep.R1 != quant.RotationNone {
		if rep.Dim <= 0 || rep.Dim > maxRecordDim || len(rep.R1In) == 0 {
			return nil, fmt.Errorf("rotate: the rotation record's R1 size %d (at most %d) or its %d rotated linears do not make a rotation", rep.Dim, maxRecordDim, len(rep.R1In))
		}
		q, err := NewHadamard(rep.Dim, rep.R1, rng)
		if err != nil {
			return nil, err
		}
		m.q = q
		for _, w := range rep.R1In {
			m.in[w] = true
		}
		for _, w := range rep.R1Out {
			m.out[w] = true
		}
		for l, n := range rep.Folded {
			g := rep.Gains[n]
			if len(g) != rep.Dim {
				return nil, fmt.Errorf("rotate: the rotation record's gain %s has %d values, the stream %d", n, len(g), rep.Dim)
			}
			m.gains[l] = g
		}
	}
	if rep.R2 != quant.RotationNone {
		if len(rep.R2Layers) == 0 {
			return nil, fmt.Errorf("rotate: the rotation record lists no layer R2 rotated")
		}
		hs := map[int]*Hadamard{}
		for _, l := range rep.R2Layers {
			if l.HeadDim <= 0 || l.HeadDim > maxRecordDim || l.Heads <= 0 || l.KVHeads <= 0 || l.Heads > maxRecordDim || l.KVHeads > maxRecordDim || l.Lo < 0 {
				return nil, fmt.Errorf("rotate: the rotation record's R2 layer %s has %d heads, %d key/value heads of %d from row %d", l.V, l.Heads, l.KVHeads, l.HeadDim, l.Lo)
			}
			h := hs[l.HeadDim]
			if h == nil {
				var err error
				if h, err = NewHadamard(l.HeadDim, rep.R2, rng); err != nil {
					return nil, err
				}
				hs[l.HeadDim] = h
			}
			m.values[l.V] = r2Side{h: h, lo: l.Lo, heads: l.KVHeads}
			m.outs[l.O] = r2Side{h: h, heads: l.Heads}
		}
	}
	return m, nil
}

// Rotated tells whether the rotations changed the linear weight w (its
// pair then needs Map).
func (m *AdapterMap) Rotated(w string) bool {
	_, v := m.values[w]
	_, o := m.outs[w]
	return m.in[w] || m.out[w] || v || o
}

// RotatesRows tells whether the rotations mixed the output rows of the
// linear weight w (a per-row rescaling, as DoRA's, then no longer
// follows the rows).
func (m *AdapterMap) RotatesRows(w string) bool {
	_, v := m.values[w]
	return m.out[w] || v
}

// Map returns the pair a [rank, in] and b [out, rank] of the linear
// weight w carried over to the rotated weights (new slices; a and b are
// not changed).
func (m *AdapterMap) Map(w string, rank, in, out int, a, b []float32) ([]float32, []float32, error) {
	if len(a) != rank*in || len(b) != out*rank {
		return nil, nil, fmt.Errorf("rotate: %s: a pair of %d and %d values is not rank %d of %dx%d", w, len(a), len(b), rank, out, in)
	}
	a, b = append([]float32(nil), a...), append([]float32(nil), b...)
	if g := m.gains[w]; g != nil {
		if len(g) != in {
			return nil, nil, fmt.Errorf("rotate: %s: %d columns, the folded gain has %d", w, in, len(g))
		}
		for k := range rank {
			row := a[k*in : (k+1)*in]
			for j := range row {
				row[j] *= g[j]
			}
		}
	}
	if m.in[w] {
		if in != m.q.N {
			return nil, nil, fmt.Errorf("rotate: %s: %d columns, R1 rotates %d", w, in, m.q.N)
		}
		m.q.rightCols(a, in, 0, 1)
	}
	if s, ok := m.outs[w]; ok {
		if in != s.heads*s.h.N {
			return nil, nil, fmt.Errorf("rotate: %s: %d columns, R2 rotates %d heads of %d", w, in, s.heads, s.h.N)
		}
		s.h.rightCols(a, in, 0, s.heads)
	}
	// B's columns (rank of them) are the vectors the rows' rotations act on
	bt := make([]float32, len(b))
	for o := range out {
		for k := range rank {
			bt[k*out+o] = b[o*rank+k]
		}
	}
	rot := false
	if m.out[w] {
		if out != m.q.N {
			return nil, nil, fmt.Errorf("rotate: %s: %d rows, R1 rotates %d", w, out, m.q.N)
		}
		m.q.rightCols(bt, out, 0, 1) // Qᵀ·b for each column b (LeftT is Right)
		rot = true
	}
	if s, ok := m.values[w]; ok {
		if s.lo+s.heads*s.h.N > out {
			return nil, nil, fmt.Errorf("rotate: %s: %d rows, R2 rotates %d heads of %d from row %d", w, out, s.heads, s.h.N, s.lo)
		}
		s.h.rightCols(bt, out, s.lo, s.heads)
		rot = true
	}
	if rot {
		for o := range out {
			for k := range rank {
				b[o*rank+k] = bt[k*out+o]
			}
		}
	}
	return a, b, nil
}
