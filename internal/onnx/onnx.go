// Package onnx writes and reads the parts of the ONNX model format
// (onnx.proto, protocol buffers) that aotlm's export uses: a model with one
// graph of nodes, initializers (inline or in an external data file), typed
// inputs and outputs of static shapes, and node attributes. The messages
// are encoded field by field with protowire; field numbers follow
// onnx.proto.
package onnx

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataType is a TensorProto element type.
type DataType int32

// The element types the export uses (TensorProto.DataType).
const (
	Float   DataType = 1
	Uint8   DataType = 2
	Int8    DataType = 3
	Uint16  DataType = 4
	Int16   DataType = 5
	Int32   DataType = 6
	Int64   DataType = 7
	Bool    DataType = 9
	Float16 DataType = 10
	Int4    DataType = 22
)

func (d DataType) String() string {
	switch d {
	case Float:
		return "float"
	case Uint8:
		return "uint8"
	case Int8:
		return "int8"
	case Uint16:
		return "uint16"
	case Int16:
		return "int16"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case Float16:
		return "float16"
	case Int4:
		return "int4"
	}
	return fmt.Sprintf("type(%d)", int32(d))
}

// Bits is the storage size of one element in bits (0 for unknown types).
func (d DataType) Bits() int {
	switch d {
	case Int4:
		return 4
	case Uint8, Int8, Bool:
		return 8
	case Uint16, Int16, Float16:
		return 16
	case Float, Int32:
		return 32
	case Int64:
		return 64
	}
	return 0
}

// RawSize is the byte size of n elements of d as raw data (4-bit types
// pack two elements a byte, the first in the low nibble).
func (d DataType) RawSize(n int) int { return (n*d.Bits() + 7) / 8 }

// Tensor is a TensorProto: an initializer or a constant attribute. Its
// values are Raw (little-endian, as ONNX raw_data) or, with Location set,
// Length bytes at Offset of that file beside the model.
type Tensor struct {
	Name     string
	Type     DataType
	Dims     []int64
	Raw      []byte
	Location string
	Offset   int64
	Length   int64
}

// Elems is the element count of t's shape.
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// AttrKind is an AttributeProto type.
type AttrKind int32

// The attribute types the export uses.
const (
	AttrFloat  AttrKind = 1
	AttrInt    AttrKind = 2
	AttrString AttrKind = 3
	AttrTensor AttrKind = 4
	AttrFloats AttrKind = 6
	AttrInts   AttrKind = 7
)

// Attr is a node attribute.
type Attr struct {
	Name   string
	Kind   AttrKind
	F      float32
	I      int64
	S      string
	T      *Tensor
	Floats []float32
	Ints   []int64
}

// Node is a NodeProto.
type Node struct {
	Name    string
	OpType  string
	Domain  string
	Inputs  []string
	Outputs []string
	Attrs   []Attr
}

// Attr returns n's attribute called name.
func (n *Node) Attr(name string) (Attr, bool) {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

// Value is a graph input or output: a tensor of static shape.
type Value struct {
	Name string
	Type DataType
	Dims []int64
}

// Graph is a GraphProto.
type Graph struct {
	Name         string
	Nodes        []Node
	Initializers []Tensor
	Inputs       []Value
	Outputs      []Value
}

// Model is a ModelProto with one graph and the default-domain opset.
type Model struct {
	IRVersion int64
	Opset     int64
	Producer  string
	Version   string
	Graph     Graph
	// Metadata becomes metadata_props, in key order of Keys.
	Metadata map[string]string
}

// Marshal encodes m as ONNX protobuf bytes.
func (m *Model) Marshal() []byte {
	var b []byte
	b = appendVarintField(b, 1, uint64(m.IRVersion))
	b = appendStringField(b, 2, m.Producer)
	b = appendStringField(b, 3, m.Version)
	b = appendMessage(b, 7, m.Graph.marshal())
	var op []byte
	op = appendStringField(op, 1, "")
	op = appendVarintField(op, 2, uint64(m.Opset))
	b = appendMessage(b, 8, op)
	for _, k := range sortedKeys(m.Metadata) {
		var e []byte
		e = appendStringField(e, 1, k)
		e = appendStringField(e, 2, m.Metadata[k])
		b = appendMessage(b, 14, e)
	}
	return b
}

func (g *Graph) marshal() []byte {
	var b []byte
	for i := range g.Nodes {
		b = appendMessage(b, 1, g.Nodes[i].marshal())
	}
	b = appendStringField(b, 2, g.Name)
	for i := range g.Initializers {
		b = appendMessage(b, 5, g.Initializers[i].marshal())
	}
	for _, v := range g.Inputs {
		b = appendMessage(b, 11, v.marshal())
	}
	for _, v := range g.Outputs {
		b = appendMessage(b, 12, v.marshal())
	}
	return b
}

func (n *Node) marshal() []byte {
	var b []byte
	for _, s := range n.Inputs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	for _, s := range n.Outputs {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	b = appendStringField(b, 3, n.Name)
	b = appendStringField(b, 4, n.OpType)
	for i := range n.Attrs {
		b = appendMessage(b, 5, n.Attrs[i].marshal())
	}
	b = appendStringField(b, 7, n.Domain)
	return b
}

func (a *Attr) marshal() []byte {
	var b []byte
	b = appendStringField(b, 1, a.Name)
	switch a.Kind {
	case AttrFloat:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.F))
	case AttrInt:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.I))
	case AttrString:
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, a.S)
	case AttrTensor:
		b = appendMessage(b, 5, a.T.marshal())
	case AttrFloats:
		var p []byte
		for _, f := range a.Floats {
			p = protowire.AppendFixed32(p, math.Float32bits(f))
		}
		b = appendMessage(b, 7, p)
	case AttrInts:
		var p []byte
		for _, v := range a.Ints {
			p = protowire.AppendVarint(p, uint64(v))
		}
		b = appendMessage(b, 8, p)
	}
	b = appendVarintField(b, 20, uint64(a.Kind))
	return b
}

func (t *Tensor) marshal() []byte {
	var b []byte
	if len(t.Dims) > 0 {
		var p []byte
		for _, d := range t.Dims {
			p = protowire.AppendVarint(p, uint64(d))
		}
		b = appendMessage(b, 1, p)
	}
	b = appendVarintField(b, 2, uint64(t.Type))
	b = appendStringField(b, 8, t.Name)
	if t.Location != "" {
		for _, kv := range [][2]string{
			{"location", t.Location},
			{"offset", fmt.Sprint(t.Offset)},
			{"length", fmt.Sprint(t.Length)},
		} {
			var e []byte
			e = appendStringField(e, 1, kv[0])
			e = appendStringField(e, 2, kv[1])
			b = appendMessage(b, 13, e)
		}
		b = appendVarintField(b, 14, 1) // data_location EXTERNAL
		return b
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Raw)
	return b
}

func (v *Value) marshal() []byte {
	var shape []byte
	for _, d := range v.Dims {
		var dim []byte
		dim = protowire.AppendTag(dim, 1, protowire.VarintType)
		dim = protowire.AppendVarint(dim, uint64(d))
		shape = appendMessage(shape, 1, dim)
	}
	var tt []byte
	tt = appendVarintField(tt, 1, uint64(v.Type))
	tt = protowire.AppendTag(tt, 2, protowire.BytesType)
	tt = protowire.AppendBytes(tt, shape)
	var typ []byte
	typ = appendMessage(typ, 1, tt)
	var b []byte
	b = appendStringField(b, 1, v.Name)
	b = appendMessage(b, 2, typ)
	return b
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
