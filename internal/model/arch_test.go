package model_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

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
// the GGUF — llama.cpp's q/k permutation and rope_freqs factors.
func TestArchFixtures(t *testing.T) {
	for _, family := range []string{"llama"} {
		var ref archRef
		if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+family+"/reference.json"), &ref); err != nil {
			t.Fatal(err)
		}
		dir := testutil.Path(t, "arch/"+family)
		for _, path := range []string{dir, dir + "/model.gguf"} {
			m, err := model.Open(path, model.Options{Threads: 2})
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			s, _ := m.NewSession(256)
			got, err := s.Logits(ref.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			var maxDiff float64
			for i := range ref.Logits {
				for j, want := range ref.Logits[i] {
					maxDiff = math.Max(maxDiff, math.Abs(float64(got[i][j]-want)))
				}
			}
			t.Logf("%s: max |logit diff| %.3g over %d positions", path, maxDiff, len(ref.Logits))
			if maxDiff > 1e-3 {
				t.Errorf("%s: logits differ from llama.cpp by %.3g (tolerance 1e-3)", path, maxDiff)
			}
			s2, _ := m.NewSession(256)
			res, err := decoding.Generate(s2, ref.Tokens, decoding.Options{MaxTokens: len(ref.Greedy)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, ref.Greedy) {
				t.Errorf("%s: greedy %v, llama.cpp %v", path, res.IDs, ref.Greedy)
			}
		}
	}
}
