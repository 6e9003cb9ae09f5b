package compile

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// writeWeights stores every weight the graph names, in name order: the
// ones in qs in their quantized layout (see plan.WeightLayout), the others
// as plain little-endian float32. It reports whether any tensor is
// quantized.
//
// With pack set, a quantized weight whose shape allows it is stored in its
// packed form (plan.WeightLayout's "-p" tags), which the engine runs with
// int8 activations.
func writeWeights(w *artifact.Writer, shapes map[string][]int, vals graph.Weights, qs map[string]*quant.Quantized, pack bool) (bool, error) {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf []byte
	mixed := false
	for _, n := range names {
		shape := make([]int64, len(shapes[n]))
		for i, d := range shapes[n] {
			shape[i] = int64(d)
		}
		if q := qs[n]; q != nil {
			l, ok := layoutOf(q.Scheme)
			if ok {
				encode := encodeQuantized
				if pack && len(shape) == 2 && l.CanPack(shape[1]) {
					l.Packed, encode = true, encodePacked
				}
				b, err := encode(l, q, shape)
				if err != nil {
					return false, fmt.Errorf("compile: weight %q: %w", n, err)
				}
				if err := w.AddTensor(n, tensor.I8, shape, l.Tag(), b); err != nil {
					return false, fmt.Errorf("compile: weight %q: %w", n, err)
				}
				mixed = true
				continue
			}
		}
		v := vals[n]
		buf = slices.Grow(buf[:0], 4*len(v))[:4*len(v)]
		for i, x := range v {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		if err := w.AddTensor(n, tensor.F32, shape, "", buf); err != nil {
			return false, fmt.Errorf("compile: weight %q: %w", n, err)
		}
	}
	return mixed, nil
}

// layoutOf returns the artifact layout of a scheme; f16 has none (such
// tensors are stored as float32, which holds every f16 value exactly).
func layoutOf(s quant.Scheme) (plan.WeightLayout, bool) {
	switch s.Kind {
	case quant.KindW8:
		return plan.WeightLayout{Kind: plan.LayoutW8}, true
	case quant.KindLPBQ:
		return plan.WeightLayout{Kind: plan.LayoutLPBQ, Block: s.Block}, true
	case quant.KindQ4:
		return plan.WeightLayout{Kind: plan.LayoutQ4, Block: s.Block, Sym: s.Sym}, true
	}
	return plan.WeightLayout{}, false
}

// encodeQuantized lays q out as l describes, after checking that its parts
// have the sizes the shape implies.
func encodeQuantized(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	if len(shape) != 2 || shape[0] != int64(q.Rows) || shape[1] != int64(q.Cols) {
		return nil, fmt.Errorf("quantized as [%d, %d], the graph says %v", q.Rows, q.Cols, shape)
	}
	p, err := l.Parts(shape[0], shape[1])
	if err != nil {
		return nil, err
	}
	n := int64(q.Rows) * int64(q.Cols)
	if int64(len(q.Q)) != n || int64(len(q.Scales)) != p.NScales {
		return nil, fmt.Errorf("%d integers and %d scales, %s needs %d and %d", len(q.Q), len(q.Scales), l.Tag(), n, p.NScales)
	}
	b := make([]byte, p.Size)
	for i, v := range q.Q {
		b[i] = byte(v)
	}
	if p.Codes >= 0 {
		if len(q.Codes) != q.Rows*q.BlocksPerRow() || q.BlocksPerRow() != (q.Cols+l.Block-1)/l.Block {
			return nil, fmt.Errorf("%d block codes do not fit %s", len(q.Codes), l.Tag())
		}
		copy(b[p.Codes:], q.Codes)
	}
	putFloats(b[p.Scales:], q.Scales)
	if p.Zeros >= 0 {
		if int64(len(q.Zeros)) != p.NScales {
			return nil, fmt.Errorf("%d zero points, %s needs %d", len(q.Zeros), l.Tag(), p.NScales)
		}
		putFloats(b[p.Zeros:], q.Zeros)
	}
	return b, nil
}

func putFloats(b []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// encodePacked lays q out in l's packed form (l.Packed set): 4-bit codes
// two to a byte, blocks of plan.PackBlock with their B- or G-block's code,
// scale and zero point repeated, or w8 integers offset by 128.
func encodePacked(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	if len(shape) != 2 || shape[0] != int64(q.Rows) || shape[1] != int64(q.Cols) {
		return nil, fmt.Errorf("quantized as [%d, %d], the graph says %v", q.Rows, q.Cols, shape)
	}
	p, err := l.Parts(shape[0], shape[1])
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	nb, per := K/plan.PackBlock, max(l.Block/plan.PackBlock, 1)
	srcBlocks := 0
	if l.Block > 0 {
		srcBlocks = (K + l.Block - 1) / l.Block
	}
	want := int64(N)
	if l.Kind == plan.LayoutQ4 {
		want = int64(N * srcBlocks)
	}
	if len(q.Q) != N*K || int64(len(q.Scales)) != want {
		return nil, fmt.Errorf("%d integers and %d scales, %s needs %d and %d", len(q.Q), len(q.Scales), l.Tag(), N*K, want)
	}
	b := make([]byte, p.Size)
	if l.Kind == plan.LayoutW8 {
		for i, v := range q.Q {
			b[i] = byte(int(v) + 128)
		}
		putFloats(b[p.Scales:], q.Scales)
		return b, nil
	}
	offset := 8
	if l.Kind == plan.LayoutQ4 && !l.Sym {
		offset = 0
	}
	u := make([]uint8, K)
	for n := range N {
		for k, v := range q.Q[n*K : (n+1)*K] {
			c := int(v) + offset
			if c < 0 || c > 15 {
				return nil, fmt.Errorf("row %d input %d: %d does not fit 4 bits", n, k, v)
			}
			u[k] = uint8(c)
		}
		if err := kernel.PackNibbles(b[n*K/2:(n+1)*K/2], u, 1, K); err != nil {
			return nil, fmt.Errorf("row %d: %w", n, err)
		}
	}
	// spread repeats each row's per-B-block values over its 32-blocks.
	spread := func(src []float32) []float32 {
		out := make([]float32, N*nb)
		for i := range out {
			out[i] = src[(i/nb)*srcBlocks+(i%nb)/per]
		}
		return out
	}
	switch l.Kind {
	case plan.LayoutLPBQ:
		if len(q.Codes) != N*srcBlocks {
			return nil, fmt.Errorf("%d block codes do not fit %s", len(q.Codes), l.Tag())
		}
		for i := range N * nb {
			b[p.Codes+int64(i)] = q.Codes[(i/nb)*srcBlocks+(i%nb)/per]
		}
		putFloats(b[p.Scales:], q.Scales)
	case plan.LayoutQ4:
		putFloats(b[p.Scales:], spread(q.Scales))
		if p.Zeros >= 0 {
			if len(q.Zeros) != N*srcBlocks {
				return nil, fmt.Errorf("%d zero points, %s needs %d", len(q.Zeros), l.Tag(), N*srcBlocks)
			}
			putFloats(b[p.Zeros:], spread(q.Zeros))
		}
	}
	return b, nil
}
