package model_test

import "testing"

// TestCodegenFixture checks the codegen2 fixture (HF folder only) through
// the interpreter against its float64 transcription of HF's CodeGen code:
// the logits of every position within the README's 2e-4 and the 16
// greedy ids, decoded one token a step over the cache.
func TestCodegenFixture(t *testing.T) {
	checkFamilyFixture(t, "codegen2", 2e-4, familyFixturePaths(t, "codegen2")...)
}
