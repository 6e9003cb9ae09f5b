package vlm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
)

// compileQwenFixture compiles the Qwen2-VL fixture (the folder, or with
// mmproj set the text GGUF and its mmproj) with its encoder planned for
// buckets, and opens it.
func compileQwenFixture(t *testing.T, mmproj bool, buckets, weights string) *engine.Engine {
	t.Helper()
	return compileQwenFixtureAt(t, testutil.Path(t, "vlm/qwen2vl"), mmproj, buckets, weights)
}

// compileQwenFixtureAt is compileQwenFixture for the fixture in dir.
func compileQwenFixtureAt(t *testing.T, dir string, mmproj bool, buckets, weights string) *engine.Engine {
	t.Helper()
	src, opts := dir, compile.Options{ARLens: []int{8}, Ctx: 128, KV: "f32", VisionBuckets: buckets, VisionWeights: weights}
	if mmproj {
		src, opts.MMProj = filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf")
	}
	path := filepath.Join(t.TempDir(), "qwen2vl.aot")
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

// TestQwen2VLCompiledEncoder: the Qwen2-VL encoder and merger compiled
// into the artifact (from the folder and from the GGUF pair) with the
// fixture's two smart-resized sizes among its buckets (64x64 and 64x96,
// and a larger 128x128 that must not be chosen) gives each image the
// interpreter's embeddings within 1e-4 and llama.cpp's within embTol; the
// compiled text model fed them at their M-RoPE positions gives
// llama.cpp's last logits within logitTol and its 8 greedy ids.
func TestQwen2VLCompiledEncoder(t *testing.T) {
	checkQwenCompiledEncoder(t, testutil.Path(t, "vlm/qwen2vl"), loadQwenRef(t), "128x128,64x96,64x64")
}

// checkQwenCompiledEncoder compiles the Qwen2-VL / Qwen2.5-VL fixture in
// dir (from the folder and from the GGUF pair) with its encoder planned
// for buckets, which must hold each image's smart-resized size, and
// checks each image against the interpreter (1e-4) and llama.cpp (embTol,
// last logits within logitTol, greedy ids).
func checkQwenCompiledEncoder(t *testing.T, dir string, ref *qwenReference, buckets string) {
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
			e := compileQwenFixtureAt(t, dir, src.mmproj, buckets, src.weights)
			if w := e.Manifest().Vision.Weights; w != src.weights {
				t.Fatalf("vision weights %q, want %q", w, src.weights)
			}
			if ArtifactFamily(e) != "qwen2vl" {
				t.Fatalf("the artifact's vision family is %q", e.Manifest().Vision.Family)
			}
			if e.PosComponents() != 3 {
				t.Fatalf("the text model takes %d position components, want 3", e.PosComponents())
			}
			c, err := OpenCompiledQwen2VL(e, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			imageID, err := c.ImageTokenID(ref.piece)
			if err != nil || imageID != 265 {
				t.Fatalf("image token %d, %v; want 265", imageID, err)
			}
			D, V := c.Vision.TextHidden, e.Manifest().Vocab
			for ci, cs := range ref.Cases {
				img, err := vision.DecodeFile(filepath.Join(dir, cs.Image), vision.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				b, shrunk, err := c.Bucket(img.W, img.H)
				if err != nil || shrunk {
					t.Fatalf("%s: bucket %v, shrunk %v, %v", cs.Image, b, shrunk, err)
				}
				if sw, sh := c.Proc.Size(img.W, img.H); b.W != sw || b.H != sh {
					t.Fatalf("%s: bucket %s for a smart-resized %dx%d", cs.Image, b, sh, sw)
				}
				got, err := c.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				want, err := interp.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				theirs := ref.refEmbeds(ci)
				if got.Rows != want.Rows || got.Cols != want.Cols || len(got.Embeds) != len(theirs) {
					t.Fatalf("%s: %dx%d tokens (%d values), the interpreter %dx%d, llama.cpp %d values", cs.Image,
						got.Rows, got.Cols, len(got.Embeds), want.Rows, want.Cols, len(theirs))
				}
				di, dl := maxDiff(got.Embeds, want.Embeds), maxDiff(got.Embeds, theirs)
				t.Logf("%s (bucket %s): max |diff| %.3g vs the interpreter, %.3g vs llama.cpp", cs.Image, b, di, dl)
				if di > src.interpTol || dl > embTol {
					t.Errorf("%s: embeddings differ by %.3g from the interpreter (tolerance %g), %.3g from llama.cpp (%g)", cs.Image, di, src.interpTol, dl, embTol)
				}
				p, err := c.Place(got, ref.piece)
				if err != nil {
					t.Fatal(err)
				}
				s, err := e.NewSession(engine.SessionOptions{Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				q := NewImageSequence(s, imageID, D)
				if err := q.QueueImage(p.Rows, p.Pos, p.Span); err != nil {
					t.Fatal(err)
				}
				logits, err := q.PrefillContext(context.Background(), cs.InputIDs)
				if err != nil {
					t.Fatal(err)
				}
				d := maxDiff(logits[:V], cs.Logits[len(cs.Logits)-1])
				t.Logf("%s: last-position logits differ by %.3g", cs.Image, d)
				if d > logitTol {
					t.Errorf("%s: logits differ by %.3g > %g", cs.Image, d, logitTol)
				}
				for k, want := range cs.Greedy {
					if best := argmax(logits[:V]); best != want {
						t.Fatalf("%s: greedy[%d] = %d, want %d", cs.Image, k, best, want)
					}
					if logits, err = q.Decode(want); err != nil {
						t.Fatal(err)
					}
				}
				q.Close()
			}
		})
	}
}

// TestQwen2VLBuckets: an image whose smart-resized size is no bucket is
// letterboxed into the smallest bucket holding it and encodes as the
// interpreter encodes that letterboxed image (within 1e-4); one no bucket
// holds is scaled down into the bucket it stays largest in when there is
// no fallback, and goes to the fallback when there is; one whose aspect
// ratio fits no
// bucket even scaled down is refused, naming the sizes; bad bucket lists,
// and bucket lists for a SmolVLM encoder, are refused at compile time.
func TestQwen2VLBuckets(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	interp, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	e := compileQwenFixture(t, false, "128x128,64x192", "f32")
	c, err := OpenCompiledQwen2VL(e, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	img, err := vision.DecodeFile(filepath.Join(dir, "image_wide.png"), vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	// 100x60 smart-resizes to 96x64: the 64x192 bucket (12288 pixels)
	// holds it and is smaller than 128x128 (16384)
	b, shrunk, err := c.Bucket(img.W, img.H)
	if err != nil || shrunk || b != (vision.Bucket{W: 192, H: 64}) {
		t.Fatalf("bucket %s, shrunk %v, %v; want 64x192", b, shrunk, err)
	}
	got, err := c.Encode(img)
	if err != nil {
		t.Fatal(err)
	}
	boxed, err := c.Proc.PreprocessBucket(img, b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := interp.Encode(boxed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 4 || got.Cols != 12 || want.Rows != 4 || want.Cols != 12 {
		t.Fatalf("%dx%d tokens, the interpreter %dx%d; want 4x12", got.Rows, got.Cols, want.Rows, want.Cols)
	}
	if d := maxDiff(got.Embeds, want.Embeds); d > 1e-4 {
		t.Fatalf("letterboxed: embeddings differ from the interpreter's by %.3g", d)
	}
	// a 400x400 image smart-resizes to 400x400: no bucket holds it
	big := vision.NewRGB(400, 400)
	for i := range big.Pix {
		big.Pix[i] = uint8(i * 7)
	}
	if b, shrunk, err := c.Bucket(400, 400); err != nil || !shrunk || b != (vision.Bucket{W: 128, H: 128}) {
		t.Fatalf("400x400: bucket %s, shrunk %v, %v; want 128x128 scaled down", b, shrunk, err)
	}
	if out, err := c.Encode(big); err != nil || out.Rows != 8 || out.Cols != 8 {
		t.Fatalf("400x400 scaled down: %v", err)
	}
	c.Fallback = interp
	out, err := c.Encode(big)
	if err != nil {
		t.Fatal(err)
	}
	if sw, sh := c.Proc.Size(400, 400); out.Rows*16 != sh || out.Cols*16 != sw {
		t.Fatalf("the fallback encoded %dx%d tokens, want the smart-resized %dx%d pixels", out.Rows, out.Cols, sh, sw)
	}
	c.Fallback = nil
	// 1000x40 (25:1) fits no bucket, even scaled down
	if _, err := c.Encode(vision.NewRGB(1000, 40)); err == nil || !strings.Contains(err.Error(), "128x128, 64x192") {
		t.Fatalf("a 1000x40 image: %v", err)
	}
	// a SmolVLM encoder has its one tile size
	err = compile.CompileFile(testutil.Path(t, "vlm/smolvlm"), filepath.Join(t.TempDir(), "smol.aot"),
		compile.Options{ARLens: []int{8}, Ctx: 128, VisionBuckets: "64x64"})
	if err == nil || !strings.Contains(err.Error(), "image sizes are for a Qwen2-VL encoder") {
		t.Errorf("image sizes for SmolVLM: %v", err)
	}
	for _, bad := range []string{"64x65", "64", "0x64", "64x64,x"} {
		err := compile.CompileFile(dir, filepath.Join(t.TempDir(), "bad.aot"), compile.Options{ARLens: []int{8}, Ctx: 128, VisionBuckets: bad})
		if err == nil || !strings.Contains(err.Error(), "image size") {
			t.Errorf("buckets %q: %v", bad, err)
		}
	}
}

// TestQwenCompiledWeights: the Qwen2-VL and Qwen2.5-VL encoders compiled
// with 8-bit weights (one scale per row) or binary16 weights stay close to
// the float32 plans' embeddings, on every image of the fixture: w8 within
// 0.15 max |diff| and 3% relative RMS (Qwen2.5-VL 4%: measured 2.7% and 3.1%, with
// more 8-bit matrices for its width, a gated MLP and the merger's 128-wide
// rows over 4 blocks of width 32; as SmolVLM's 3%), f16 within
// f16InterpTol and f16RMSTol; neither is the float32 plan itself.
func TestQwenCompiledWeights(t *testing.T) {
	for _, c := range []struct {
		name, dir, buckets, weights string
		maxTol, rmsTol              float64
	}{
		{"qwen2vl-w8", "", "64x96,64x64", "w8", 0.15, 0.03},
		{"qwen2vl-f16", "", "64x96,64x64", "f16", f16InterpTol, f16RMSTol},
		{"qwen25vl-w8", qwen25Dir, "64x144,128x128", "w8", 0.15, 0.04},
		{"qwen25vl-f16", qwen25Dir, "64x144,128x128", "f16", f16InterpTol, f16RMSTol},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir
			if dir == "" {
				dir = testutil.Path(t, "vlm/qwen2vl")
			}
			f32, err := OpenCompiledQwen2VL(compileQwenFixtureAt(t, dir, true, c.buckets, "f32"), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer f32.Close()
			e := compileQwenFixtureAt(t, dir, true, c.buckets, c.weights)
			if w := e.Manifest().Vision.Weights; w != c.weights {
				t.Fatalf("vision weights %q, want %q", w, c.weights)
			}
			enc, err := OpenCompiledQwen2VL(e, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			for _, name := range []string{"image_square.png", "image_wide.png"} {
				img, err := vision.DecodeFile(filepath.Join(dir, name), vision.DefaultLimits)
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
				worst, rel := relDiff(a.Embeds, b.Embeds)
				t.Logf("%s: %s vs f32 max |diff| %.3g, relative RMS %.3g", name, c.weights, worst, rel)
				if worst > c.maxTol || rel > c.rmsTol || worst == 0 {
					t.Errorf("%s: %s embeddings differ from f32 by %.3g (tolerance %g), relative RMS %.3g (tolerance %g)",
						name, c.weights, worst, c.maxTol, rel, c.rmsTol)
				}
			}
		})
	}
}
