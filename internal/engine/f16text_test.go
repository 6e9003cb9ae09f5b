package engine_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// writeStoriesGGUF rewrites stories260K.gguf with its matrices stored as
// dt (F16, or F32 holding the binary16-rounded values) and the rest F32.
func writeStoriesGGUF(t *testing.T, dt tensor.DType) string {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for _, info := range f.Tensors() {
		v, err := f.ReadFloat32(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		w := gguf.WriteTensor{Name: info.Name, DType: tensor.F32, Shape: info.Shape, Values: v}
		if len(info.Shape) == 2 {
			for i, x := range v {
				v[i] = tensor.F16ToF32(tensor.F32ToF16(x))
			}
			w.DType = dt
		}
		ts = append(ts, w)
	}
	path := filepath.Join(t.TempDir(), "stories-"+dt.String()+".gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, f.KVs(), ts); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// folderFloat32 compiles the float32 values of a quantized folder (what
// its tensors dequantize to) as a float32 artifact.
func folderFloat32(t *testing.T, dir string, opts compile.Options) (*engine.Engine, string) {
	t.Helper()
	f, err := qmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := graph.Weights{}
	for _, n := range f.Names() {
		if w[n], err = f.Float(n); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "float32.aot")
	if err := compile.CompileModel(&arch.Model{Config: f.Manifest.Config, Weights: w}, compile.Source{}, opts, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, path
}

// TestF16RowsText: a GGUF whose matrices are F16, and a folder quantized
// with the f16 recipe, compile to binary16 rows (layout f16-rows, about
// half the bytes) and give the logits of the float32 artifact of the same
// values (binary16-rounded) within 1e-4 (float32 sums; the binary16 row
// kernel adds in the float32 one's order), in prefill and decode, and
// stories260K's greedy ids.
func TestF16RowsText(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	opts := compile.Options{ARLens: []int{8}, Ctx: 128}
	gguf32, p32 := compilePath(t, writeStoriesGGUF(t, tensor.F32), opts)
	if l := layouts(t, p32); l["f16-rows"] != 0 {
		t.Fatalf("an F32 GGUF has f16-rows tensors: %v", l)
	}
	folder := quantizeStories(t, "f16")
	folder32, _ := folderFloat32(t, folder, opts)
	st32, _ := os.Stat(p32)
	for _, c := range []struct {
		name, src string
		e32       *engine.Engine
	}{{"gguf", writeStoriesGGUF(t, tensor.F16), gguf32}, {"recipe", folder, folder32}} {
		name, src, e32 := c.name, c.src, c.e32
		t.Run(name, func(t *testing.T) {
			e16, p16 := compilePath(t, src, opts)
			l := layouts(t, p16)
			st16, _ := os.Stat(p16)
			t.Logf("layouts %v; %d bytes, the float32 artifact %d", l, st16.Size(), st32.Size())
			if l["f16-rows"] < 10 || st16.Size() > st32.Size()*6/10 {
				t.Fatalf("layouts %v, %d bytes against %d", l, st16.Size(), st32.Size())
			}
			var worst float64
			defer func() { t.Logf("logits differ from the float32 artifact's by at most %.3g", worst) }()
			for _, o := range []engine.SessionOptions{{Mode: engine.ModeKV}, {ARLen: 8, Threads: 2}} {
				a, b := newSession(t, e32, o), newSession(t, e16, o)
				for _, c := range ref.Cases[:2] {
					a.Reset()
					b.Reset()
					la, err := a.Prefill(c.PromptIDs)
					if err != nil {
						t.Fatal(err)
					}
					lb, err := b.Prefill(c.PromptIDs)
					if err != nil {
						t.Fatal(err)
					}
					for step := range 8 {
						d := maxDiff(la, lb)
						worst = max(worst, d)
						if d > 1e-4 {
							t.Fatalf("%v step %d: logits differ by %.3g", o, step, d)
						}
						id := argmax(la)
						if la, err = a.Decode(id); err != nil {
							t.Fatal(err)
						}
						if lb, err = b.Decode(id); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			s := newSession(t, e16, engine.SessionOptions{Mode: engine.ModeKV})
			c := ref.Cases[0]
			if got := greedy(t, s, c.PromptIDs, 32); !slices.Equal(got, c.IDs[:32]) {
				t.Fatalf("greedy %v, llama2.c %v", got, c.IDs[:32])
			}
		})
	}
}
