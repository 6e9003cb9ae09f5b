package safetensors

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestFileWriterMatchesWrite: tensors written one at a time, in a shuffled
// order and from several goroutines, give the bytes Write gives.
func TestFileWriterMatchesWrite(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ts := randomTensors(r)
	meta := map[string]string{"format": "test"}
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.safetensors")
	if err := Write(ref, ts, meta); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 3 {
		path := filepath.Join(dir, "stream.safetensors")
		fw, err := Create(path, ts, meta)
		if err != nil {
			t.Fatal(err)
		}
		order := r.Perm(len(ts))
		var wg sync.WaitGroup
		errs := make([]error, len(ts))
		for k, i := range order {
			wg.Go(func() { errs[k] = fw.WriteTensor(ts[i]) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.Commit(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d: streamed file differs from Write's (%d vs %d bytes)", trial, len(got), len(want))
		}
	}
}

// TestFileWriterRefuses: undeclared, mismatched, repeated and missing
// tensors are errors, and a failed Commit leaves nothing behind.
func TestFileWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	specs := []Tensor{{Name: "a", DType: tensor.F32, Shape: []int64{2}}, {Name: "b", DType: tensor.I8, Shape: []int64{3}}}
	fw, err := Create(path, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t    Tensor
		want string
	}{
		{Tensor{Name: "c", DType: tensor.F32, Shape: []int64{2}, Data: []float32{1, 2}}, "not declared"},
		{Tensor{Name: "a", DType: tensor.F16, Shape: []int64{2}, Data: []float32{1, 2}}, "declared"},
		{Tensor{Name: "a", DType: tensor.F32, Shape: []int64{2}, Data: []float32{1}}, "1 values"},
	} {
		if err := fw.WriteTensor(c.t); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.t, err, c.want)
		}
	}
	if err := fw.WriteTensor(Tensor{Name: "a", DType: tensor.F32, Shape: []int64{2}, Data: []float32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteTensor(Tensor{Name: "a", DType: tensor.F32, Shape: []int64{2}, Data: []float32{1, 2}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second write of a: %v", err)
	}
	if err := fw.Commit(); err == nil || !strings.Contains(err.Error(), `"b" has no data`) {
		t.Errorf("commit without b: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left after a failed commit: %v", left)
	}
	if _, err := Create(path, []Tensor{{Name: "x", DType: tensor.F32}, {Name: "x", DType: tensor.F32}}, nil); err == nil {
		t.Error("duplicate names accepted")
	}
}

// TestReadFloat32Chunked: a tensor longer than one release chunk, read
// from a mapped file (converted and released a chunk at a time), gives the
// written values, twice in a row.
func TestReadFloat32Chunked(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n := releaseChunk*2 + 77
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Write(path, []Tensor{{Name: "a", DType: tensor.F32, Shape: []int64{int64(n)}, Data: v}}, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for range 2 {
		got, err := ck.ReadFloat32("a")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, v) {
			t.Fatal("chunked read differs")
		}
	}
	ck.Release("a")
}
