package model_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/testutil"
)

type archRef struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float32 `json:"logits"`
	Greedy []int       `json:"greedy"`
}

// TestArchFixtures checks families against llama.cpp (arch/<family>/
// reference.json: its logits for every position of one batch, and 16 greedy
// ids), from the HF folder and from llama.cpp's own GGUF conversion, within
// the README's tolerance (absolute 1e-3). The llama fixture exercises Llama 3
// rope scaling (all three frequency branches), tied embeddings, and — through
// the GGUF — llama.cpp's q/k permutation and rope_freqs factors; qwen2 q/k/v
// biases and NeoX rope; qwen3 per-head q/k RMSNorm and head_dim != hidden/heads;
// smollm3 a layer without RoPE; granite its four multipliers; gemma (1+w)
// gains, GELU-tanh and scaled embeddings (tolerance 2e-2, as the README
// suggests for the gemma families); gemma3 sandwich norms, sliding-window
// local layers with their own unscaled RoPE and query_pre_attn_scalar;
// qwen35 Gated DeltaNet layers (causal conv and delta-rule state) beside
// gated full attention with partial RoPE.
func TestArchFixtures(t *testing.T) {
	for _, family := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3", "qwen35"} {
		tol := 1e-3
		if strings.HasPrefix(family, "gemma") {
			tol = 2e-2 // llama.cpp's GELU goes through an fp16 table (README)
		}
		checkFamilyFixture(t, family, tol, familyFixturePaths(t, family)...)
	}
}

// TestArchFixtureArtifact compiles the qwen3 fixture's HF folder into an f32
// artifact (AR-1 and AR-4 plans) and checks, in hybrid and kv modes, that
// its logits equal the interpreter's within 1e-5 and llama.cpp's within
// 1e-3, and that its 16 greedy ids are llama.cpp's.
func TestArchFixtureArtifact(t *testing.T) {
	var ref archRef
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen3/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	dir := testutil.Path(t, "arch/qwen3")
	out := filepath.Join(t.TempDir(), "qwen3.aot")
	if err := compile.CompileFile(dir, out, compile.Options{ARLens: []int{4}, Ctx: 128}); err != nil {
		t.Fatal(err)
	}
	im, err := model.Open(dir, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	is, err := im.NewSession(128)
	if err != nil {
		t.Fatal(err)
	}
	want, err := is.Logits(ref.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"hybrid", "kv"} {
		am, err := aotlm.Open(out, aotlm.Options{Threads: 2, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		s, err := am.NewSession(128)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Logits(context.Background(), ref.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		var dInterp, dRef float64
		for i := range ref.Logits {
			for j := range ref.Logits[i] {
				dInterp = math.Max(dInterp, math.Abs(float64(got[i][j]-want[i][j])))
				dRef = math.Max(dRef, math.Abs(float64(got[i][j]-ref.Logits[i][j])))
			}
		}
		t.Logf("%s: max |logit diff| %.3g vs interpreter, %.3g vs llama.cpp", mode, dInterp, dRef)
		if dInterp > 1e-5 || dRef > 1e-3 {
			t.Errorf("%s: artifact logits differ by %.3g from the interpreter (1e-5), %.3g from llama.cpp (1e-3)", mode, dInterp, dRef)
		}
		s2, err := am.NewSession(128)
		if err != nil {
			t.Fatal(err)
		}
		res, err := decoding.Generate(s2.Sequence().(decoding.Session), ref.Tokens, decoding.Options{MaxTokens: len(ref.Greedy)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.IDs, ref.Greedy) {
			t.Errorf("%s: greedy %v, llama.cpp %v", mode, res.IDs, ref.Greedy)
		}
		am.Close()
	}
}
