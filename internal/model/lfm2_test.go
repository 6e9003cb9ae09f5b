package model_test

import "testing"

// TestLFM2Fixture checks LFM2 (short-convolution layers between attention
// layers) against llama.cpp as TestArchFixtures does the other families:
// the logits of every position from the HF folder and from the GGUF within
// 1e-3, and the 16 greedy ids, decoded with the convolution state carried
// from step to step.
func TestLFM2Fixture(t *testing.T) {
	checkFamilyFixture(t, "lfm2", 1e-3, familyFixturePaths(t, "lfm2")...)
}
