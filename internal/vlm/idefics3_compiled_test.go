package vlm

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
)

// compileFixture compiles the SmolVLM fixture (the folder, or with mmproj
// set the text GGUF and its mmproj) with its vision encoder and opens it.
func compileFixture(t *testing.T, mmproj bool, visionWeights string) *engine.Engine {
	t.Helper()
	dir := testutil.Path(t, "vlm/smolvlm")
	src, opts := dir, compile.Options{ARLens: []int{8}, Ctx: 128, VisionWeights: visionWeights}
	if mmproj {
		src, opts.MMProj = filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf")
	}
	path := filepath.Join(t.TempDir(), "vlm.aot")
	if err := compile.CompileFile(src, path, opts); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestCompiledEncoderMatches: the vision plan compiled into the artifact
// (from the folder and from the GGUF pair) gives the interpreter's
// embeddings within 1e-4 and llama.cpp's within embTol; the compiled
// text model fed them gives llama.cpp's last logits within logitTol and
// its greedy ids exactly.
func TestCompiledEncoderMatches(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	ref := loadRef(t)
	interp, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct {
		name, weights string
		mmproj        bool
		interpTol     float64 // max |diff| from the interpreter's float32 embeddings
	}{{"hf", "f32", false, 1e-4}, {"gguf", "f32", true, 1e-4}, {"hf-f16", "f16", false, f16InterpTol}, {"gguf-f16", "f16", true, f16InterpTol}} {
		t.Run(src.name, func(t *testing.T) {
			e := compileFixture(t, src.mmproj, src.weights)
			if w := e.Manifest().Vision.Weights; w != src.weights {
				t.Fatalf("vision weights %q, want %q", w, src.weights)
			}
			c, err := OpenCompiled(e, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			imageID := c.Vision.ImageTokenID
			if imageID < 0 {
				t.Fatalf("the artifact records no image token id (markers %v)", c.Markers)
			}
			D, V := c.Vision.TextHidden, e.Manifest().Vocab
			for _, cs := range ref.Cases {
				img, err := vision.DecodeFile(filepath.Join(dir, cs.Image), vision.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				want, err := interp.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				chunks := append(append([][]float32(nil), got.Slices...), got.Overview)
				wchunks := append(append([][]float32(nil), want.Slices...), want.Overview)
				var theirs [][]float32
				var ids []int
				for _, l := range cs.Layout {
					if l.Type == "image" {
						theirs = append(theirs, l.Embeddings)
						for range l.NTokens {
							ids = append(ids, imageID)
						}
					} else {
						ids = append(ids, l.IDs...)
					}
				}
				if len(chunks) != len(theirs) {
					t.Fatalf("%s: %d chunks, llama.cpp has %d", cs.Image, len(chunks), len(theirs))
				}
				var rows []float32
				for i := range chunks {
					di, dl := maxDiff(chunks[i], wchunks[i]), maxDiff(chunks[i], theirs[i])
					t.Logf("%s chunk %d: max |diff| %.3g vs the interpreter, %.3g vs llama.cpp", cs.Image, i, di, dl)
					if di > src.interpTol || dl > embTol {
						t.Errorf("%s chunk %d: embeddings differ by %.3g from the interpreter (tolerance %g), %.3g from llama.cpp (%g)", cs.Image, i, di, src.interpTol, dl, embTol)
					}
					rows = append(rows, chunks[i]...)
				}
				s, err := e.NewSession(engine.SessionOptions{Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				q := NewImageSequence(s, imageID, D)
				if err := q.Queue(rows); err != nil {
					t.Fatal(err)
				}
				logits, err := q.PrefillContext(context.Background(), ids)
				if err != nil {
					t.Fatal(err)
				}
				d := maxDiff(logits[:V], cs.Logits[len(cs.Logits)-1])
				t.Logf("%s: last-position logits differ by %.3g", cs.Image, d)
				if d > logitTol {
					t.Errorf("%s: logits differ by %.3g > %g", cs.Image, d, logitTol)
				}
				for k, want := range cs.Greedy {
					best := 0
					for j, v := range logits[:V] {
						if v > logits[best] {
							best = j
						}
					}
					if best != want {
						t.Fatalf("%s: greedy[%d] = %d, want %d", cs.Image, k, best, want)
					}
					if logits, err = q.Decode(best); err != nil {
						t.Fatal(err)
					}
				}
				q.Close()
			}
		})
	}
}

// Tolerances of the encoder compiled with binary16 weights (layout
// f16-rows: every linear matrix rounded to nearest binary16, products
// summed in float32) against the float32 encoder: at most f16InterpTol
// max |diff| and f16RMSTol relative RMS. Measured on the fixtures
// (docs/quantization.md): max 1.4e-3 to 1.6e-3, relative RMS 3.2e-4 to
// 5.0e-4 (w8: 1.4% to 2.1%); the margins leave room for other random
// weights of the same shapes.
const (
	f16InterpTol = 4e-3
	f16RMSTol    = 2e-3
)

// relDiff returns the max |b-a| and the RMS of b-a relative to a's.
func relDiff(a, b []float32) (worst, rel float64) {
	var se, ss float64
	for i, x := range a {
		d := float64(b[i] - x)
		worst = max(worst, math.Abs(d))
		se += d * d
		ss += float64(x) * float64(x)
	}
	return worst, math.Sqrt(se / ss)
}

// TestCompiledEncoderWeights: the encoder compiled with 8-bit weights
// (one scale per row, packed for the int8 kernels, which also quantize
// the activations to int8 in blocks of 32) or binary16 weights stays
// close to the float32 plan's embeddings, and is not the float32 plan:
// w8 within 3% relative RMS and 0.15 max |diff| (embeddings of max |x|
// ~4.4; measured on the fixture: 1.4% and 0.058), f16 within f16RMSTol
// and f16InterpTol.
func TestCompiledEncoderWeights(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	f32, err := OpenCompiled(compileFixture(t, false, "f32"), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		weights        string
		maxTol, rmsTol float64
	}{{"w8", 0.15, 0.03}, {"f16", f16InterpTol, f16RMSTol}} {
		t.Run(c.weights, func(t *testing.T) {
			e := compileFixture(t, false, c.weights)
			if w := e.Manifest().Vision.Weights; w != c.weights {
				t.Fatalf("vision weights %q", w)
			}
			enc, err := OpenCompiled(e, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, cs := range loadRef(t).Cases {
				img, err := vision.DecodeFile(filepath.Join(dir, cs.Image), vision.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				a, err := f32.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				b, err := enc.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				worst, rel := relDiff(a.Overview, b.Overview)
				t.Logf("%s overview: %s vs f32 max |diff| %.3g, relative RMS %.3g", cs.Image, c.weights, worst, rel)
				if worst > c.maxTol || rel > c.rmsTol || worst == 0 {
					t.Errorf("%s: %s embeddings differ from f32 by %.3g (tolerance %g), relative RMS %.3g (tolerance %g)",
						cs.Image, c.weights, worst, c.maxTol, rel, c.rmsTol)
				}
			}
		})
	}
}
