package vlm

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
)

// internvlDir is the tiny random-weight InternVL3 fixture: its weights,
// llama.cpp's GGUF pair of them and llama.cpp's mtmd outputs (upstream
// 82bb48500a9a6b3374da2cf5811695369278e4d3), made as the README of
// testdata/vlm says. mtmd places the class token's position row after
// the patches' and picks LLaVA-NeXT's tile grid: Options.LlamaCpp.
const internvlDir = "vlm/internvl3"

// The InternVL fixture's tolerances: the README measures an exact float64
// forward (llama.cpp's class token order) within 1.7e-3 of llama.cpp's
// embeddings (its F16 im2col and GELU table) and within 8.7e-4 of its
// logits.
const (
	internvlEmbTol   = 2e-3
	internvlLogitTol = 1e-3
)

// internvlImageID is <IMG_CONTEXT>'s id in the fixture's vocabulary.
const internvlImageID = 264

// internvlChunks returns the embeddings of each image chunk of case c of
// ref, in order, and the case's ids with the image rows as imageID.
func internvlChunks(ref *reference, c int, imageID int) (chunks [][]float32, ids []int) {
	for _, l := range ref.Cases[c].Layout {
		if l.Type == "image" {
			chunks = append(chunks, l.Embeddings)
			for range l.NTokens {
				ids = append(ids, imageID)
			}
			continue
		}
		ids = append(ids, l.IDs...)
	}
	return chunks, ids
}

// imageChunks is an encoded image's chunks in order: tiles, overview.
func imageChunks(img *Image) [][]float32 {
	out := append([][]float32(nil), img.Slices...)
	if img.Overview != nil {
		out = append(out, img.Overview)
	}
	return out
}

// checkChunks compares an encoded image's chunks with llama.cpp's.
func checkChunks(t *testing.T, name string, got *Image, want [][]float32, tol float64) {
	t.Helper()
	chunks := imageChunks(got)
	if len(chunks) != len(want) {
		t.Fatalf("%s: %d chunks (grid %dx%d), llama.cpp has %d", name, len(chunks), got.Cols, got.Rows, len(want))
	}
	for i := range chunks {
		if len(chunks[i]) != len(want[i]) {
			t.Fatalf("%s chunk %d: %d values, llama.cpp has %d", name, i, len(chunks[i]), len(want[i]))
		}
		d := maxDiff(chunks[i], want[i])
		t.Logf("%s chunk %d: max |embedding diff| %.3g", name, i, d)
		if d > tol {
			t.Errorf("%s chunk %d: embeddings differ by %.3g > %g", name, i, d, tol)
		}
	}
}

// TestInternVLMatchesLlamaCpp: with llama.cpp's choices, from the Hugging
// Face folder and from the GGUF pair, every chunk of each image (1 and
// 3x2+1 of them) matches mtmd's embeddings within internvlEmbTol, the
// prompt's ids are HF's, the logits at every text position match within
// internvlLogitTol and the 8 greedy ids are equal.
func TestInternVLMatchesLlamaCpp(t *testing.T) {
	dir := testutil.Path(t, internvlDir)
	ref := readRef(t, internvlDir+"/reference.json")
	hf, err := OpenWith(dir, 2, Options{LlamaCpp: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := OpenPairWith(filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf"), 2, Options{LlamaCpp: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("hf", func(t *testing.T) { checkInternVL(t, hf, dir, ref) })
	t.Run("gguf", func(t *testing.T) { checkInternVL(t, pair, dir, ref) })
}

func checkInternVL(t *testing.T, m *Model, dir string, ref *reference) {
	if id, err := m.ImageTokenID(ref.piece); err != nil || id != internvlImageID {
		t.Fatalf("image token %d, %v; want %d", id, err, internvlImageID)
	}
	D, V := m.TextConfig().Hidden, m.TextConfig().Vocab
	for ci, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := m.Encode(img)
		if err != nil {
			t.Fatal(err)
		}
		theirs, _ := internvlChunks(ref, ci, internvlImageID)
		checkChunks(t, c.Image, enc, theirs, internvlEmbTol)
		p, err := m.Place(enc, ref.piece)
		if err != nil {
			t.Fatal(err)
		}
		seq := NewSequence(D, m.PosComponents())
		seq.Text(c.PrefixIDs...)
		if err := seq.Image(p); err != nil {
			t.Fatal(err)
		}
		seq.Text(c.SuffixIDs...)
		if len(seq.IDs) != len(c.InputIDs) {
			t.Fatalf("%s: %d rows, want %d", c.Image, len(seq.IDs), len(c.InputIDs))
		}
		for i, id := range seq.IDs {
			if id == -1 {
				id = internvlImageID
			}
			if id != c.InputIDs[i] || seq.Positions[i] != i {
				t.Fatalf("%s: row %d: id %d at %d, want %d at %d", c.Image, i, id, seq.Positions[i], c.InputIDs[i], i)
			}
		}
		logits, err := m.Logits(seq.IDs, seq.Embeds)
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i, r := range c.TextPositions {
			worst = max(worst, maxDiff(logits[r*V:(r+1)*V], c.Logits[i]))
		}
		t.Logf("%s: max |logit diff| %.3g", c.Image, worst)
		if worst > internvlLogitTol {
			t.Errorf("%s: logits differ by %.3g > %g", c.Image, worst, internvlLogitTol)
		}
		for k, want := range c.Greedy {
			n := len(seq.IDs)
			best := argmax(logits[(n-1)*V : n*V])
			if best != want {
				t.Fatalf("%s: greedy[%d] = %d, want %d", c.Image, k, best, want)
			}
			seq.Text(best)
			if k+1 < len(c.Greedy) {
				if logits, err = m.Logits(seq.IDs, seq.Embeds); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestInternVLDefaultIsHF: without the switch the model follows Hugging
// Face's InternVL: each image takes the grid of find_closest_aspect_ratio
// the reference records (hf_dynamic_preprocess_would_use), plus the
// thumbnail when it has more than one tile. The fixture's wide 160x90
// image is 2x1 tiles plus the thumbnail, 3 chunks and 48 image tokens
// (where mtmd has 3x2 + overview, 112); a tile-sized image is one tile
// without a thumbnail, the pixels mtmd encodes, and Hugging Face's class
// token order puts its embeddings far from llama.cpp's (the README's
// 1.8-3.0).
func TestInternVLDefaultIsHF(t *testing.T) {
	dir := testutil.Path(t, internvlDir)
	ref := readRef(t, internvlDir+"/reference.json")
	var hfRef struct {
		Cases []struct {
			Size [2]int `json:"image_size_wh"`
			HF   struct {
				Grid   [2]int `json:"grid_cols_rows"`
				Tiles  int    `json:"n_tiles_incl_thumbnail"`
				Tokens int    `json:"n_image_tokens"`
			} `json:"hf_dynamic_preprocess_would_use"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, internvlDir+"/reference.json"), &hfRef); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	for ci, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		want := hfRef.Cases[ci]
		if want.Size != [2]int{img.W, img.H} {
			t.Fatalf("%s: %dx%d, the reference says %v", c.Image, img.W, img.H, want.Size)
		}
		if want.Size == [2]int{160, 90} && (want.HF.Grid != [2]int{2, 1} || want.HF.Tiles != 3 || want.HF.Tokens != 48) {
			t.Fatalf("the reference's Hugging Face grid for 160x90 is %+v, not 2x1 + thumbnail, 48 tokens", want.HF)
		}
		enc, err := m.Encode(img)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Place(enc, ref.piece)
		if err != nil {
			t.Fatal(err)
		}
		if [2]int{enc.Cols, enc.Rows} != want.HF.Grid || len(imageChunks(enc)) != want.HF.Tiles || p.Span != want.HF.Tokens {
			t.Errorf("%s: grid %dx%d (cols x rows), %d chunks, %d image tokens; Hugging Face's: %v, %d, %d", c.Image,
				enc.Cols, enc.Rows, len(imageChunks(enc)), p.Span, want.HF.Grid, want.HF.Tiles, want.HF.Tokens)
		}
		if thumb := enc.Overview != nil; thumb != (want.HF.Grid[0]*want.HF.Grid[1] > 1) {
			t.Errorf("%s: thumbnail %v with a %v grid", c.Image, thumb, want.HF.Grid)
		}
		if img.W == 64 && img.H == 64 {
			theirs, _ := internvlChunks(ref, ci, internvlImageID)
			if d := maxDiff(imageChunks(enc)[0], theirs[len(theirs)-1]); d < 0.5 {
				t.Errorf("%s: Hugging Face's class token order is within %.3g of llama.cpp's embeddings", c.Image, d)
			}
		}
	}
}

// compileInternVL compiles the InternVL fixture (the folder, or with
// mmproj the GGUF pair) with its encoder in float32 and llama.cpp's
// choices, and opens it.
func compileInternVL(t *testing.T, dir string, mmproj bool) *engine.Engine {
	t.Helper()
	src, opts := dir, compile.Options{ARLens: []int{8}, Ctx: 160, KV: "f32", VisionWeights: "f32", VisionLlamaCpp: true}
	if mmproj {
		src, opts.MMProj = filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf")
	}
	path := filepath.Join(t.TempDir(), "internvl.aot")
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

// TestInternVLCompiled: the encoder compiled into the artifact beside the
// text model (from the folder and from the GGUF pair, llama.cpp's choices
// recorded) gives mtmd's embeddings within internvlEmbTol; the compiled
// text model fed them through ImageSequence (passes of 8, so images span
// passes) gives llama.cpp's last logits within internvlLogitTol and its
// 8 greedy ids.
func TestInternVLCompiled(t *testing.T) {
	dir := testutil.Path(t, internvlDir)
	ref := readRef(t, internvlDir+"/reference.json")
	for _, src := range []struct {
		name   string
		mmproj bool
	}{{"hf", false}, {"gguf", true}} {
		t.Run(src.name, func(t *testing.T) {
			e := compileInternVL(t, dir, src.mmproj)
			if f := ArtifactFamily(e); f != "internvl" {
				t.Fatalf("artifact vision family %q", f)
			}
			c, err := OpenArtifact(e, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			imageID, err := c.ImageTokenID(ref.piece)
			if err != nil || imageID != internvlImageID {
				t.Fatalf("image token %d, %v; want %d", imageID, err, internvlImageID)
			}
			D, V := c.TextWidth(), e.Manifest().Vocab
			for ci, cs := range ref.Cases {
				img, err := vision.DecodeFile(filepath.Join(dir, cs.Image), vision.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Encode(img)
				if err != nil {
					t.Fatal(err)
				}
				theirs, ids := internvlChunks(ref, ci, imageID)
				checkChunks(t, cs.Image, got, theirs, internvlEmbTol)
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
				logits, err := q.PrefillContext(context.Background(), ids)
				if err != nil {
					t.Fatal(err)
				}
				d := maxDiff(logits[:V], cs.Logits[len(cs.Logits)-1])
				t.Logf("%s: last-position logits differ by %.3g", cs.Image, d)
				if d > internvlLogitTol {
					t.Errorf("%s: logits differ by %.3g > %g", cs.Image, d, internvlLogitTol)
				}
				for k, want := range cs.Greedy {
					if best := argmax(logits[:V]); best != want {
						t.Fatalf("%s: greedy[%d] = %d, want %d", cs.Image, k, best, want)
					}
					if logits, err = q.Decode(cs.Greedy[k]); err != nil {
						t.Fatal(err)
					}
				}
				q.Close()
			}
		})
	}
}

// TestInternVLHFOrderMatchesReference: the encoder with Hugging Face's
// class token order (the default), run on the tiles mtmd encoded, is as
// far from llama.cpp's embeddings as the fixture's independent float64
// forward in Hugging Face's order is (check.independent_numpy_f64
// .embd_maxabs_diff_hf, 1.8 to 2.4 per chunk), within 3e-3: the two
// forwards differ by at most the GELU form (erf there, ~1.2e-3) and float
// rounding, so their distances to llama.cpp's differ by no more.
func TestInternVLHFOrderMatchesReference(t *testing.T) {
	dir := testutil.Path(t, internvlDir)
	var ref struct {
		Cases []struct {
			Check struct {
				F64 struct {
					HF []float64 `json:"embd_maxabs_diff_hf"`
				} `json:"independent_numpy_f64"`
			} `json:"check"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, internvlDir+"/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	lref := readRef(t, internvlDir+"/reference.json")
	m, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	vc := m.fam.(*internvl).m.Vision
	if vc.LlamaCpp {
		t.Fatal("the default is llama.cpp's order")
	}
	mtmd := internvlProc(&vc)
	mtmd.LlamaCpp = true
	for ci, c := range lref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		tiles, err := mtmd.Preprocess(img)
		if err != nil {
			t.Fatal(err)
		}
		theirs, _ := internvlChunks(lref, ci, internvlImageID)
		want := ref.Cases[ci].Check.F64.HF
		chunks := append(append([]*vision.RGB(nil), tiles.Tiles...), tiles.Overview)
		if len(chunks) != len(theirs) || len(want) != len(theirs) {
			t.Fatalf("%s: %d chunks, %d in the reference, %d distances", c.Image, len(chunks), len(theirs), len(want))
		}
		for i, tile := range chunks {
			rows, ids, err := vc.Rows(vision.Normalize(tile, vc.Mean, vc.Std))
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := m.enc.RunInput(m.enc.NewPassState(len(ids)), graph.Input{IDs: ids, Rows: rows})
			if err != nil {
				t.Fatal(err)
			}
			d := maxDiff(out, theirs[i])
			t.Logf("%s chunk %d: %.4f from llama.cpp's, the float64 forward %.4f", c.Image, i, d, want[i])
			if math.Abs(d-want[i]) > 3e-3 {
				t.Errorf("%s chunk %d: Hugging Face's order is %.4f from llama.cpp's, the reference's %.4f", c.Image, i, d, want[i])
			}
		}
	}
}
