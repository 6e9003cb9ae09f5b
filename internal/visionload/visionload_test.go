package visionload

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// textOnly is a model with no artifact: its encoder must come from a
// source model.
func textOnly(t *testing.T) *aotlm.Model {
	t.Helper()
	m, err := aotlm.NewModel(aotlm.Config{BOS: -1,
		NewSequence: func(int) (aotlm.Sequence, error) { return nil, errors.New("not used") }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// compiled compiles the model folder dir, its encoder planned for
// buckets when set, and opens the artifact.
func compiled(t *testing.T, dir, buckets string) *aotlm.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vlm.aot")
	opts := compile.Options{ARLens: []int{8}, Ctx: 128, KV: "f32", VisionBuckets: buckets, Tokenizer: filepath.Join(dir, "text.gguf")}
	if err := compile.CompileFile(dir, path, opts); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(path, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func image(t *testing.T, dir, name string) *vision.RGB {
	t.Helper()
	img, err := vision.DecodeFile(filepath.Join(dir, name), vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func noPiece(string) (int, bool) { return 0, false }

// TestOpenNone: a model with neither a vision plan nor a source encoder
// gives ErrNoEncoder, so that each command words its own message.
func TestOpenNone(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	for _, path := range []string{filepath.Join(dir, "text.gguf"), t.TempDir()} {
		_, err := Open(Source{Model: textOnly(t), Path: path, Threads: 1, Fallback: true})
		if !errors.Is(err, ErrNoEncoder) {
			t.Errorf("%s: %v, want ErrNoEncoder", path, err)
		}
	}
}

// TestOpenInterpreter: without an artifact the folder's encoder, or the
// mmproj file's, runs in the interpreter, and Encode, Preprocess and
// Width are the interpreter model's.
func TestOpenInterpreter(t *testing.T) {
	smol := testutil.Path(t, "vlm/smolvlm")
	qwen := testutil.Path(t, "vlm/qwen2vl")
	for _, c := range []struct {
		name, path, mmproj, dir string
		runs                    int
	}{
		{"smolvlm-folder", smol, "", smol, 0},
		{"qwen2vl-pair", filepath.Join(qwen, "text.gguf"), filepath.Join(qwen, "mmproj.gguf"), qwen, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc, err := Open(Source{Model: textOnly(t), Path: c.path, MMProj: c.mmproj, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			if enc.Where != Interpreter || enc.Interp == nil || enc.Width() != enc.Interp.TextConfig().Hidden {
				t.Fatalf("where %d, interpreter %v, width %d", enc.Where, enc.Interp != nil, enc.Width())
			}
			img := image(t, c.dir, "image_wide.png")
			runs, err := enc.Preprocess(img)
			if err != nil {
				t.Fatal(err)
			}
			got, err := enc.Encode(img)
			if err != nil {
				t.Fatal(err)
			}
			want := c.runs
			if want == 0 {
				want = len(got.Slices) + 1 // tiles and the overview
			}
			if runs != want || runs < 1 {
				t.Fatalf("preprocess: %d encoder runs, want %d", runs, want)
			}
			ref, err := enc.Interp.Encode(img)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Embeds, ref.Embeds) || len(got.Slices) != len(ref.Slices) || !slices.Equal(got.Overview, ref.Overview) {
				t.Fatal("Encode differs from the interpreter model's")
			}
		})
	}
}

// TestOpenArtifactQwen2VL: an artifact's vision plans come first; an
// image no plan's size holds is scaled down into one, or, with Fallback
// and the source folder at hand, encoded by the source model as the
// interpreter does.
func TestOpenArtifactQwen2VL(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	m := compiled(t, dir, "64x64")
	wide := image(t, dir, "image_wide.png") // smart-resized to 64x96: no plan holds it

	enc, err := Open(Source{Model: m, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if enc.Where != Artifact || enc.Plans != 1 || enc.Interp != nil {
		t.Fatalf("where %d, %d plans", enc.Where, enc.Plans)
	}
	if runs, err := enc.Preprocess(wide); err != nil || runs != 1 {
		t.Fatalf("preprocess: %d runs, %v", runs, err)
	}
	shrunk, err := enc.Encode(wide)
	if err != nil {
		t.Fatal(err)
	}
	if shrunk.Rows != 4 || shrunk.Cols != 4 || len(shrunk.Embeds) != 16*enc.Width() {
		t.Fatalf("scaled down: %dx%d rows, %d values", shrunk.Rows, shrunk.Cols, len(shrunk.Embeds))
	}
	id, err := enc.ImageTokenID(noPiece)
	if err != nil || id < 0 {
		t.Fatalf("image token %d: %v", id, err)
	}
	p, err := enc.Place(shrunk, noPiece) // the markers are the artifact's
	if err != nil {
		t.Fatal(err)
	}
	if len(p.IDs) != 16+2 || len(p.Pos) != 3*16 || p.Span != 4 {
		t.Fatalf("placed: %d ids, %d position values, span %d", len(p.IDs), len(p.Pos), p.Span)
	}

	fb, err := Open(Source{Model: m, Path: dir, Threads: 2, Fallback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	got, err := fb.Encode(wide)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := vlm.Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := vm.Encode(wide)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 4 || got.Cols != 6 || !slices.Equal(got.Embeds, want.Embeds) {
		t.Fatalf("fallback: %dx%d rows, not the source model's encoding", got.Rows, got.Cols)
	}
}

// TestOpenArtifactIdefics3: a SmolVLM artifact's one plan encodes tiles
// and lays them out with the markers the artifact recorded.
func TestOpenArtifactIdefics3(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	enc, err := Open(Source{Model: compiled(t, dir, ""), Path: dir, Threads: 2, Fallback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if enc.Where != Artifact || enc.Plans != 1 {
		t.Fatalf("where %d, %d plans", enc.Where, enc.Plans)
	}
	img := image(t, dir, "image_wide.png")
	runs, err := enc.Preprocess(img)
	if err != nil {
		t.Fatal(err)
	}
	e, err := enc.Encode(img)
	if err != nil {
		t.Fatal(err)
	}
	if runs != len(e.Slices)+1 || e.Overview == nil {
		t.Fatalf("%d encoder runs for %d slices and an overview", runs, len(e.Slices))
	}
	id, err := enc.ImageTokenID(noPiece)
	if err != nil {
		t.Fatal(err)
	}
	p, err := enc.Place(e, noPiece)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, x := range p.IDs {
		if x == -1 {
			rows++
		}
	}
	if rows*enc.Width() != len(p.Rows) || rows != (len(e.Slices)+1)*len(e.Overview)/enc.Width() || p.Pos != nil || id < 0 {
		t.Fatalf("placed %d rows of %d values, positions %v, image token %d", rows, len(p.Rows), p.Pos != nil, id)
	}
}

// TestNewSequenceInterpreter: over a text model that is not compiled the
// interpreter's sequence takes rows at consecutive positions and refuses
// rows with positions of their own (M-RoPE).
func TestNewSequenceInterpreter(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	m := textOnly(t)
	enc, err := Open(Source{Model: m, Path: filepath.Join(dir, "text.gguf"), MMProj: filepath.Join(dir, "mmproj.gguf"), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	row := make([]float32, enc.Width())
	if _, err := enc.NewSequence(m, 7, []*vlm.Placed{{IDs: []int{-1}, Rows: row, Pos: []int{0, 0, 0}, Span: 1}}, 16); !errors.Is(err, ErrPositionsNeedEngine) {
		t.Fatalf("rows with M-RoPE positions: %v, want ErrPositionsNeedEngine", err)
	}
	q, err := enc.NewSequence(m, 7, []*vlm.Placed{{IDs: []int{-1}, Rows: row}}, 16)
	if err != nil || q == nil {
		t.Fatalf("rows at consecutive positions: %v", err)
	}
	if _, err := Open(Source{Path: dir}); err == nil {
		t.Fatal("a source without a model opened")
	}
}
