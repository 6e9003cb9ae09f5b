package onnxexport

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/onnx"
)

// builder appends nodes to one ONNX graph, naming every value it makes.
type builder struct {
	g      onnx.Graph
	st     *store
	next   int
	consts map[string]string // constant key -> initializer name
	used   map[string]bool   // initializers of the store already listed
}

func newBuilder(name string, st *store) *builder {
	return &builder{g: onnx.Graph{Name: name}, st: st, consts: map[string]string{}, used: map[string]bool{}}
}

// op adds a node with one output and returns the output's name.
func (b *builder) op(opType string, inputs []string, attrs ...onnx.Attr) string {
	b.next++
	out := fmt.Sprintf("%s_%d", opType, b.next)
	b.g.Nodes = append(b.g.Nodes, onnx.Node{
		Name: fmt.Sprintf("n%d_%s", b.next, opType), OpType: opType,
		Inputs: inputs, Outputs: []string{out}, Attrs: attrs,
	})
	return out
}

// rename gives value the name name (a graph output) in the node that
// makes it and in every node that reads it.
func (b *builder) rename(value, name string) {
	for i := range b.g.Nodes {
		n := &b.g.Nodes[i]
		for j := range n.Inputs {
			if n.Inputs[j] == value {
				n.Inputs[j] = name
			}
		}
		for j := range n.Outputs {
			if n.Outputs[j] == value {
				n.Outputs[j] = name
			}
		}
	}
}

// weight lists the stored tensor t as an initializer of this graph and
// returns its name.
func (b *builder) weight(t onnx.Tensor) string {
	if !b.used[t.Name] {
		b.used[t.Name] = true
		b.g.Initializers = append(b.g.Initializers, t)
	}
	return t.Name
}

// constant returns an inline initializer holding raw values of type typ
// and shape dims, one per distinct value.
func (b *builder) constant(typ onnx.DataType, dims []int64, raw []byte) string {
	key := fmt.Sprint(typ, dims, string(raw))
	if name, ok := b.consts[key]; ok {
		return name
	}
	name := fmt.Sprintf("const_%d", len(b.consts))
	b.consts[key] = name
	b.g.Initializers = append(b.g.Initializers, onnx.Tensor{Name: name, Type: typ, Dims: dims, Raw: raw})
	return name
}

func (b *builder) ints(v ...int64) string {
	return b.constant(onnx.Int64, []int64{int64(len(v))}, int64Bytes(v))
}

func (b *builder) scalar(v float32) string {
	return b.constant(onnx.Float, nil, floatBytes([]float32{v}))
}

func (b *builder) reshape(x string, dims ...int64) string {
	return b.op("Reshape", []string{x, b.ints(dims...)})
}

func (b *builder) transpose(x string, perm ...int64) string {
	return b.op("Transpose", []string{x}, intsAttr("perm", perm...))
}

func (b *builder) slice(x string, axis, lo, hi int64) string {
	return b.op("Slice", []string{x, b.ints(lo), b.ints(hi), b.ints(axis)})
}

func (b *builder) unsqueeze(x string, axes ...int64) string {
	return b.op("Unsqueeze", []string{x, b.ints(axes...)})
}

func (b *builder) concat(axis int64, xs ...string) string {
	return b.op("Concat", xs, intAttr("axis", axis))
}

func intAttr(name string, v int64) onnx.Attr { return onnx.Attr{Name: name, Kind: onnx.AttrInt, I: v} }

func intsAttr(name string, v ...int64) onnx.Attr {
	return onnx.Attr{Name: name, Kind: onnx.AttrInts, Ints: v}
}

func floatAttr(name string, v float32) onnx.Attr {
	return onnx.Attr{Name: name, Kind: onnx.AttrFloat, F: v}
}

func stringAttr(name, v string) onnx.Attr {
	return onnx.Attr{Name: name, Kind: onnx.AttrString, S: v}
}

// negBig is the score a masked key gets: exp of it underflows to 0, and a
// row with every key masked still has a finite softmax.
var negBig = float32(-math.MaxFloat32 / 2)
