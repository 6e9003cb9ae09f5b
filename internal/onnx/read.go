package onnx

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Unmarshal decodes the fields of a ModelProto that Marshal writes (other
// fields are skipped), so a written model can be read back and checked.
func Unmarshal(b []byte) (*Model, error) {
	m := &Model{Metadata: map[string]string{}}
	err := fields(b, func(num protowire.Number, v uint64, p []byte) error {
		switch num {
		case 1:
			m.IRVersion = int64(v)
		case 2:
			m.Producer = string(p)
		case 3:
			m.Version = string(p)
		case 7:
			return m.Graph.unmarshal(p)
		case 8:
			var domain string
			var ver int64
			err := fields(p, func(n protowire.Number, v uint64, p []byte) error {
				switch n {
				case 1:
					domain = string(p)
				case 2:
					ver = int64(v)
				}
				return nil
			})
			if err == nil && domain == "" {
				m.Opset = ver
			}
			return err
		case 14:
			k, v, err := stringEntry(p)
			m.Metadata[k] = v
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("onnx: reading model: %w", err)
	}
	return m, nil
}

func (g *Graph) unmarshal(b []byte) error {
	return fields(b, func(num protowire.Number, _ uint64, p []byte) error {
		switch num {
		case 1:
			var n Node
			if err := n.unmarshal(p); err != nil {
				return err
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name = string(p)
		case 5:
			var t Tensor
			if err := t.unmarshal(p); err != nil {
				return err
			}
			g.Initializers = append(g.Initializers, t)
		case 11, 12:
			var v Value
			if err := v.unmarshal(p); err != nil {
				return err
			}
			if num == 11 {
				g.Inputs = append(g.Inputs, v)
			} else {
				g.Outputs = append(g.Outputs, v)
			}
		}
		return nil
	})
}

func (n *Node) unmarshal(b []byte) error {
	return fields(b, func(num protowire.Number, _ uint64, p []byte) error {
		switch num {
		case 1:
			n.Inputs = append(n.Inputs, string(p))
		case 2:
			n.Outputs = append(n.Outputs, string(p))
		case 3:
			n.Name = string(p)
		case 4:
			n.OpType = string(p)
		case 7:
			n.Domain = string(p)
		case 5:
			var a Attr
			if err := a.unmarshal(p); err != nil {
				return err
			}
			n.Attrs = append(n.Attrs, a)
		}
		return nil
	})
}

func (a *Attr) unmarshal(b []byte) error {
	return fields(b, func(num protowire.Number, v uint64, p []byte) error {
		switch num {
		case 1:
			a.Name = string(p)
		case 2:
			a.F = math.Float32frombits(uint32(v))
		case 3:
			a.I = int64(v)
		case 4:
			a.S = string(p)
		case 5:
			a.T = &Tensor{}
			return a.T.unmarshal(p)
		case 7:
			for len(p) > 0 {
				x, n := protowire.ConsumeFixed32(p)
				if n < 0 {
					return protowire.ParseError(n)
				}
				a.Floats = append(a.Floats, math.Float32frombits(x))
				p = p[n:]
			}
		case 8:
			ints, err := varints(p, v)
			a.Ints = append(a.Ints, ints...)
			return err
		case 20:
			a.Kind = AttrKind(v)
		}
		return nil
	})
}

func (t *Tensor) unmarshal(b []byte) error {
	return fields(b, func(num protowire.Number, v uint64, p []byte) error {
		switch num {
		case 1:
			dims, err := varints(p, v)
			for _, d := range dims {
				t.Dims = append(t.Dims, d)
			}
			return err
		case 2:
			t.Type = DataType(v)
		case 8:
			t.Name = string(p)
		case 9:
			t.Raw = append([]byte(nil), p...)
		case 13:
			k, val, err := stringEntry(p)
			if err != nil {
				return err
			}
			switch k {
			case "location":
				t.Location = val
			case "offset", "length":
				x, err := strconv.ParseInt(val, 10, 64)
				if err != nil {
					return fmt.Errorf("tensor %s: external data %s %q: %w", t.Name, k, val, err)
				}
				if k == "offset" {
					t.Offset = x
				} else {
					t.Length = x
				}
			}
		}
		return nil
	})
}

func (v *Value) unmarshal(b []byte) error {
	return fields(b, func(num protowire.Number, _ uint64, p []byte) error {
		switch num {
		case 1:
			v.Name = string(p)
		case 2:
			return fields(p, func(num protowire.Number, _ uint64, p []byte) error {
				if num != 1 {
					return nil
				}
				return fields(p, func(num protowire.Number, x uint64, p []byte) error {
					switch num {
					case 1:
						v.Type = DataType(x)
					case 2:
						return fields(p, func(num protowire.Number, _ uint64, p []byte) error {
							if num != 1 {
								return nil
							}
							d := int64(-1)
							err := fields(p, func(num protowire.Number, x uint64, _ []byte) error {
								if num == 1 {
									d = int64(x)
								}
								return nil
							})
							v.Dims = append(v.Dims, d)
							return err
						})
					}
					return nil
				})
			})
		}
		return nil
	})
}

func stringEntry(b []byte) (k, v string, err error) {
	err = fields(b, func(num protowire.Number, _ uint64, p []byte) error {
		switch num {
		case 1:
			k = string(p)
		case 2:
			v = string(p)
		}
		return nil
	})
	return k, v, err
}

// varints reads a repeated int64 field: packed bytes p, or one unpacked
// value v (p nil).
func varints(p []byte, v uint64) ([]int64, error) {
	if p == nil {
		return []int64{int64(v)}, nil
	}
	var out []int64
	for len(p) > 0 {
		x, n := protowire.ConsumeVarint(p)
		if n < 0 {
			return out, protowire.ParseError(n)
		}
		out = append(out, int64(x))
		p = p[n:]
	}
	return out, nil
}

// fields calls f for each field of message b: v holds a varint or fixed
// value, p the bytes of a length-delimited one (nil otherwise).
func fields(b []byte, f func(num protowire.Number, v uint64, p []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var p []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			p, n = protowire.ConsumeBytes(b)
			if p == nil {
				p = []byte{}
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, v, p); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var errNoGraph = errors.New("onnx: model has no graph")

// Check reports structural errors of m's graph: a node input that no
// initializer, graph input or earlier node output defines, a name defined
// twice, a graph output never produced, or a dimension that is not static.
func (m *Model) Check() error {
	g := &m.Graph
	if len(g.Nodes) == 0 {
		return errNoGraph
	}
	defined := map[string]bool{"": true}
	def := func(name, what string) error {
		if defined[name] {
			return fmt.Errorf("onnx: %s %q defined twice", what, name)
		}
		defined[name] = true
		return nil
	}
	for _, v := range g.Inputs {
		if err := staticDims(v); err != nil {
			return err
		}
		if err := def(v.Name, "input"); err != nil {
			return err
		}
	}
	for _, t := range g.Initializers {
		if err := def(t.Name, "initializer"); err != nil {
			return err
		}
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if !defined[in] {
				return fmt.Errorf("onnx: node %s (%s) reads %q before it is defined", n.Name, n.OpType, in)
			}
		}
		for _, out := range n.Outputs {
			if err := def(out, "node output"); err != nil {
				return err
			}
		}
	}
	for _, v := range g.Outputs {
		if err := staticDims(v); err != nil {
			return err
		}
		if !defined[v.Name] {
			return fmt.Errorf("onnx: graph output %q is not produced", v.Name)
		}
	}
	return nil
}

func staticDims(v Value) error {
	for _, d := range v.Dims {
		if d <= 0 {
			return fmt.Errorf("onnx: %q has a dimension that is not static: %v", v.Name, v.Dims)
		}
	}
	return nil
}
