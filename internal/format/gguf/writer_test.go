package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// allKVs holds every value type, arrays of each, nested and empty arrays.
func allKVs() []KV {
	return []KV{
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5)},
		{"bool.t", true}, {"bool.f", false}, {"str", "héllo"}, {"str.empty", ""},
		{"u64", uint64(math.MaxUint64)}, {"i64", int64(math.MinInt64)}, {"f64", math.Pi},
		{"a.u8", []uint8{0, 255}}, {"a.i8", []int8{-128, 127}}, {"a.u16", []uint16{1, 65535}},
		{"a.i16", []int16{-1, 2}}, {"a.u32", []uint32{7}}, {"a.i32", []int32{-7, 8}},
		{"a.f32", []float32{0.25, -2}}, {"a.bool", []bool{true, false, true}},
		{"a.str", []string{"a", "", "ccc"}}, {"a.u64", []uint64{1 << 63}}, {"a.i64", []int64{-1 << 62}},
		{"a.f64", []float64{1e300}}, {"a.empty", []string{}},
		{"a.nested", []any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{9}}}},
		{"a.nested.empty", []any{}},
	}
}

func randn(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

func allTensors() []WriteTensor {
	r := rand.New(rand.NewPCG(1, 2))
	i32 := make([]byte, 4*6)
	for i := range i32 {
		i32[i] = byte(i)
	}
	return []WriteTensor{
		{Name: "f32", DType: tensor.F32, Shape: []int64{3, 5}, Values: randn(r, 15)},
		{Name: "f16", DType: tensor.F16, Shape: []int64{7}, Values: randn(r, 7)},
		{Name: "bf16", DType: tensor.BF16, Shape: []int64{2, 3, 1}, Values: randn(r, 6)},
		{Name: "q8_0", DType: tensor.Q8_0, Shape: []int64{4, 64}, Values: randn(r, 256)},
		{Name: "q4_0", DType: tensor.Q4_0, Shape: []int64{2, 1, 3, 32}, Values: randn(r, 192)},
		{Name: "i32", DType: tensor.I32, Shape: []int64{6}, Data: i32},
		{Name: "scalar", DType: tensor.F32, Shape: []int64{}, Values: []float32{42}},
		{Name: "empty", DType: tensor.F32, Shape: []int64{0, 4}, Values: []float32{}},
	}
}

func writeBytes(t testing.TB, kv []KV, ts []WriteTensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteRoundTrip(t *testing.T) {
	kv, ts := allKVs(), allTensors()
	data := writeBytes(t, kv, ts)
	path := filepath.Join(t.TempDir(), "all.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mapped := openT(t, path)
	read, err := OpenReader(bytes.NewReader(data), int64(len(data)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*File{mapped, read} {
		if f.Version() != 3 || f.Alignment() != 32 {
			t.Errorf("version %d alignment %d", f.Version(), f.Alignment())
		}
		if !reflect.DeepEqual(f.KVs(), kv) {
			t.Errorf("KVs differ:\n got %#v\nwant %#v", f.KVs(), kv)
		}
		m := f.Metadata()
		for key, want := range map[string]any{
			"u8": uint64(200), "i8": int64(-100), "u32": uint64(4000000000), "i64": int64(math.MinInt64),
			"f32": 1.5, "bool.t": true, "str": "héllo", "a.i16": []int16{-1, 2},
			"a.f32": []float32{0.25, -2.0}, "a.empty": []string{},
			"a.nested": []any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{9}}},
		} {
			if !reflect.DeepEqual(m[key], want) {
				t.Errorf("Metadata[%q] = %#v, want %#v", key, m[key], want)
			}
		}
		infos := f.Tensors()
		if len(infos) != len(ts) {
			t.Fatalf("%d tensors, want %d", len(infos), len(ts))
		}
		for i, w := range ts {
			ti := infos[i]
			if ti.Name != w.Name || ti.DType != w.DType || !slices.Equal(ti.Shape, w.Shape) {
				t.Errorf("tensor %d: %s %v %v, want %s %v %v", i, ti.Name, ti.DType, ti.Shape, w.Name, w.DType, w.Shape)
			}
			if (ti.Offset-f.DataOffset())%32 != 0 || f.DataOffset()%32 != 0 {
				t.Errorf("%s: offset %d, data section %d not 32-aligned", ti.Name, ti.Offset, f.DataOffset())
			}
			if w.Values == nil {
				continue
			}
			got, err := f.ReadFloat32(w.Name)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(w.Values))
			switch w.DType {
			case tensor.F32:
				copy(want, w.Values)
			case tensor.F16:
				for j, v := range w.Values {
					want[j] = tensor.F16ToF32(tensor.F32ToF16(v))
				}
			case tensor.BF16:
				for j, v := range w.Values {
					want[j] = tensor.BF16ToF32(tensor.F32ToBF16(v))
				}
			case tensor.Q8_0:
				DequantizeQ8_0(want, QuantizeQ8_0(w.Values))
			case tensor.Q4_0:
				DequantizeQ4_0(want, QuantizeQ4_0(w.Values))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: read %v, want %v", w.Name, got, want)
			}
		}
		raw, err := f.TensorData("i32")
		if err != nil || !bytes.Equal(raw, ts[5].Data) {
			t.Errorf("TensorData(i32) = %v, %v; want %v", raw, err, ts[5].Data)
		}
		_, err = f.ReadFloat32("i32")
		var ue *format.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(ue.What, `"i32"`) || !strings.Contains(ue.What, "I32") {
			t.Errorf("ReadFloat32(i32) = %v, want an UnsupportedError naming the tensor and I32", err)
		}
	}
}

// TestRewriteStories writes the metadata and raw tensors of a file produced
// by llama.cpp's gguf-py back out and expects the identical bytes.
func TestRewriteStories(t *testing.T) {
	path := testutil.Path(t, stories)
	f := openT(t, path)
	var ts []WriteTensor
	for _, ti := range f.Tensors() {
		raw, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: raw})
	}
	got := writeBytes(t, f.KVs(), ts)
	want := testutil.ReadFile(t, stories)
	if !bytes.Equal(got, want) {
		n := 0
		for n < min(len(got), len(want)) && got[n] == want[n] {
			n++
		}
		t.Errorf("rewrite differs from the original at byte %d (lengths %d, %d)", n, len(got), len(want))
	}
}

func TestWriteAlignment(t *testing.T) {
	kv := []KV{{"general.alignment", uint32(64)}}
	ts := []WriteTensor{
		{Name: "a", DType: tensor.F32, Shape: []int64{3}, Values: []float32{1, 2, 3}},
		{Name: "b", DType: tensor.F32, Shape: []int64{1}, Values: []float32{4}},
	}
	data := writeBytes(t, kv, ts)
	f, err := OpenReader(bytes.NewReader(data), int64(len(data)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment() != 64 {
		t.Errorf("alignment %d, want 64", f.Alignment())
	}
	for _, ti := range f.Tensors() {
		if ti.Offset%64 != 0 {
			t.Errorf("%s: offset %d not 64-aligned", ti.Name, ti.Offset)
		}
	}
	if b, _ := f.ReadFloat32("b"); !slices.Equal(b, []float32{4}) {
		t.Errorf("b = %v", b)
	}
}

func TestWriteErrors(t *testing.T) {
	f32 := func(name string, shape []int64, n int) WriteTensor {
		return WriteTensor{Name: name, DType: tensor.F32, Shape: shape, Values: make([]float32, n)}
	}
	for _, c := range []struct {
		name string
		kv   []KV
		ts   []WriteTensor
		want string
	}{
		{"dup key", []KV{{"k", uint8(1)}, {"k", uint8(2)}}, nil, `duplicate metadata key "k"`},
		{"bad go type", []KV{{"k", 3}}, nil, `"k"`},
		{"mixed array", []KV{{"k", []any{uint8(1), "x"}}}, nil, "element 1"},
		{"bad alignment", []KV{{"general.alignment", uint32(48)}}, nil, "general.alignment"},
		{"dup tensor", nil, []WriteTensor{f32("t", []int64{1}, 1), f32("t", []int64{1}, 1)}, `duplicate tensor name "t"`},
		{"empty name", nil, []WriteTensor{f32("", []int64{1}, 1)}, "empty name"},
		{"value count", nil, []WriteTensor{f32("t", []int64{2}, 3)}, `"t": 3 values`},
		{"five dims", nil, []WriteTensor{f32("t", []int64{1, 1, 1, 1, 1}, 1)}, "5 dimensions"},
		{"q8 row", nil, []WriteTensor{{Name: "t", DType: tensor.Q8_0, Shape: []int64{2, 16}, Values: make([]float32, 32)}}, "whole number"},
		{"data size", nil, []WriteTensor{{Name: "t", DType: tensor.F16, Shape: []int64{2}, Data: make([]byte, 3)}}, "3 bytes"},
		{"dtype", nil, []WriteTensor{{Name: "t", DType: tensor.U8, Shape: []int64{2}, Data: make([]byte, 2)}}, "u8"},
		{"i32 values", nil, []WriteTensor{{Name: "t", DType: tensor.I32, Shape: []int64{1}, Values: []float32{1}}}, "give Data"},
	} {
		err := Write(&bytes.Buffer{}, c.kv, c.ts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestWriteStream checks that a streamed tensor is stored exactly as the
// same bytes given as Data, and that a stream of the wrong length, or one
// that fails, is refused with the tensor's name.
func TestWriteStream(t *testing.T) {
	data := make([]byte, 2*3*40)
	for i := range data {
		data[i] = byte(i * 7)
	}
	stream := func(b []byte) func(w io.Writer) error {
		return func(w io.Writer) error {
			for len(b) > 0 { // in pieces, as a generator writes
				n := min(len(b), 17)
				if _, err := w.Write(b[:n]); err != nil {
					return err
				}
				b = b[n:]
			}
			return nil
		}
	}
	tail := WriteTensor{Name: "tail", DType: tensor.F32, Shape: []int64{3}, Values: []float32{1, 2, 3}}
	var want, got bytes.Buffer
	if err := Write(&want, nil, []WriteTensor{{Name: "w", DType: tensor.F16, Shape: []int64{3, 40}, Data: data}, tail}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&got, nil, []WriteTensor{{Name: "w", DType: tensor.F16, Shape: []int64{3, 40}, Stream: stream(data)}, tail}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Fatalf("streamed file differs from the one with Data (%d and %d bytes)", got.Len(), want.Len())
	}
	for _, c := range []struct {
		name string
		wt   WriteTensor
		msg  string
	}{
		{"short", WriteTensor{Name: "w", DType: tensor.F16, Shape: []int64{3, 40}, Stream: stream(data[:100])}, "wrote 100 bytes"},
		{"failing", WriteTensor{Name: "w", DType: tensor.F16, Shape: []int64{3, 40}, Stream: func(io.Writer) error { return errors.New("no source") }}, "no source"},
		{"both", WriteTensor{Name: "w", DType: tensor.F16, Shape: []int64{3, 40}, Data: data, Stream: stream(data)}, "a stream and also"},
	} {
		err := Write(io.Discard, nil, []WriteTensor{c.wt})
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), `"w"`) {
			t.Errorf("%s: err = %v, want one naming tensor \"w\" and %q", c.name, err, c.msg)
		}
	}
}
