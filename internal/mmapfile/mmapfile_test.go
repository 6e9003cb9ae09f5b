package mmapfile

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestOpenReadsTheFile(t *testing.T) {
	dir := t.TempDir()
	want := make([]byte, 10000)
	rand.New(rand.NewSource(1)).Read(want)
	p := filepath.Join(dir, "f")
	os.WriteFile(p, want, 0o644)
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size != int64(len(want)) {
		t.Fatalf("size %d", r.Size)
	}
	got := make([]byte, 100)
	if _, err := r.ReadAt(got, 5000); err != nil || !bytes.Equal(got, want[5000:5100]) {
		t.Fatalf("ReadAt: %v", err)
	}
	if r.Data != nil && !bytes.Equal(r.Data, want) {
		t.Fatal("mapping differs from the file")
	}
	// an empty file opens (not mapped) and a missing one fails
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
	e, err := Open(filepath.Join(dir, "empty"))
	if err != nil || e.Size != 0 || e.Data != nil {
		t.Fatalf("empty: %v", err)
	}
	e.Close()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file opened")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close failed")
	}
}

// TestReleaseKeepsData: released ranges (page-aligned or not, out of range
// or empty) read back the file's bytes.
func TestReleaseKeepsData(t *testing.T) {
	want := make([]byte, 5*4096+123)
	for i := range want {
		want[i] = byte(i*7 + i/4096)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, len(want))
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{0, int64(len(want))}, {100, 9000}, {4096, 4096}, {-1, 10}, {10, 0}, {0, 1 << 40}} {
		r.Release(c[0], c[1])
		if _, err := r.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("after Release(%d, %d) the data differs", c[0], c[1])
		}
	}
}

// TestOpenHugePages: the copy holds the file's bytes (a size that is not a
// multiple of any page) and survives Release,
// and an empty or missing file behaves as with Open.
func TestOpenHugePages(t *testing.T) {
	want := make([]byte, 3<<20+4097)
	for i := range want {
		want[i] = byte(i*13 + i>>12)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenHugePages(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && !r.HugePages {
		t.Fatal("on Linux the file should have been read into advised memory")
	}
	if r.Size != int64(len(want)) || (r.Data != nil && !bytes.Equal(r.Data, want)) {
		t.Fatalf("size %d, data equal %v", r.Size, bytes.Equal(r.Data, want))
	}
	r.Release(0, int64(len(want)))
	got := make([]byte, len(want))
	if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after Release: %v, equal %v", err, bytes.Equal(got, want))
	}
	if r.HugePages && cap(r.Data) != len(want) {
		t.Fatalf("cap %d lets callers see past the file's %d bytes", cap(r.Data), len(want))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := OpenHugePages(filepath.Join(dir, "empty"))
	if err != nil || e.Size != 0 || e.HugePages {
		t.Fatalf("empty file: %v, size %d, huge %v", err, e.Size, e.HugePages)
	}
	e.Close()
	if _, err := OpenHugePages(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file opened")
	}
}
