package vlm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/vision"
)

// qwen25Dir is the tiny random-weight Qwen2.5-VL fixture: its weights,
// llama.cpp's GGUF pair of them and llama.cpp's mtmd outputs (unslothai
// fork d32676d77, equal to upstream 82bb48500 in the code that ran), made
// as testdata/qwen25vl/README.md says. Its images have 4 and 2 attention
// windows.
const qwen25Dir = "testdata/qwen25vl"

func loadQwen25Ref(t *testing.T) *qwenReference {
	b, err := os.ReadFile(filepath.Join(qwen25Dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	return parseQwenRef(t, b)
}

// TestQwen25VLMatchesLlamaCpp: from the Hugging Face folder and from the
// GGUF pair, each image's embeddings (window attention in blocks 0 and 2)
// match llama.cpp's within embTol, the ids and M-RoPE positions are HF's,
// the text logits at every text position match within logitTol (aotlm's
// embeddings) and refLogitTol (llama.cpp's), and the greedy ids are equal.
func TestQwen25VLMatchesLlamaCpp(t *testing.T) {
	ref := loadQwen25Ref(t)
	hf, err := Open(qwen25Dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := OpenPair(filepath.Join(qwen25Dir, "text.gguf"), filepath.Join(qwen25Dir, "mmproj.gguf"), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("hf", func(t *testing.T) { checkQwenAgainstLlamaCpp(t, hf, qwen25Dir, ref) })
	t.Run("gguf", func(t *testing.T) { checkQwenAgainstLlamaCpp(t, pair, qwen25Dir, ref) })
}

// TestQwen25VLCompiledEncoder: the encoder and merger compiled into the
// artifact beside the text model, from the folder and from the GGUF pair,
// with buckets for the two images' smart-resized sizes (128x128, 64x144)
// and a larger one that must not be chosen, match the interpreter within
// 1e-4 and llama.cpp within embTol; the compiled text model then gives
// llama.cpp's last logits and greedy ids.
func TestQwen25VLCompiledEncoder(t *testing.T) {
	checkQwenCompiledEncoder(t, qwen25Dir, loadQwen25Ref(t), "192x192,128x128,64x144")
}

// TestQwen25VLWindows: the fixture tells window attention apart. Attending
// over the whole image in every block, or within windows in every block,
// moves the embeddings far beyond embTol from llama.cpp's (README: 1.0 to
// 1.7).
func TestQwen25VLWindows(t *testing.T) {
	ref := loadQwen25Ref(t)
	m, err := Open(qwen25Dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	vc := m.fam.(*qwen2vl).m.Vision
	for ci, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(qwen25Dir, c.Image), vision.DefaultLimits)
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
		for name, mut := range map[string]func(v *arch.Qwen2VLVision){
			"no windows":         func(v *arch.Qwen2VLVision) { v.WindowSize = 0 },
			"windows everywhere": func(v *arch.Qwen2VLVision) { v.FullAttnBlocks = nil },
		} {
			v := vc
			mut(&v)
			out := encodeWith(t, &v, m.fam.(*qwen2vl).m.VisionWeights, rows, pos)
			d := maxDiff(out, ref.refEmbeds(ci))
			t.Logf("%s with %s: embeddings differ by %.3g", c.Image, name, d)
			if d < 0.2 {
				t.Errorf("%s with %s: embeddings differ by only %.3g", c.Image, name, d)
			}
		}
	}
}

// encodeWith runs the vision graph of v in the interpreter.
func encodeWith(t *testing.T, v *arch.Qwen2VLVision, w graph.Weights, rows []float32, pos []int) []float32 {
	t.Helper()
	g, err := arch.BuildQwen2VLVision(v)
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	T := len(pos) / 2
	out, _, err := in.RunInput(in.NewPassState(T), graph.Input{IDs: make([]int, T), Rows: rows, Positions: pos})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQwen25VLCompiledNeedsPositions: the compiled encoder's window
// attention needs each patch's row and column; encoding without them is
// refused rather than attending over the wrong rows.
func TestQwen25VLCompiledNeedsPositions(t *testing.T) {
	e := compileQwenFixtureAt(t, qwen25Dir, false, "64x144", "")
	enc, err := e.NewEncoder(plan.VisionPlanName(64, 144), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	rows := make([]float32, enc.Rows()*enc.InputCols())
	if _, err := enc.Encode(rows, make([]int, enc.Rows())); err == nil || !strings.Contains(err.Error(), "row and column") {
		t.Fatalf("encoding without positions: %v", err)
	}
}
