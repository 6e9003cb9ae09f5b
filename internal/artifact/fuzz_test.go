package artifact

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// realSample writes a small artifact from real files: a model's
// config.json as the manifest and the start of its safetensors file as
// tensor and tokenizer bytes.
func realSample(f *testing.F) []byte {
	config := testutil.ReadFile(f, "arch/llama/config.json")
	weights := testutil.ReadFile(f, "arch/llama/model.safetensors")
	path := filepath.Join(f.TempDir(), "real.aot")
	w, err := Create(path)
	if err != nil {
		f.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetManifest(jsonRaw(config)); err != nil {
		f.Fatal(err)
	}
	n := int64(binary.LittleEndian.Uint64(weights))
	if err := w.AddTensor("header", tensor.U8, []int64{n}, "", weights[8:8+n]); err != nil {
		f.Fatal(err)
	}
	if err := w.AddTensor("w", tensor.F32, []int64{16, 4}, "", weights[8+n:8+n+256]); err != nil {
		f.Fatal(err)
	}
	if err := w.AddBlob(KindPlan, "plan/ar1", weights[8+n+256:8+n+400]); err != nil {
		f.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// jsonRaw passes JSON bytes through SetManifest unchanged.
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }

// FuzzOpen feeds arbitrary bytes to OpenReader: it must never panic, and
// whatever it accepts must describe data inside the input.
func FuzzOpen(f *testing.F) {
	f.Add(realSample(f))
	_, small := sampleFile(f)
	f.Add(small)
	f.Add(craft(make([]byte, 64), `{}`, `{"tensors":[{"name":"w","dtype":"f32","shape":[16],"offset":0,"size":64}]}`))
	f.Add(craft(nil, `{}`, `{"tensors":[{"name":"w","dtype":"f32","shape":[4294967296,4294967296,16],"offset":0,"size":0}]}`))
	f.Add(craft(make([]byte, 128), `{}`, `{"tensors":[{"name":"a","dtype":"u8","shape":[1],"layout":"x","offset":0,"size":100},{"name":"b","dtype":"u8","shape":[1],"offset":64,"size":1}]}`))
	c := slices.Clone(small)
	binary.LittleEndian.PutUint32(c[20:], 1<<16) // table count past the end
	resealHeader(c)
	f.Add(c)
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		inputs := [][]byte{b}
		if len(b) >= HeaderSize {
			// With the checksums recomputed, mutations reach the
			// structural checks behind them.
			c := slices.Clone(b)
			reseal(c)
			inputs = append(inputs, c)
		}
		for _, in := range inputs {
			for _, verify := range []bool{false, true} {
				a, err := OpenReader(bytes.NewReader(in), int64(len(in)), OpenOptions{Verify: verify})
				if err != nil {
					continue
				}
				checkAccepted(t, a, int64(len(in)))
			}
		}
	})
}

// checkAccepted checks the invariants of an artifact Open accepted.
func checkAccepted(t *testing.T, a *Artifact, size int64) {
	var ws Section
	for _, s := range a.Sections() {
		if s.Offset < HeaderSize || s.Offset+s.Size > size || s.Offset%Align != 0 {
			t.Fatalf("section %q at %d+%d outside the %d-byte input or misaligned", s.Name, s.Offset, s.Size, size)
		}
		if s.Kind == KindWeights {
			ws = s
		}
	}
	for _, ti := range a.Tensors() {
		if ti.Offset < 0 || ti.Offset+ti.Size > ws.Size {
			t.Fatalf("tensor %q at %d+%d outside the weights (%d)", ti.Name, ti.Offset, ti.Size, ws.Size)
		}
		_, data, err := a.Tensor(ti.Name)
		if err != nil || int64(len(data)) != ti.Size {
			t.Fatalf("tensor %q: %d bytes, %v", ti.Name, len(data), err)
		}
	}
	for _, s := range a.Blobs() {
		if d, err := a.Blob(s.Name); err != nil || int64(len(d)) != s.Size {
			t.Fatalf("blob %q: %d bytes, %v", s.Name, len(d), err)
		}
	}
	var sum int64
	for _, v := range a.SizeBreakdown().Sections {
		sum += v
	}
	if sum != size {
		t.Fatalf("size breakdown sums to %d, file %d", sum, size)
	}
	var m map[string]any
	if err := a.Manifest(&m); err != nil {
		t.Fatalf("accepted manifest does not unmarshal: %v", err)
	}
	_ = a.Verify()
}
