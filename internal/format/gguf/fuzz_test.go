package gguf

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// FuzzOpen feeds arbitrary bytes to OpenReader. Opening must fail with a
// typed error or succeed; an opened file must read every tensor, and a file
// whose tensors the writer supports must survive a write and reopen.
func FuzzOpen(f *testing.F) {
	// Real files: the first 2 KiB (magic, counts, the first keys), and a
	// small valid file made of stories260K's scalar metadata and one of its
	// tensors. Seeds stay small so minimizing new inputs stays fast.
	for _, rel := range []string{stories, "arch/gemma3/model.gguf"} {
		b := testutil.ReadFile(f, rel)
		f.Add(b[:min(len(b), 2048)])
	}
	g, err := Open(testutil.Path(f, stories))
	if err != nil {
		f.Fatal(err)
	}
	defer g.Close()
	var kv []KV
	for _, e := range g.KVs() {
		if _, err := valueType(e.Value); err == nil && !strings.HasPrefix(e.Key, "tokenizer.ggml.") {
			kv = append(kv, e)
		}
	}
	norm, err := g.ReadFloat32("output_norm.weight")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(writeBytes(f, kv, []WriteTensor{{Name: "output_norm.weight", DType: tensor.F32, Shape: []int64{64}, Values: norm}}))
	// Writer output with every value type and tensor dtype, whole.
	f.Add(writeBytes(f, allKVs(), allTensors()))
	// Crafted hostile inputs.
	f.Add(head(1, 0).tinfo("t", TypeQ4_0, 0, 32).data(18).b)
	f.Add(head(1, 0).tinfo("t", TypeQ8_0, 0, 64).data(68).b)
	f.Add(head(2, 0).tinfo("k", TypeQ4_K, 0, 256).tinfo("x", TypeIQ4_XS, 160, 256).data(160 + 136).b)
	f.Add(head(2, 0).tinfo("a", TypeF32, 0, 16).tinfo("b", TypeF32, 32, 16).data(96).b)
	f.Add(head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueArray)).u64(1).u32(uint32(ValueString)).u64(1).str("x").b)
	f.Add(head(0, 1).str("general.alignment").u32(uint32(ValueUint32)).u32(64).b)
	f.Add([]byte("GGUF"))
	f.Add(writeBytes(f, []KV{{"a.u8", make([]uint8, 300)}, {"a.f32", []float32{1, 2}}, {"a.nested", []any{[]int16{1}, []bool{true}}}}, nil))

	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := openBytes(data)
		if err != nil {
			var fe *format.Error
			var ue *format.UnsupportedError
			if !errors.As(err, &fe) && !errors.As(err, &ue) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		for k, v := range g.Metadata() {
			// arrays stay typed: every value the reader makes is one
			// format.List reads (or refuses as too long), never a panic
			if l, ok := format.List(v); ok {
				if nv, _ := g.Value(k); reflect.ValueOf(nv).Kind() == reflect.Slice && len(l) != reflect.ValueOf(nv).Len() {
					t.Fatalf("%s: format.List has %d elements, the value %d", k, len(l), reflect.ValueOf(nv).Len())
				}
			}
		}
		writable := true
		var ts []WriteTensor
		for _, ti := range g.Tensors() {
			raw, err := g.TensorData(ti.Name)
			if err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("%s: TensorData %d bytes, %v; size %d", ti.Name, len(raw), err, ti.Size)
			}
			typ, _ := g.TensorType(ti.Name)
			v, err := g.ReadFloat32(ti.Name)
			if _, ok := dequantizers[typ]; ok || typ == TypeF32 || typ == TypeF16 || typ == TypeBF16 {
				if err != nil || int64(len(v)) != ti.NumElements() {
					t.Fatalf("%s: ReadFloat32 %d values, %v", ti.Name, len(v), err)
				}
			}
			if _, ok := typeOfDType(ti.DType); !ok {
				writable = false
			}
			ts = append(ts, WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: raw})
		}
		if !writable {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, g.KVs(), ts); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		h, err := openBytes(buf.Bytes())
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if len(h.KVs()) != len(g.KVs()) || len(h.Tensors()) != len(g.Tensors()) {
			t.Fatalf("reopen: %d kvs, %d tensors; want %d, %d", len(h.KVs()), len(h.Tensors()), len(g.KVs()), len(g.Tensors()))
		}
		for i, ti := range h.Tensors() {
			a, _ := h.TensorData(ti.Name)
			b, _ := g.TensorData(ti.Name)
			if ti.Name != ts[i].Name || !bytes.Equal(a, b) {
				t.Fatalf("reopen: tensor %d (%s) differs", i, ti.Name)
			}
		}
	})
}
