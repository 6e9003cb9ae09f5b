package vlm

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
)

// qwenReference is reference.json of ../shared/testdata/vlm/qwen2vl:
// llama.cpp's mtmd (upstream 82bb48500a9a6b3374da2cf5811695369278e4d3)
// on the tiny random-weight Qwen2-VL; how it was made is in that folder's
// README.
type qwenReference struct {
	SpecialTokens struct {
		IDs map[string]string `json:"ids"`
	} `json:"special_tokens"`
	Cases []struct {
		Image     string `json:"image"`
		PrefixIDs []int  `json:"prefix_ids"`
		SuffixIDs []int  `json:"suffix_ids"`
		Layout    []struct {
			Type       string    `json:"type"`
			Pos        int       `json:"pos"`
			IDs        []int     `json:"ids"`
			NTokens    int       `json:"n_tokens"`
			Embeddings []float32 `json:"embeddings"`
			MRoPE      [][3]int  `json:"mrope_pos_t_y_x"`
		} `json:"layout"`
		InputIDs   []int       `json:"input_ids_hf_style"`
		MRoPEHF    [3][]int    `json:"mrope_position_ids_hf"`
		TextSeqIdx []int       `json:"text_sequence_indices"`
		Logits     [][]float32 `json:"logits"`
		Greedy     []int       `json:"greedy"`
	} `json:"cases"`
}

func loadQwenRef(t *testing.T) *qwenReference {
	return parseQwenRef(t, testutil.ReadFile(t, "vlm/qwen2vl/reference.json"))
}

// parseQwenRef reads a reference.json of the Qwen2-VL layout (the
// Qwen2.5-VL fixture's has it too).
func parseQwenRef(t *testing.T, b []byte) *qwenReference {
	var r qwenReference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func (r *qwenReference) piece(s string) (int, bool) {
	for k, v := range r.SpecialTokens.IDs {
		if v == s {
			id, err := strconv.Atoi(k)
			return id, err == nil
		}
	}
	return 0, false
}

// refEmbeds is the image chunk's embeddings llama.cpp computed.
func (r *qwenReference) refEmbeds(c int) []float32 {
	for _, l := range r.Cases[c].Layout {
		if l.Type == "image" {
			return l.Embeddings
		}
	}
	return nil
}

// TestQwen2VLMatchesLlamaCpp: from the Hugging Face folder and from the
// GGUF pair, each image's embeddings, the layout and M-RoPE positions, the
// text logits at every text position (with aotlm's embeddings and with
// llama.cpp's) and the greedy continuation match llama.cpp's.
func TestQwen2VLMatchesLlamaCpp(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	hf, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := OpenPair(filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf"), 2)
	if err != nil {
		t.Fatal(err)
	}
	ref := loadQwenRef(t)
	t.Run("hf", func(t *testing.T) { checkQwenAgainstLlamaCpp(t, hf, dir, ref) })
	t.Run("gguf", func(t *testing.T) { checkQwenAgainstLlamaCpp(t, pair, dir, ref) })
}

// checkQwenAgainstLlamaCpp checks a Qwen2-VL / Qwen2.5-VL model against the
// reference of the fixture in dir: embeddings within embTol, ids and
// M-RoPE positions exactly, logits within logitTol (own embeddings) and
// refLogitTol (llama.cpp's), the 8 greedy ids.
func checkQwenAgainstLlamaCpp(t *testing.T, m *Model, dir string, ref *qwenReference) {
	if m.PosComponents() != 3 {
		t.Fatalf("text rows carry %d position components, want 3", m.PosComponents())
	}
	if id, err := m.ImageTokenID(ref.piece); err != nil || id != 265 {
		t.Fatalf("image token %d, %v; want 265", id, err)
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
		theirs := ref.refEmbeds(ci)
		if len(enc.Embeds) != len(theirs) {
			t.Fatalf("%s: %d embedding values (%dx%d tokens), want %d", c.Image, len(enc.Embeds), enc.Rows, enc.Cols, len(theirs))
		}
		d := maxDiff(enc.Embeds, theirs)
		t.Logf("%s: max |embedding diff| %.3g", c.Image, d)
		if d > embTol {
			t.Errorf("%s: embeddings differ by %.3g > %g", c.Image, d, embTol)
		}

		for _, src := range []struct {
			name string
			rows []float32
			tol  float64
		}{{"own embeddings", enc.Embeds, logitTol}, {"llama.cpp embeddings", theirs, refLogitTol}} {
			e := *enc
			e.Embeds = src.rows
			p, err := m.Place(&e, ref.piece)
			if err != nil {
				t.Fatal(err)
			}
			seq := NewSequence(D, m.PosComponents())
			seq.Text(c.PrefixIDs...)
			if err := seq.Image(p); err != nil {
				t.Fatal(err)
			}
			seq.Text(c.SuffixIDs...)
			// the ids (image rows as <|image_pad|>) and positions are HF's
			for i, id := range seq.IDs {
				if id == -1 {
					id = 265
				}
				if i >= len(c.InputIDs) || id != c.InputIDs[i] {
					t.Fatalf("%s: ids %v, want %v", c.Image, seq.IDs, c.InputIDs)
				}
				for j := 0; j < 3; j++ {
					if seq.Positions[3*i+j] != c.MRoPEHF[j][i] {
						t.Fatalf("%s: row %d position %v, want (%d %d %d)", c.Image, i, seq.Positions[3*i:3*i+3],
							c.MRoPEHF[0][i], c.MRoPEHF[1][i], c.MRoPEHF[2][i])
					}
				}
			}
			logits, err := m.LogitsAt(seq.IDs, seq.Embeds, seq.Positions)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i, r := range c.TextSeqIdx {
				worst = max(worst, maxDiff(logits[r*V:(r+1)*V], c.Logits[i]))
			}
			t.Logf("%s %s: max |logit diff| %.3g", c.Image, src.name, worst)
			if worst > src.tol {
				t.Errorf("%s %s: logits differ by %.3g > %g", c.Image, src.name, worst, src.tol)
			}
			for k, want := range c.Greedy {
				n := len(seq.IDs)
				row := logits[(n-1)*V : n*V]
				best := argmax(row)
				if best != want {
					t.Fatalf("%s %s: greedy[%d] = %d, want %d", c.Image, src.name, k, best, want)
				}
				seq.Text(best)
				if k+1 < len(c.Greedy) {
					if logits, err = m.LogitsAt(seq.IDs, seq.Embeds, seq.Positions); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for j, x := range v {
		if x > v[best] {
			best = j
		}
	}
	return best
}

// TestQwen2VLCompiled: the Qwen2-VL text model compiled to an artifact,
// fed the fixture's whole sequence through ImageSequence (the image rows
// as embedding rows at their M-RoPE positions, in passes of 8 so the
// image spans passes), gives llama.cpp's logits after the last prompt
// token and its 8 greedy ids (decode steps at positions after the
// image's span); with aotlm's own image embeddings and with llama.cpp's.
func TestQwen2VLCompiled(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	ref := loadQwenRef(t)
	m, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen2vl.aot")
	if err := compile.CompileModel(m.TextModel(), compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 128, KV: "f32"}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	D, V := m.TextConfig().Hidden, m.TextConfig().Vocab
	for ci, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		own, err := m.Encode(img)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range []struct {
			name string
			rows []float32
			tol  float64
		}{{"own embeddings", own.Embeds, logitTol}, {"llama.cpp embeddings", ref.refEmbeds(ci), refLogitTol}} {
			im := *own
			im.Embeds = src.rows
			p, err := m.Place(&im, ref.piece)
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.NewSession(engine.SessionOptions{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			q := NewImageSequence(s, 265, D)
			if err := q.QueueImage(p.Rows, p.Pos, p.Span); err != nil {
				t.Fatal(err)
			}
			logits, err := q.PrefillContext(context.Background(), c.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if q.Pending() != 0 {
				t.Fatalf("%d image rows left unplaced", q.Pending())
			}
			d := maxDiff(logits[:V], c.Logits[len(c.Logits)-1])
			t.Logf("%s %s: last-position logits differ by %.3g", c.Image, src.name, d)
			if d > src.tol {
				t.Errorf("%s %s: logits differ by %.3g > %g", c.Image, src.name, d, src.tol)
			}
			for k, want := range c.Greedy {
				if best := argmax(logits[:V]); best != want {
					t.Fatalf("%s %s: greedy[%d] = %d, want %d", c.Image, src.name, k, best, want)
				}
				if logits, err = q.Decode(want); err != nil {
					t.Fatal(err)
				}
			}
			// rewinding to the end of the prompt and decoding again gives
			// the same first step
			if err := q.Rewind(len(c.InputIDs) + 1); err != nil {
				t.Fatal(err)
			}
			again, err := q.Decode(c.Greedy[1])
			if err != nil {
				t.Fatal(err)
			}
			if best := argmax(again[:V]); best != c.Greedy[2] {
				t.Fatalf("%s %s: after a rewind greedy[2] = %d, want %d", c.Image, src.name, best, c.Greedy[2])
			}
			q.Close()
		}
	}
}

// TestQwen2VLTraps: the fixture exercises the traps the tolerances rest
// on (README, sensitivity): without the vision RoPE (all patch positions
// 0) the embeddings miss by far more than 5e-3; with llama.cpp's
// embeddings, the text logits miss 1e-4 with plain sequential positions
// instead of M-RoPE and with M-RoPE lacking the image rows' row/col
// offsets.
func TestQwen2VLTraps(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	ref := loadQwenRef(t)
	m, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	q := m.fam.(*qwen2vl)
	vc := &q.m.Vision
	D, V := m.TextConfig().Hidden, m.TextConfig().Vocab
	for ci, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		p, err := vision.NewQwen2VL(vc.PatchSize, vc.Merge).Preprocess(img)
		if err != nil {
			t.Fatal(err)
		}
		rows, pos, _, _, err := vc.Patches(vision.Normalize(p, vc.Mean, vc.Std), p.W, p.H)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := m.enc.RunInput(m.enc.NewPassState(len(pos)/2), graph.Input{IDs: make([]int, len(pos)/2), Rows: rows,
			Positions: make([]int, len(pos))})
		if err != nil {
			t.Fatal(err)
		}
		theirs := ref.refEmbeds(ci)
		d := maxDiff(out, theirs)
		t.Logf("%s without vision RoPE: embeddings differ by %.3g", c.Image, d)
		if d < 0.1 {
			t.Errorf("%s: dropping the vision RoPE changes the embeddings by only %.3g", c.Image, d)
		}

		seq := NewSequence(D, 3)
		seq.Text(c.PrefixIDs...)
		// the image as mtmd placed it: its rows at mtmd's own (t, y, x),
		// the text after it at p0 + max(rows, cols)
		var lay *Placed
		for _, l := range c.Layout {
			if l.Type == "image" {
				lay = &Placed{IDs: oneRun(262, l.NTokens, 263), Rows: theirs, Span: l.MRoPE[len(l.MRoPE)-1][1] - l.Pos + 1}
				lay.Span = max(lay.Span, l.MRoPE[len(l.MRoPE)-1][2]-l.Pos+1)
				for _, tyx := range l.MRoPE {
					lay.Pos = append(lay.Pos, tyx[0]-l.Pos, tyx[1]-l.Pos, tyx[2]-l.Pos)
				}
			}
		}
		if err := seq.Image(lay); err != nil {
			t.Fatal(err)
		}
		seq.Text(c.SuffixIDs...)
		worst := func(positions []int) float64 {
			logits, err := m.LogitsAt(seq.IDs, seq.Embeds, positions)
			if err != nil {
				t.Fatal(err)
			}
			var w float64
			for i, r := range c.TextSeqIdx {
				w = max(w, maxDiff(logits[r*V:(r+1)*V], c.Logits[i]))
			}
			return w
		}
		if d := worst(seq.Positions); d > refLogitTol {
			t.Fatalf("%s: the reference layout misses by %.3g", c.Image, d)
		}
		flat := make([]int, len(seq.Positions))
		noOffsets := make([]int, len(seq.Positions))
		for i := range flat {
			flat[i] = i / 3
			noOffsets[i] = seq.Positions[i-i%3] // every component = t
		}
		for name, ps := range map[string][]int{"sequential positions": flat, "M-RoPE without row/col offsets": noOffsets} {
			d := worst(ps)
			t.Logf("%s with %s: logits differ by %.3g", c.Image, name, d)
			if d < 10*refLogitTol {
				t.Errorf("%s with %s: logits differ by only %.3g", c.Image, name, d)
			}
		}
	}
}
