package artifact

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// countingReaderAt records the byte ranges read through it.
type countingReaderAt struct {
	r      io.ReaderAt
	total  int64
	ranges [][2]int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.total += int64(n)
	c.ranges = append(c.ranges, [2]int64{off, off + int64(n)})
	return n, err
}

// writeBig writes an artifact with nTensors tensors of size bytes each and
// returns its path.
func writeBig(tb testing.TB, dir string, nTensors int, size int64) string {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("big-%d.aot", int64(nTensors)*size))
	w, err := Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetManifest(map[string]any{"architecture": "llama", "dim": 4096}); err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	chunk := randBytes(r, 1<<16)
	for i := range nTensors {
		src := io.LimitReader(&cycle{b: chunk}, size)
		if err := w.AddTensorFrom(fmt.Sprintf("blk.%d.w", i), tensor.I8, []int64{size}, "", size, src); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.AddBlob(KindPlan, "plan/ar1", bytes.Repeat([]byte("op;"), 1000)); err != nil {
		tb.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// cycle yields b over and over.
type cycle struct {
	b   []byte
	off int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.b[c.off:])
	c.off = (c.off + n) % len(c.b)
	return n, nil
}

// TestOpenDoesNotReadWeights opens an artifact with 8 MiB of weights
// through a counting reader: Open must not touch a weight byte and read
// under 16 KiB in all; Verify then reads every weight byte.
func TestOpenDoesNotReadWeights(t *testing.T) {
	path := writeBig(t, t.TempDir(), 8, 1<<20)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := entry(t, b, WeightsName)
	cr := &countingReaderAt{r: bytes.NewReader(b)}
	a, err := OpenReader(cr, int64(len(b)), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cr.ranges {
		if r[0] < w.off+w.size && r[1] > w.off {
			t.Errorf("Open read bytes %d..%d inside the weights section %d..%d", r[0], r[1], w.off, w.off+w.size)
		}
	}
	if cr.total > 16<<10 {
		t.Errorf("Open read %d bytes of a %d-byte file, want < 16 KiB", cr.total, len(b))
	}
	before := cr.total
	if err := a.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := cr.total - before; got < w.size {
		t.Errorf("Verify read %d bytes, weights are %d", got, w.size)
	}
	_, data, err := a.Tensor("blk.3.w")
	if err != nil || int64(len(data)) != 1<<20 || !bytes.Equal(data[:1<<16], data[1<<16:2<<16]) {
		t.Errorf("streamed tensor: %d bytes, %v", len(data), err)
	}
}
