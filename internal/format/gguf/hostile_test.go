package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// raw builds GGUF bytes field by field, including invalid ones.
type raw struct{ b []byte }

func (r *raw) u8(v uint8) *raw   { r.b = append(r.b, v); return r }
func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { return r.u64(uint64(len(s))).bytes([]byte(s)) }
func (r *raw) bytes(b []byte) *raw {
	r.b = append(r.b, b...)
	return r
}

// head starts a v3 file with the given counts.
func head(tensors, kvs uint64) *raw {
	return (&raw{}).bytes([]byte("GGUF")).u32(3).u64(tensors).u64(kvs)
}

// tinfo appends a tensor info.
func (r *raw) tinfo(name string, typ GGMLType, off uint64, ne ...uint64) *raw {
	r.str(name).u32(uint32(len(ne)))
	for _, n := range ne {
		r.u64(n)
	}
	return r.u32(uint32(typ)).u64(off)
}

// pad pads to 32 bytes and appends n zero data bytes.
func (r *raw) data(n int) *raw {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

func openBytes(b []byte) (*File, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), "test.gguf")
}

func TestHostile(t *testing.T) {
	nest := head(0, 1).str("deep").u32(uint32(ValueArray))
	for range 20 {
		nest.u32(uint32(ValueArray)).u64(1)
	}
	nest.u32(uint32(ValueUint8)).u64(0)

	for _, c := range []struct {
		name  string
		b     []byte
		field string // want a *format.Error with this Field ("" = UnsupportedError)
		msg   string // and this text in the message
	}{
		{"empty", nil, "header", "shorter than"},
		{"short header", []byte("GGUF\x03\x00\x00\x00\x00"), "header", "shorter than"},
		{"bad magic", (&raw{}).bytes([]byte("GGUG")).u32(3).u64(0).u64(0).b, "magic", "GGUG"},
		{"version 1", (&raw{}).bytes([]byte("GGUF")).u32(1).u64(0).u64(0).b, "", "version 1"},
		{"version 4", (&raw{}).bytes([]byte("GGUF")).u32(4).u64(0).u64(0).b, "", "version 4"},
		{"big-endian", (&raw{}).bytes([]byte("GGUF")).u32(3 << 24).u64(0).u64(0).b, "", "big-endian"},
		{"tensor count", head(1<<40, 0).b, "tensor_count", "exceeds"},
		{"tensor count negative", head(math.MaxUint64, 0).b, "tensor_count", "exceeds"},
		{"kv count", head(0, 1<<40).b, "kv_count", "exceeds"},
		{"header claims more kvs", head(0, 2).str("a").u32(uint32(ValueUint8)).u8(1).u64(100).u32(0).u8(0).b, "kv[1].key", "past end"},
		{"key length", head(0, 1).u64(1 << 50).u64(0).b, "kv[0].key", "past end"},
		{"string value length", head(0, 1).str("k").u32(uint32(ValueString)).u64(100).bytes([]byte("abc")).b, "k", "past end"},
		{"truncated scalar", head(0, 1).str("k").u32(uint32(ValueUint64)).u32(0).b, "k", "past end"},
		{"unknown value type", head(0, 1).str("k").u32(13).u64(0).b, "k", "unknown value type 13"},
		{"bool byte", head(0, 1).str("k").u32(uint32(ValueBool)).u8(2).b, "k", "neither 0 nor 1"},
		{"array count", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueUint32)).u64(1 << 61).b, "k", "exceeds"},
		{"array elem type", head(0, 1).str("k").u32(uint32(ValueArray)).u32(77).u64(1).b, "k", "element type 77"},
		{"array of strings", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(2).str("a").u64(9).b, "k", "element 1"},
		{"deep nesting", nest.b, "deep", "nested deeper"},
		{"duplicate key", head(0, 2).str("k").u32(uint32(ValueUint8)).u8(1).str("k").u32(uint32(ValueUint8)).u8(2).b, "k", "duplicate"},
		{"alignment 48", head(0, 1).str("general.alignment").u32(uint32(ValueUint32)).u32(48).b, "general.alignment", "power of two"},
		{"alignment 0", head(0, 1).str("general.alignment").u32(uint32(ValueUint32)).u32(0).b, "general.alignment", "power of two"},
		{"alignment string", head(0, 1).str("general.alignment").u32(uint32(ValueString)).str("32").b, "general.alignment", "not an integer"},
		{"tensor name length", head(1, 0).u64(1 << 40).u64(0).u64(0).u64(0).b, "tensor[0].name", "past end"},
		{"header claims more tensors", head(2, 0).tinfo("a", TypeF32, 0, 1).u64(100).u64(0).b, "tensor[1].name", "past end"},
		{"empty tensor name", head(2, 0).tinfo("a", TypeF32, 0, 1).data(4).b, "tensor[1].name", "empty tensor name"},
		{"n_dims 5", head(1, 0).tinfo("t", TypeF32, 0, 1, 1, 1, 1, 1).data(4).b, "t", "n_dims 5"},
		{"dim over int64", head(1, 0).tinfo("t", TypeF32, 0, 1<<63).data(4).b, "t", "overflows"},
		{"dims product", head(1, 0).tinfo("t", TypeF32, 0, 1<<40, 1<<40).data(4).b, "t", "overflows"},
		{"byte size", head(1, 0).tinfo("t", TypeF64, 0, 1<<61).data(4).b, "t", "overflows"},
		{"unknown ggml type", head(1, 0).tinfo("t", 99, 0, 1).data(4).b, "", `"t": unknown ggml type 99`},
		{"retired ggml type", head(1, 0).tinfo("t", 4, 0, 32).data(32).b, "", `"t": unknown ggml type 4`},
		{"partial block", head(1, 0).tinfo("t", TypeQ8_0, 0, 33, 2).data(136).b, "t", "whole number of Q8_0 blocks"},
		{"scalar block", head(1, 0).tinfo("t", TypeQ4_0, 0).data(32).b, "t", "whole number"},
		{"unaligned offset", head(1, 0).tinfo("t", TypeF32, 4, 1).data(8).b, "t", "not a multiple of the alignment"},
		{"offset over int64", head(1, 0).tinfo("t", TypeF32, 1<<63, 1).data(4).b, "t", "overflows"},
		{"data past end", head(1, 0).tinfo("t", TypeF32, 0, 16).data(60).b, "t", "past end of file"},
		{"offset past end", head(1, 0).tinfo("t", TypeF32, 1<<40, 1).data(4).b, "t", "past end of file"},
		{"overlap", head(2, 0).tinfo("a", TypeF32, 0, 16).tinfo("b", TypeF32, 32, 16).data(96).b, "b", `overlaps tensor "a"`},
		{"same offset", head(2, 0).tinfo("a", TypeF32, 0, 4).tinfo("b", TypeF32, 0, 4).data(16).b, "b", `overlaps tensor "a"`},
		{"duplicate tensor", head(2, 0).tinfo("t", TypeF32, 0, 1).tinfo("t", TypeF32, 32, 1).data(64).b, "t", "duplicate tensor name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := openBytes(c.b)
			if err == nil {
				t.Fatal("opened without error")
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not contain %q", err, c.msg)
			}
			var fe *format.Error
			var ue *format.UnsupportedError
			switch {
			case c.field == "":
				if !errors.As(err, &ue) {
					t.Errorf("error %v (%T), want *format.UnsupportedError", err, err)
				}
			case !errors.As(err, &fe):
				t.Errorf("error %v (%T), want *format.Error", err, err)
			case fe.Field != c.field || fe.File != "test.gguf" || fe.Format != "gguf":
				t.Errorf("error names field %q of %q (%s), want field %q of test.gguf", fe.Field, fe.File, fe.Format, c.field)
			}
		})
	}
}

// TestHostileValid checks edge cases that are valid.
func TestHostileValid(t *testing.T) {
	// Zero-size tensors may share an offset; a 0-dim tensor is a scalar.
	b := head(3, 0).tinfo("e1", TypeF32, 0, 0).tinfo("e2", TypeF32, 0, 4, 0).tinfo("s", TypeF32, 0).data(4).b
	binary.LittleEndian.PutUint32(b[len(b)-4:], math.Float32bits(2.5))
	f, err := openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := f.ReadFloat32("s"); err != nil || len(v) != 1 || v[0] != 2.5 {
		t.Errorf("scalar = %v, %v; want [2.5]", v, err)
	}
	if v, err := f.ReadFloat32("e2"); err != nil || len(v) != 0 {
		t.Errorf("empty = %v, %v", v, err)
	}
	// Unknown-to-aotlm but valid ggml types are listed with their ggml type.
	b = head(1, 0).tinfo("k", TypeIQ2_XXS, 0, 256, 2).data(2 * 66).b
	f, err = openBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	ti := f.Tensors()[0]
	if typ, _ := f.TensorType("k"); typ != TypeIQ2_XXS || ti.DType != tensor.Invalid || ti.Size != 132 {
		t.Errorf("IQ2_XXS tensor: type %v dtype %v size %d", typ, ti.DType, ti.Size)
	}
	var ue *format.UnsupportedError
	if _, err := f.ReadFloat32("k"); !errors.As(err, &ue) || !strings.Contains(ue.What, `"k"`) || !strings.Contains(ue.What, "IQ2_XXS") {
		t.Errorf("ReadFloat32(IQ2_XXS) = %v, want UnsupportedError naming k and IQ2_XXS", err)
	}
	if _, err := f.ReadFloat32("missing"); err == nil {
		t.Error("ReadFloat32 of a missing tensor succeeded")
	}
}

// TestTruncated cuts a valid file at every length: every prefix that ends
// inside the header or the data fails with a typed error, never a panic.
func TestTruncated(t *testing.T) {
	full := writeBytes(t, allKVs(), allTensors())
	f, err := openBytes(full)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for _, ti := range f.Tensors() {
		last = max(last, ti.Offset+ti.Size)
	}
	for n := range int(last) {
		_, err := openBytes(full[:n])
		var fe *format.Error
		if !errors.As(err, &fe) {
			t.Fatalf("prefix of %d bytes: error %v (%T), want *format.Error", n, err, err)
		}
	}
	for n := last; n <= int64(len(full)); n++ {
		if _, err := openBytes(full[:n]); err != nil {
			t.Fatalf("prefix of %d bytes (all data present): %v", n, err)
		}
	}
}

type failingReader struct{ err error }

func (r failingReader) ReadAt([]byte, int64) (int, error) { return 0, r.err }

// TestReadError checks that a failing reader is reported as such, not as
// malformed input.
func TestReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := OpenReader(failingReader{boom}, 100, "x")
	var fe *format.Error
	if !errors.Is(err, boom) || errors.As(err, &fe) {
		t.Errorf("error %v, want one wrapping the reader's error and no *format.Error", err)
	}
	if _, err := OpenReader(bytes.NewReader(nil), -1, "x"); err == nil {
		t.Error("negative size accepted")
	}
	var _ io.ReaderAt = failingReader{}
}

// TestLargeMetadataArraysStayTyped: the metadata of a file with large
// arrays of every element type costs about what the file holds. Widened to
// one interface value per element, a 115 MB array asked for 1.8 GB; read
// typed, the file's arrays are read once and Metadata shares them.
func TestLargeMetadataArraysStayTyped(t *testing.T) {
	const n = 1 << 20
	strs := make([]string, n)
	for i := range strs {
		strs[i] = "tok"
	}
	kv := []KV{
		{"big.u8", make([]uint8, n)}, {"big.i16", make([]int16, n)}, {"big.u32", make([]uint32, n)},
		{"big.f32", make([]float32, n)}, {"big.i64", make([]int64, n)}, {"big.f64", make([]float64, n)},
		{"big.bool", make([]bool, n)}, {"big.str", strs},
		{"big.nested", []any{make([]int32, n), make([]uint16, n)}},
	}
	data := writeBytes(t, kv, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := OpenReader(bytes.NewReader(data), int64(len(data)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	m := f.Metadata()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// the file's bytes plus the string headers: under twice its size
	if limit := 2*uint64(len(data)) + 16*n; allocated > limit {
		t.Errorf("reading %d bytes of metadata allocated %d bytes, more than %d", len(data), allocated, limit)
	}
	for _, c := range []struct {
		key  string
		want any
	}{{"big.u8", []uint8{}}, {"big.i16", []int16{}}, {"big.u32", []uint32{}}, {"big.f32", []float32{}},
		{"big.i64", []int64{}}, {"big.f64", []float64{}}, {"big.bool", []bool{}}, {"big.str", []string{}}} {
		if reflect.TypeOf(m[c.key]) != reflect.TypeOf(c.want) || reflect.ValueOf(m[c.key]).Len() != n {
			t.Errorf("%s is %T", c.key, m[c.key])
		}
	}
	if nested, ok := m["big.nested"].([]any); !ok || len(nested) != 2 {
		t.Errorf("big.nested is %T", m["big.nested"])
	} else if _, ok := nested[0].([]int32); !ok {
		t.Errorf("big.nested[0] is %T", nested[0])
	}
	if _, ok := format.List(m["big.u8"]); ok {
		t.Errorf("format.List widened an array of %d elements", n)
	}
	if l, ok := format.List([]uint16{1, 2}); !ok || !reflect.DeepEqual(l, []any{uint64(1), uint64(2)}) {
		t.Errorf("format.List of a short array: %#v", l)
	}
}
