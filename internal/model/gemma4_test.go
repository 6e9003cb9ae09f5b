package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGemma4Fixture checks Gemma 4 (per-layer inputs, layers sharing
// another layer's keys and values) against llama.cpp as TestArchFixtures
// does the other families: the logits of every position from the HF
// folder and from the GGUF within 2e-2 (llama.cpp's fp16 GELU table), and
// the 16 greedy ids, decoded one token a step over the cache.
func TestGemma4Fixture(t *testing.T) {
	var ref archRef
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/gemma4/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	// the fixture's tokenizer.json is the converter's stub (no merges),
	// which a folder open refuses: the folder is run without it
	fixture := testutil.Path(t, "arch/gemma4")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(fixture, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{dir, fixture + "/model.gguf"} {
		m, err := model.Open(path, model.Options{Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Logits(ref.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for i := range ref.Logits {
			d = max(d, maxDiff(got[i], ref.Logits[i]))
		}
		t.Logf("%s: max |logit diff| %.3g over %d positions", path, d, len(ref.Logits))
		if d > 2e-2 {
			t.Errorf("%s: logits differ from llama.cpp by %.3g (tolerance 2e-2)", path, d)
		}
		s2, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		res, err := decoding.Generate(s2, ref.Tokens, decoding.Options{MaxTokens: len(ref.Greedy)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.IDs, ref.Greedy) {
			t.Errorf("%s: greedy %v, llama.cpp %v", path, res.IDs, ref.Greedy)
		}
	}
}
