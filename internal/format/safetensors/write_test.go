package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

func randomTensors(r *rand.Rand) []Tensor {
	mk := func(name string, d tensor.DType, shape ...int64) Tensor {
		n, _ := tensor.NumElements(shape)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 3)
		}
		return Tensor{Name: name, DType: d, Shape: shape, Data: v}
	}
	return []Tensor{
		mk("z.f32", tensor.F32, 3, 5),
		mk("a.f16", tensor.F16, 7),
		mk("m.bf16", tensor.BF16, 2, 3, 4),
		mk("scalar", tensor.F32),
		mk("empty", tensor.BF16, 0, 4),
		{Name: "raw.i8", DType: tensor.I8, Shape: []int64{5}, Raw: []byte{1, 2, 3, 0xff, 0x80}},
	}
}

func TestWriteRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ts := randomTensors(r)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	meta := map[string]string{"format": "pt", "note": "round trip"}
	if err := Write(path, ts, meta); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Metadata()["safetensors.metadata"].(map[string]any); got["note"] != "round trip" || len(got) != 2 {
		t.Errorf("metadata %v", got)
	}
	if len(c.Tensors()) != len(ts) {
		t.Fatalf("%d tensors, want %d", len(c.Tensors()), len(ts))
	}
	for _, want := range ts {
		ti, ok := format.Find(c, want.Name)
		if !ok || ti.DType != want.DType || !equalShape(ti.Shape, want.Shape) {
			t.Fatalf("%s: %+v", want.Name, ti)
		}
		if want.Raw != nil {
			b, err := c.Bytes(want.Name)
			if err != nil || !bytes.Equal(b, want.Raw) {
				t.Errorf("%s: raw %v %v", want.Name, b, err)
			}
			continue
		}
		got, err := c.ReadFloat32(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want.Data {
			var exp float32
			switch want.DType {
			case tensor.F32:
				exp = v
			case tensor.F16:
				exp = tensor.F16ToF32(tensor.F32ToF16(v))
			case tensor.BF16:
				exp = tensor.BF16ToF32(tensor.F32ToBF16(v))
			}
			if math.Float32bits(got[i]) != math.Float32bits(exp) {
				t.Errorf("%s[%d] = %v, want %v", want.Name, i, got[i], exp)
				break
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries after Write, want 1 (no temporary files)", len(entries))
	}
}

// TestWriteLayout checks the bytes: 8-aligned space-padded header, sorted
// names packed without gaps, and identical output whatever the input order.
func TestWriteLayout(t *testing.T) {
	ts := randomTensors(rand.New(rand.NewPCG(3, 4)))
	var a, b bytes.Buffer
	if err := Encode(&a, ts, nil); err != nil {
		t.Fatal(err)
	}
	rev := append([]Tensor(nil), ts...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if err := Encode(&b, rev, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("output depends on input order")
	}
	raw := a.Bytes()
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	hdr := raw[8 : 8+n]
	if trimmed := bytes.TrimRight(hdr, " "); len(hdr)-len(trimmed) >= 8 || trimmed[len(trimmed)-1] != '}' {
		t.Errorf("bad padding %q", hdr[len(hdr)-10:])
	}
	var m map[string]struct {
		Offsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr, &m); err != nil {
		t.Fatal(err)
	}
	// sorted names: a.f16 empty m.bf16 raw.i8 scalar z.f32
	order := []string{"a.f16", "empty", "m.bf16", "raw.i8", "scalar", "z.f32"}
	var off int64
	for _, name := range order {
		if m[name].Offsets[0] != off {
			t.Errorf("%s begins at %d, want %d", name, m[name].Offsets[0], off)
		}
		off = m[name].Offsets[1]
	}
	if off != int64(len(raw))-8-int64(n) {
		t.Errorf("data ends at %d, file data is %d bytes", off, int64(len(raw))-8-int64(n))
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := [][]Tensor{
		{{Name: "a", DType: tensor.F32, Shape: []int64{2}, Data: []float32{1}}},
		{{Name: "a", DType: tensor.I8, Shape: []int64{1}, Data: []float32{1}}},
		{{Name: "a", DType: tensor.F32, Shape: []int64{-1}, Data: nil}},
		{{Name: "__metadata__", DType: tensor.F32, Shape: []int64{}, Data: []float32{1}}},
		{{Name: "a", DType: tensor.F32, Data: []float32{1}}, {Name: "a", DType: tensor.F32, Data: []float32{2}}},
		{{Name: "a", DType: tensor.Q8_0, Shape: []int64{32}, Raw: make([]byte, 34)}},
	}
	for i, ts := range bad {
		if err := Write(path, ts, nil); err == nil {
			t.Errorf("case %d: written", i)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Error("failed write changed the existing file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries left in folder, want 1", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "x.safetensors"), nil, nil); err == nil {
		t.Error("write into a missing folder succeeded")
	}
	var fe *format.Error
	if errors.As(Write(path, bad[0], nil), &fe) {
		t.Error("writer input errors are not malformed-file errors")
	}
}
