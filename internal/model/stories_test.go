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

// The oracle here is llama2.c's run.c (see the reference files' own
// "reference" fields): greedy ids from BOS-prefixed prompts and the logits at
// every prompt position, for the real stories260K model.

type logitsRef struct {
	PromptIDs []int       `json:"prompt_ids"`
	Logits    [][]float32 `json:"logits"`
}

// storiesModels opens stories260K in both formats it is stored in.
func storiesModels(t *testing.T) map[string]*model.Model {
	t.Helper()
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	bin := testutil.Path(t, "llama2c/stories260K.bin")
	tok := testutil.Path(t, "llama2c/tok512-dratman/tok512.bin")
	out := map[string]*model.Model{}
	for name, o := range map[string]struct{ path, tok string }{"gguf": {gguf, ""}, "llama2c": {bin, tok}} {
		m, err := model.Open(o.path, model.Options{Tokenizer: o.tok, Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = m
	}
	return out
}

func TestStoriesGreedyMatchesLlama2C(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	for name, m := range storiesModels(t) {
		for _, c := range ref.Cases {
			// the prompt is encoded by our tokenizer: its ids must be run.c's
			rm, err := m.Runtime()
			if err != nil {
				t.Fatal(err)
			}
			prompt, err := rm.Encode(c.Prompt, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(prompt, c.PromptIDs) {
				t.Errorf("%s %q: prompt ids %v, llama2.c %v", name, c.Prompt, prompt, c.PromptIDs)
				continue
			}
			s, err := m.NewSession(0)
			if err != nil {
				t.Fatal(err)
			}
			res, err := decoding.Generate(s, prompt, decoding.Options{MaxTokens: len(c.IDs)})
			if err != nil {
				t.Fatalf("%s %q: %v", name, c.Prompt, err)
			}
			if !slices.Equal(res.IDs, c.IDs) {
				t.Errorf("%s %q:\n got %v\nwant %v", name, c.Prompt, res.IDs, c.IDs)
			}
		}
	}
}

// TestStoriesLogits compares per-position logits: max |ours - llama2.c| over
// max |llama2.c| must be under 1e-4.
func TestStoriesLogits(t *testing.T) {
	var ref logitsRef
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/stories260K-logits.json"), &ref); err != nil {
		t.Fatal(err)
	}
	for name, m := range storiesModels(t) {
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Logits(ref.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ref.Logits) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(ref.Logits))
		}
		var maxDiff, maxAbs float64
		for i := range got {
			if len(got[i]) != len(ref.Logits[i]) {
				t.Fatalf("%s: row %d has %d logits, want %d", name, i, len(got[i]), len(ref.Logits[i]))
			}
			for j, want := range ref.Logits[i] {
				maxDiff = math.Max(maxDiff, math.Abs(float64(got[i][j]-want)))
				maxAbs = math.Max(maxAbs, math.Abs(float64(want)))
			}
		}
		rel := maxDiff / maxAbs
		t.Logf("%s: max abs diff %.3g, max |logit| %.3g, relative %.3g", name, maxDiff, maxAbs, rel)
		if rel > 1e-4 {
			t.Errorf("%s: relative logit error %.3g > 1e-4", name, rel)
		}
	}
}
