package onnx

import (
	"reflect"
	"strings"
	"testing"
)

func sample() *Model {
	return &Model{
		IRVersion: 10, Opset: 21, Producer: "p", Version: "v",
		Metadata: map[string]string{"a": "1", "b": "2"},
		Graph: Graph{
			Name: "g",
			Nodes: []Node{
				{Name: "n1", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"y"}},
				{Name: "n2", OpType: "Softmax", Inputs: []string{"y"}, Outputs: []string{"z"},
					Attrs: []Attr{{Name: "axis", Kind: AttrInt, I: -1}, {Name: "f", Kind: AttrFloat, F: 0.5},
						{Name: "s", Kind: AttrString, S: "tanh"}, {Name: "p", Kind: AttrInts, Ints: []int64{0, 2, 1}}}},
			},
			Initializers: []Tensor{
				{Name: "w", Type: Float, Dims: []int64{2, 3}, Raw: make([]byte, 24)},
				{Name: "e", Type: Int4, Dims: []int64{4, 4}, Location: "d.bin", Offset: 64, Length: 8},
			},
			Inputs:  []Value{{Name: "x", Type: Float, Dims: []int64{1, 2}}},
			Outputs: []Value{{Name: "z", Type: Float, Dims: []int64{1, 3}}},
		},
	}
}

// TestRoundTrip checks that Unmarshal reads back every field Marshal
// writes, negative attribute values and external data included.
func TestRoundTrip(t *testing.T) {
	m := sample()
	got, err := Unmarshal(m.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCheck checks that structural errors are reported.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Model)
		want string
	}{
		{"undefined input", func(m *Model) { m.Graph.Nodes[0].Inputs[0] = "nope" }, "before it is defined"},
		{"dynamic dim", func(m *Model) { m.Graph.Inputs[0].Dims[0] = -1 }, "not static"},
		{"twice", func(m *Model) { m.Graph.Nodes[1].Outputs[0] = "y" }, "defined twice"},
		{"no output", func(m *Model) { m.Graph.Outputs[0].Name = "q" }, "not produced"},
	} {
		m := sample()
		c.edit(m)
		if err := m.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestUnmarshalTruncated checks that cut input is an error, not a panic.
func TestUnmarshalTruncated(t *testing.T) {
	b := sample().Marshal()
	for _, n := range []int{1, 7, len(b) / 2, len(b) - 1} {
		if _, err := Unmarshal(b[:n]); err == nil {
			t.Errorf("%d of %d bytes: no error", n, len(b))
		}
	}
}

// TestInt4Size checks the packed size of 4-bit tensors.
func TestInt4Size(t *testing.T) {
	if Int4.RawSize(5) != 3 || Float.RawSize(3) != 12 || Uint16.RawSize(2) != 4 {
		t.Fatal("raw sizes")
	}
}
