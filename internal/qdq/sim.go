package qdq

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

// Int8Block is the number of inputs that share one int8 activation scale,
// as the int8 kernels quantize them (kernel.QK).
const Int8Block = 32

// Range is the calibrated [Min, Max] of a tensor, for static quantization.
type Range struct {
	Min float32 `json:"min"`
	Max float32 `json:"max"`
}

// KV holds the uint8 cache scales: for each cache layer, one scale per key
// (K) or value (V) head, as plan.KVCache holds them.
type KV struct {
	K, V [][]float32
}

// Sim says what to simulate. The zero value simulates nothing.
type Sim struct {
	// Int8 names the linear weights whose inputs are rounded to int8 in
	// blocks of Int8Block (the compiler's packed layouts).
	Int8 map[string]bool
	// Static16 gives, by linear weight name, the calibrated input range of
	// a static per-tensor asymmetric 16-bit activation (the NPU's A16);
	// it applies to linears not in Int8.
	Static16 map[string]Range
	// KV, when set, rounds the keys and values entering attention to the
	// uint8 cache.
	KV *KV
	// Outliers gives, by linear weight, the input channels a quantized
	// folder keeps in float (qmodel.Manifest.Outliers): the linear is
	// split as the compiler splits it (graph.SplitOutliers), so Int8 and
	// Static16 round only the other channels.
	Outliers map[string][]int
}

// check verifies the KV scales against the graph's attention layers.
func (s *Sim) check(g *graph.Graph) error {
	if s.KV == nil {
		return nil
	}
	for _, n := range g.Nodes {
		a := n.Attn
		if n.Op != op.Attention || a == nil {
			continue
		}
		if a.Layer >= len(s.KV.K) || a.Layer >= len(s.KV.V) ||
			len(s.KV.K[a.Layer]) != a.KVHeads || len(s.KV.V[a.Layer]) != a.KVHeads {
			return fmt.Errorf("qdq: kv scales do not cover attention layer %d (%d heads)", a.Layer, a.KVHeads)
		}
	}
	return nil
}

func (s *Sim) hook(n *graph.Node, slot int, x []float32, rows, cols int) []float32 {
	switch n.Op {
	case op.Linear:
		if s.Int8[n.Weight] && cols%Int8Block == 0 {
			out := make([]float32, len(x))
			Int8Blocks(out, x)
			return out
		}
		if r, ok := s.Static16[n.Weight]; ok {
			out := make([]float32, len(x))
			Static16(out, x, r)
			return out
		}
	case op.Attention:
		if s.KV == nil || slot == 0 {
			return nil
		}
		a := n.Attn
		scales := s.KV.K[a.Layer]
		if slot == 2 {
			scales = s.KV.V[a.Layer]
		}
		out := make([]float32, len(x))
		KVRound(out, x, cols, a.HeadDim, scales)
		return out
	}
	return nil
}

// Int8Blocks writes to dst the values of x after the int8 kernels'
// activation rounding, per block of Int8Block values (len(x) must be a
// multiple): amax = max|x|, d = amax/127, q = round_half_even(x*(127/amax)),
// x' = q*d, in float32 as the kernels compute d and q.
func Int8Blocks(dst, x []float32) {
	for b := 0; b+Int8Block <= len(x); b += Int8Block {
		xb, ob := x[b:b+Int8Block], dst[b:b+Int8Block]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if amax == 0 {
			clear(ob)
			continue
		}
		d, id := amax/127, 127/amax
		for i, v := range xb {
			ob[i] = float32(math.RoundToEven(float64(v*id))) * d
		}
	}
}

// Static16 writes to dst the values of x after static asymmetric 16-bit
// quantization over r, in the arithmetic of a QuantizeLinear /
// DequantizeLinear pair with the parameters of Static16Params:
// q = clamp(round_half_even(x/s) + z, 0, 65535), x' = (q-z)*s, with the
// division and product in float32. The range is widened to hold 0, so
// zero stays exact.
func Static16(dst, x []float32, r Range) {
	s, z, ok := Static16Params(r)
	if !ok {
		clear(dst)
		return
	}
	zf := float64(z)
	for i, v := range x {
		q := math.RoundToEven(float64(v/s)) + zf
		q = min(max(q, 0), 65535)
		dst[i] = float32(q-zf) * s
	}
}

// Static16Params returns the float32 scale and the uint16 zero point of
// the 16-bit grid over r widened to hold 0: s = (Max-Min)/65535 rounded
// to float32, z = round(-Min/s). ok is false for an empty range (every
// value quantizes to 0).
func Static16Params(r Range) (s float32, z uint16, ok bool) {
	lo, hi := min(float64(r.Min), 0), max(float64(r.Max), 0)
	if hi == lo {
		return 0, 0, false
	}
	s = float32((hi - lo) / 65535)
	zf := math.Round(-lo / float64(s))
	return s, uint16(min(max(zf, 0), 65535)), true
}

// KVRound writes to dst the rows of x ([T, cols], heads of headDim from
// column 0, one scale per head) after a uint8 cache round trip
// (quant.KVQuant): clamp(round(x/s), -127, 127)*s.
func KVRound(dst, x []float32, cols, headDim int, scales []float32) {
	copy(dst, x)
	for r := 0; r*cols < len(x); r++ {
		for h, s := range scales {
			lo := r*cols + h*headDim
			for i := lo; i < lo+headDim; i++ {
				if s == 0 {
					dst[i] = 0
					continue
				}
				q := math.RoundToEven(float64(x[i] / s))
				dst[i] = float32(min(max(q, -127), 127)) * s
			}
		}
	}
}

// PackedLinears returns the weights of a quantized folder that the compiler
// stores packed for the int8-activation kernels: tensors of a scheme
// packed in blocks (quant.SchemeInfo.BlockPacked: w8, lpbq, q4) whose
// input width and block size are multiples of Int8Block, unless the
// scheme keeps their input in float (quant.Scheme.FloatInput).
func PackedLinears(man *qmodel.Manifest) map[string]bool {
	out := map[string]bool{}
	for name, e := range man.Tensors {
		if e.Float || len(e.Shape) != 2 {
			continue
		}
		s := e.Scheme.Quant()
		if s.FloatInput {
			continue
		}
		if info, ok := quant.Lookup(s.Kind); !ok || !info.BlockPacked {
			continue
		}
		if e.Shape[1]%Int8Block == 0 && s.Block%Int8Block == 0 {
			out[name] = true
		}
	}
	return out
}
