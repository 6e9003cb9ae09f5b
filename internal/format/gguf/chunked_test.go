package gguf

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestReadFloat32Chunked: tensors longer than one release chunk, read from
// a mapped file (converted and released a chunk at a time), give the values
// of the unmapped reader, twice in a row.
func TestReadFloat32Chunked(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n := releaseChunk*2 + 77
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	var buf bytes.Buffer
	ts := []WriteTensor{{Name: "a", DType: tensor.F16, Shape: []int64{int64(n)}, Values: v},
		{Name: "b", DType: tensor.BF16, Shape: []int64{int64(n)}, Values: v},
		{Name: "c", DType: tensor.F32, Shape: []int64{int64(n)}, Values: v}}
	if err := Write(&buf, []KV{{Key: "general.architecture", Value: "x"}}, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mapped, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	plain, err := OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		want, err := plain.ReadFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := mapped.ReadFloat32(name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: chunked read differs", name)
			}
		}
		mapped.Release(name)
	}
}
