package model_test

import (
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGemma4Fixture checks Gemma 4 (per-layer inputs, layers sharing
// another layer's keys and values) against llama.cpp as TestArchFixtures
// does the other families: the logits of every position from the HF
// folder and from the GGUF within 2e-2 (llama.cpp's fp16 GELU table), and
// the 16 greedy ids, decoded one token a step over the cache.
func TestGemma4Fixture(t *testing.T) {
	// the fixture's tokenizer.json is the converter's stub (no merges),
	// which a folder open refuses: the folder is run without it
	fixture := testutil.Path(t, "arch/gemma4")
	checkFamilyFixture(t, "gemma4", 2e-2, copyFixtureWeights(t, fixture), fixture+"/model.gguf")
}
