package onnxexport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/onnx"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

// qnnOps are the ONNX ops of the QNN execution provider's published list
// of supported operators that the export may write.
var qnnOps = map[string]bool{
	"Add": true, "And": true, "Cast": true, "Concat": true, "DequantizeLinear": true, "Equal": true,
	"Gather": true, "Gelu": true, "Greater": true, "LayerNormalization": true, "LessOrEqual": true,
	"MatMul": true, "Max": true, "Min": true, "Mul": true, "QuantizeLinear": true, "Reciprocal": true,
	"ReduceMean": true, "ReduceSum": true, "Relu": true, "Reshape": true, "Sigmoid": true, "Slice": true,
	"Softmax": true, "Sqrt": true, "Sub": true, "Tanh": true, "Transpose": true, "Unsqueeze": true, "Where": true,
}

func readModel(t *testing.T, path string) *onnx.Model {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestQDQGraphsMeetQNNRequirements reads both graphs of a QDQ export of
// w4a16-lpbq stories260K and checks what the QNN provider requires and
// can be checked without a device: opset 21 or later, static shapes on
// every input and output, only ops of the provider's list, every LPBQ
// linear in the shape LowPowerBlockQuantizedMatMulFusion matches (a
// DequantizeLinear of an int4 initializer with an int4 zero point, axis 0
// and a block size, whose scale is the DequantizeLinear of a uint8
// initializer of block codes by a per-channel float initializer), W8
// linears per channel, 16-bit activation pairs before every MatMul of a
// weight, a uint8 cache, and initializers of both graphs naming the same
// ranges of one weights file.
func TestQDQGraphsMeetQNNRequirements(t *testing.T) {
	dir := quantizeModel(t, "models/stories260K/stories260K.gguf", "w4a16-lpbq")
	q, err := OpenQuantized(dir, 128, true)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := t.TempDir()
	if err := Export(out, q.Model, Options{ARLen: 16, Context: 128, Quant: q.QDQ}); err != nil {
		t.Fatal(err)
	}
	_, man, err := qmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := arch.Build(&q.Model.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{} // schemes of the linears' weights
	for _, n := range ag.Nodes {
		if n.Op == op.Linear {
			kinds[man.Tensors[n.Weight].Scheme.Kind]++
		}
	}
	st, err := os.Stat(filepath.Join(out, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string]onnx.Tensor{}
	for _, file := range []string{PrefillFile, DecodeFile} {
		m := readModel(t, filepath.Join(out, file))
		if m.IRVersion < 10 || m.Opset < 21 {
			t.Fatalf("%s: IR %d opset %d, want 10 and 21 or later", file, m.IRVersion, m.Opset)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		g := &m.Graph
		made := map[string]*onnx.Node{}
		for i := range g.Nodes {
			n := &g.Nodes[i]
			if !qnnOps[n.OpType] || n.Domain != "" {
				t.Errorf("%s: op %s (domain %q) is not in the QNN provider's list", file, n.OpType, n.Domain)
			}
			for _, o := range n.Outputs {
				made[o] = n
			}
		}
		inits := map[string]onnx.Tensor{}
		for _, w := range g.Initializers {
			inits[w.Name] = w
			if w.Location != "" {
				if w.Location != WeightsFile || w.Offset+w.Length > st.Size() || int64(w.Type.RawSize(w.Elems())) != w.Length {
					t.Errorf("%s: %s names %s [%d, +%d) of a %d-byte file", file, w.Name, w.Location, w.Offset, w.Length, st.Size())
				}
				if prev, ok := ranges[w.Name]; ok && (prev.Offset != w.Offset || prev.Length != w.Length) {
					t.Errorf("%s: %s is stored twice", file, w.Name)
				}
				ranges[w.Name] = w
			}
		}
		lpbq, w8 := 0, 0
		for i := range g.Nodes {
			n := &g.Nodes[i]
			if n.OpType != "MatMul" {
				continue
			}
			dq := made[n.Inputs[1]]
			if dq == nil || dq.OpType != "DequantizeLinear" {
				continue // attention's MatMuls, float weights
			}
			w, zp := inits[dq.Inputs[0]], inits[dq.Inputs[2]]
			switch w.Type {
			case onnx.Int4:
				lpbq++
				axis, _ := dq.Attr("axis")
				bs, _ := dq.Attr("block_size")
				sdq := made[dq.Inputs[1]]
				if zp.Type != onnx.Int4 || axis.I != 0 || bs.I <= 0 || len(w.Dims) != 2 || sdq == nil || sdq.OpType != "DequantizeLinear" {
					t.Fatalf("%s: LPBQ weight %s: zero point %v, axis %d, block %d, scale from %v", file, w.Name, zp.Type, axis.I, bs.I, sdq)
				}
				codes, chScale := inits[sdq.Inputs[0]], inits[sdq.Inputs[1]]
				sAxis, _ := sdq.Attr("axis")
				K, N := w.Dims[0], w.Dims[1]
				nb := (K + bs.I - 1) / bs.I
				if codes.Type != onnx.Uint8 || len(codes.Dims) != 2 || codes.Dims[0] != nb || codes.Dims[1] != N ||
					chScale.Type != onnx.Float || len(chScale.Dims) != 1 || chScale.Dims[0] != N || sAxis.I != 1 {
					t.Fatalf("%s: LPBQ scales of %s: codes %v %v, channel scales %v %v, axis %d", file, w.Name,
						codes.Type, codes.Dims, chScale.Type, chScale.Dims, sAxis.I)
				}
			case onnx.Int8:
				w8++
				axis, _ := dq.Attr("axis")
				if axis.I != 1 || len(inits[dq.Inputs[1]].Dims) != 1 || inits[dq.Inputs[1]].Dims[0] != w.Dims[1] {
					t.Fatalf("%s: W8 weight %s is not per channel", file, w.Name)
				}
			default:
				continue
			}
			var q *onnx.Node
			for i := range g.Nodes {
				if c := &g.Nodes[i]; len(c.Inputs) > 0 && c.Inputs[0] == n.Outputs[0] {
					if q != nil {
						t.Fatalf("%s: the MatMul of %s has more than one reader", file, w.Name)
					}
					q = c
				}
			}
			if n.Outputs[0] == Logits {
				// the classifier: its output is the graph's
			} else if q == nil || q.OpType != "QuantizeLinear" || inits[q.Inputs[2]].Type != onnx.Uint16 {
				t.Fatalf("%s: the output of the MatMul of %s is not quantized to 16 bits", file, w.Name)
			}
			adq := made[n.Inputs[0]]
			if adq == nil || adq.OpType != "DequantizeLinear" || made[adq.Inputs[0]] == nil ||
				made[adq.Inputs[0]].OpType != "QuantizeLinear" || inits[adq.Inputs[2]].Type != onnx.Uint16 {
				t.Fatalf("%s: the input of the MatMul of %s is not a 16-bit QDQ pair", file, w.Name)
			}
		}
		if lpbq != kinds[string(quant.KindLPBQ)] || w8 != kinds[string(quant.KindW8)] || lpbq == 0 || w8 == 0 {
			t.Fatalf("%s: %d LPBQ and %d W8 MatMuls, the folder has %v", file, lpbq, w8, kinds)
		}
		for _, v := range append(append([]onnx.Value(nil), g.Inputs...), g.Outputs...) {
			if strings.HasPrefix(v.Name, "past_") || strings.HasPrefix(v.Name, "present.") {
				if v.Type != onnx.Uint8 || len(v.Dims) != 4 || v.Dims[2] != 128 {
					t.Fatalf("%s: cache %s is %v %v, want uint8 [1, G, 128, E]", file, v.Name, v.Type, v.Dims)
				}
			}
		}
		int8Table := false
		for _, n := range g.Nodes {
			if w, ok := inits[n.Inputs[0]]; n.OpType == "Gather" && ok && w.Type == onnx.Int8 && len(w.Dims) == 2 &&
				int(w.Dims[0]) == q.Model.Config.Vocab {
				int8Table = true
			}
		}
		if man.Tensors["model.embed_tokens.weight"].Scheme.Kind == string(quant.KindW8) && !int8Table {
			t.Errorf("%s: the W8 embedding table is not gathered in int8", file)
		}
		t.Logf("%s: %d nodes, %d LPBQ and %d W8 linears, int8 embedding table %v", file, len(g.Nodes), lpbq, w8, int8Table)
	}
}

// TestRefusesUnmappedOps checks that a graph with a recurrent op is
// refused with an error naming the op.
func TestRefusesUnmappedOps(t *testing.T) {
	g := graph.New()
	g.Nodes = append(g.Nodes, graph.Node{Op: op.Tokens}, graph.Node{Op: op.TokenShift, In: []int{0}, Cols: 4, Name: "blk.0.shift"})
	err := checkOps(g)
	if err == nil || !strings.Contains(err.Error(), "op token_shift (node 1 blk.0.shift)") {
		t.Fatalf("got %v, want a refusal naming token_shift and the node", err)
	}
}
