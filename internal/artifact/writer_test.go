package artifact

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// dirNames lists the folder's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.aot")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("a", tensor.F32, []int64{2}, "", make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("while writing, the folder holds %v, want one temporary file", names)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("after Abort the folder holds %v", names)
	}
	if err := w.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
}

// failingReader returns some bytes and then an error.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("disk on fire")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// TestFailedWriteKeepsOld: a stream error poisons the writer; Commit fails,
// removes the temporary file and leaves the previous artifact untouched.
func TestFailedWriteKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.aot")
	newSample(3).write(t, path)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = w.AddTensorFrom("big", tensor.U8, []int64{1 << 20}, "", 1<<20, &failingReader{n: 70000})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk on fire")) {
		t.Fatalf("AddTensorFrom: %v", err)
	}
	if err2 := w.AddTensor("b", tensor.U8, []int64{1}, "", []byte{1}); err2 == nil {
		t.Error("poisoned writer accepted a tensor")
	}
	if err := w.Commit(); err == nil {
		t.Fatal("Commit of a poisoned writer succeeded")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"m.aot"}) {
		t.Errorf("folder holds %v", names)
	}
	now, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(now, old) {
		t.Errorf("previous artifact changed (%v)", err)
	}
}

// TestShortStream: a reader that ends early is an error, not a short tensor.
func TestShortStream(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "m.aot"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	err = w.AddTensorFrom("w", tensor.U8, []int64{10}, "", 10, bytes.NewReader(make([]byte, 9)))
	if !errors.Is(err, io.EOF) {
		t.Errorf("short stream: %v", err)
	}
}

func TestCommitReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.aot")
	newSample(3).write(t, path)
	s := newSample(4)
	s.write(t, path)
	if names := dirNames(t, dir); !slices.Equal(names, []string{"m.aot"}) {
		t.Errorf("folder holds %v", names)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v %v", st.Mode(), err)
	}
	a, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	checkSample(t, a, s, a.src.data != nil)
}

// TestWriterRejects checks invalid input is refused with an error that
// names it, and leaves the writer usable.
func TestWriterRejects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.aot")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddTensor("a", tensor.F32, []int64{2}, "", make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"duplicate tensor": w.AddTensor("a", tensor.F32, []int64{2}, "", make([]byte, 8)),
		"size mismatch":    w.AddTensor("b", tensor.F32, []int64{3}, "", make([]byte, 8)),
		"invalid dtype":    w.AddTensor("c", tensor.Invalid, []int64{1}, "", nil),
		"bad shape":        w.AddTensor("d", tensor.F32, []int64{-1}, "", nil),
		"bad layout":       w.AddTensor("e", tensor.U8, []int64{1}, "a\tb", []byte{1}),
		"blob kind":        w.AddBlob(KindWeights, "x", nil),
		"reserved name":    w.AddBlob(KindBlob, ManifestName, nil),
		"long name":        w.AddBlob(KindPlan, string(make([]byte, 65)), nil),
		"empty name":       w.AddBlob(KindPlan, "", nil),
		"manifest array":   w.SetManifest([]int{1}),
		"manifest func":    w.SetManifest(func() {}),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := w.AddBlob(KindPlan, "p", []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddBlob(KindPlan, "p", []byte{2}); err == nil {
		t.Error("duplicate blob accepted")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.AddBlob(KindPlan, "q", nil); !errors.Is(err, errClosed) {
		t.Errorf("AddBlob after Commit: %v", err)
	}
	a, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if len(a.Tensors()) != 1 || len(a.Blobs()) != 1 {
		t.Errorf("%d tensors, %d blobs after rejected input", len(a.Tensors()), len(a.Blobs()))
	}
}
