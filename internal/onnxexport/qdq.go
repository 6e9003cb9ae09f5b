package onnxexport

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/onnx"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/quant"
)

// QDQ configures the quantized form of an export. Each part is optional.
type QDQ struct {
	// Weights returns a linear weight's stored quantized parts (nil for a
	// float tensor): qmodel.Folder.Quantized. LPBQ weights become the
	// pattern ONNX Runtime's QNN provider fuses into its LPBQ encoding,
	// W8 weights a per-channel DequantizeLinear (a W8 embedding table its
	// int8 rows times their scales); other schemes, and LPBQ
	// weights whose block does not divide their input width, stay float
	// (their dequantized values). nil: every weight is float.
	Weights func(name string) (*quant.Quantized, error)
	// Activations gives, by linear weight name, the calibrated range of
	// the linear's input: a static per-tensor uint16 QDQ, as the `npu`
	// phase simulates it (qdq.Static16). nil: float activations.
	Activations map[string]qdq.Range
	// Outputs gives, by linear weight name, the range of the linear's
	// output (before any bias): a uint16 QDQ pair after its MatMul, so
	// ONNX Runtime groups the MatMul with its quantized inputs and output
	// (the QDQ node unit the QNN provider's LPBQ fusion starts from). nil:
	// float outputs.
	Outputs map[string]qdq.Range
	// KV gives the cache scales per layer and head: the cache inputs and
	// outputs become uint8 (zero point 128) and the new rows are rounded
	// to them. nil: a float cache.
	KV *qdq.KV
}

type qdqQuant struct {
	cfg *QDQ
}

func newQDQ(q *QDQ, g *graph.Graph, _ graph.Weights) (*qdqQuant, error) {
	if q.KV != nil {
		for i := range g.Nodes {
			a := g.Nodes[i].Attn
			if a == nil {
				continue
			}
			if a.Layer >= len(q.KV.K) || a.Layer >= len(q.KV.V) ||
				len(q.KV.K[a.Layer]) != a.KVHeads || len(q.KV.V[a.Layer]) != a.KVHeads {
				return nil, fmt.Errorf("onnx export: kv scales do not cover attention layer %d (%d heads)", a.Layer, a.KVHeads)
			}
		}
	}
	return &qdqQuant{cfg: q}, nil
}

func (q *qdqQuant) linear(p *pass, n *graph.Node) (string, error) {
	if q.cfg.Weights == nil {
		return floatQuant{}.linear(p, n)
	}
	w, err := q.cfg.Weights(n.Weight)
	if err != nil {
		return "", err
	}
	if w == nil {
		return floatQuant{}.linear(p, n)
	}
	K, N := int64(w.Cols), int64(w.Rows)
	if int(K) != p.g.Nodes[n.In[0]].Cols || int(N) != n.Cols {
		return "", fmt.Errorf("weight %s is [%d, %d], the linear wants [%d, %d]", n.Weight, N, K, n.Cols, p.g.Nodes[n.In[0]].Cols)
	}
	switch w.Scheme.Kind {
	case quant.KindLPBQ:
		if w.Padded {
			// a short last block: QNN's LPBQ encoding wants whole blocks
			return floatQuant{}.linear(p, n)
		}
		return lpbq(p, n.Weight, w), nil
	case quant.KindW8:
		qt := p.st.put(n.Weight+".q", onnx.Int8, []int64{K, N}, func() []byte { return int8Bytes(transposeI8(w.Q, int(N), int(K))) })
		st := p.st.put(n.Weight+".scales", onnx.Float, []int64{N}, func() []byte { return floatBytes(w.Scales) })
		zp := p.st.put(n.Weight+".zero", onnx.Int8, []int64{N}, func() []byte { return make([]byte, N) })
		return p.op("DequantizeLinear", []string{p.weight(qt), p.weight(st), p.weight(zp)}, intAttr("axis", 1)), nil
	}
	return floatQuant{}.linear(p, n)
}

// embed gathers a W8 table's int8 rows and multiplies them by their row
// scales (float32(q)*s, the folder's values), so the table is stored in 8
// bits; other tables are float.
func (q *qdqQuant) embed(p *pass, n *graph.Node) (string, error) {
	if q.cfg.Weights == nil {
		return floatQuant{}.embed(p, n)
	}
	w, err := q.cfg.Weights(n.Weight)
	if err != nil {
		return "", err
	}
	if w == nil || w.Scheme.Kind != quant.KindW8 || w.Cols != n.Cols {
		return floatQuant{}.embed(p, n)
	}
	V, D := int64(w.Rows), int64(w.Cols)
	qt := p.st.put(n.Weight+".rows.q", onnx.Int8, []int64{V, D}, func() []byte { return int8Bytes(w.Q) })
	st := p.st.put(n.Weight+".rows.scales", onnx.Float, []int64{V}, func() []byte { return floatBytes(w.Scales) })
	rows := p.op("Cast", []string{p.op("Gather", []string{p.weight(qt), InputIDs}, intAttr("axis", 0))},
		intAttr("to", int64(onnx.Float)))
	scales := p.unsqueeze(p.op("Gather", []string{p.weight(st), InputIDs}, intAttr("axis", 0)), 2)
	return p.op("Mul", []string{rows, scales}), nil
}

// lpbq writes an LPBQ weight in the form ONNX Runtime's QNN provider fuses
// (LowPowerBlockQuantizedMatMulFusion): the uint8 block codes k [nb, N]
// dequantized per channel by the float row scales S [N] give the block
// scales, which dequantize the int4 weights [K, N] in blocks of B along K:
//
//	scales = DequantizeLinear(k, S, 0, axis=1)            k*S  [nb, N]
//	W      = DequantizeLinear(q, scales, 0, axis=0, block_size=B)
func lpbq(p *pass, name string, w *quant.Quantized) string {
	K, N := w.Cols, w.Rows
	nb := w.BlocksPerRow()
	qt := p.st.put(name+".q", onnx.Int4, []int64{int64(K), int64(N)}, func() []byte {
		return int4Bytes(transposeI8(w.Q, N, K))
	})
	zq := p.st.put(name+".q.zero", onnx.Int4, []int64{int64(nb), int64(N)}, func() []byte {
		return make([]byte, onnx.Int4.RawSize(nb*N))
	})
	codes := p.st.put(name+".codes", onnx.Uint8, []int64{int64(nb), int64(N)}, func() []byte {
		t := make([]byte, nb*N)
		for r := 0; r < N; r++ {
			for b := 0; b < nb; b++ {
				t[b*N+r] = w.Codes[r*nb+b]
			}
		}
		return t
	})
	scales := p.st.put(name+".scales", onnx.Float, []int64{int64(N)}, func() []byte { return floatBytes(w.Scales) })
	zc := p.st.put(name+".codes.zero", onnx.Uint8, []int64{int64(N)}, func() []byte { return make([]byte, N) })
	bs := p.op("DequantizeLinear", []string{p.weight(codes), p.weight(scales), p.weight(zc)}, intAttr("axis", 1))
	return p.op("DequantizeLinear", []string{p.weight(qt), bs, p.weight(zq)},
		intAttr("axis", 0), intAttr("block_size", int64(w.Scheme.Block)))
}

func (q *qdqQuant) activation(p *pass, n *graph.Node, x string) string {
	r, ok := q.cfg.Activations[n.Weight]
	if !ok {
		return x
	}
	return static16(p, x, r)
}

func (q *qdqQuant) output(p *pass, n *graph.Node, y string) string {
	r, ok := q.cfg.Outputs[n.Weight]
	if !ok {
		return y
	}
	return static16(p, y, r)
}

// static16 returns x through a uint16 QuantizeLinear/DequantizeLinear
// pair over r, the arithmetic qdq.Static16 simulates.
func static16(p *pass, x string, r qdq.Range) string {
	s, zp, ok := qdq.Static16Params(r)
	if !ok {
		return p.op("Mul", []string{x, p.scalar(0)})
	}
	b := make([]byte, 2)
	binary.LittleEndian.PutUint16(b, zp)
	sc := p.scalar(s)
	z := p.constant(onnx.Uint16, nil, b)
	return p.op("DequantizeLinear", []string{p.op("QuantizeLinear", []string{x, sc, z}), sc, z})
}

// kvParams returns the scale and zero point initializers of one cache
// layer's keys or values: per head (axis 1 of [1, G, rows, E]).
func (q *qdqQuant) kvParams(p *pass, layer int, value bool) (string, string) {
	s := q.cfg.KV.K[layer]
	if value {
		s = q.cfg.KV.V[layer]
	}
	sc := make([]float32, len(s))
	for i, v := range s {
		sc[i] = v
		if v == 0 {
			sc[i] = math.SmallestNonzeroFloat32
		}
	}
	zp := make([]byte, len(s))
	for i := range zp {
		zp[i] = 128
	}
	return p.constant(onnx.Float, []int64{int64(len(s))}, floatBytes(sc)),
		p.constant(onnx.Uint8, []int64{int64(len(s))}, zp)
}

func (q *qdqQuant) cacheType() onnx.DataType {
	if q.cfg.KV == nil {
		return onnx.Float
	}
	return onnx.Uint8
}

func (q *qdqQuant) cacheIn(p *pass, layer int, value bool, x string) string {
	if q.cfg.KV == nil {
		return x
	}
	s, z := q.kvParams(p, layer, value)
	return p.op("DequantizeLinear", []string{x, s, z}, intAttr("axis", 1))
}

func (q *qdqQuant) cacheOut(p *pass, layer int, value bool, x string) string {
	if q.cfg.KV == nil {
		return x
	}
	s, z := q.kvParams(p, layer, value)
	return p.op("QuantizeLinear", []string{x, s, z}, intAttr("axis", 1))
}

// cacheRows clamps the new rows to +-127 steps of their head's scale, as
// the cache's quantization does (uint8 would hold -128 steps), then
// rounds them to the cache.
func (q *qdqQuant) cacheRows(p *pass, layer int, value bool, x string) string {
	if q.cfg.KV == nil {
		return x
	}
	s := q.cfg.KV.K[layer]
	if value {
		s = q.cfg.KV.V[layer]
	}
	hi := make([]float32, len(s))
	lo := make([]float32, len(s))
	for i, v := range s {
		hi[i], lo[i] = 127*v, -127*v
	}
	dims := []int64{1, int64(len(s)), 1, 1}
	x = p.op("Min", []string{x, p.constant(onnx.Float, dims, floatBytes(hi))})
	x = p.op("Max", []string{x, p.constant(onnx.Float, dims, floatBytes(lo))})
	return q.cacheIn(p, layer, value, q.cacheOut(p, layer, value, x))
}

func transposeI8(w []int8, rows, cols int) []int8 {
	t := make([]int8, len(w))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			t[c*rows+r] = w[r*cols+c]
		}
	}
	return t
}

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
