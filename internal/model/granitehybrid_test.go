package model_test

import "testing"

// TestGraniteHybridFixture checks Granite 4 hybrid (Mamba2 layers between
// attention layers) against llama.cpp as TestArchFixtures does the other
// families: the logits of every position from the HF folder and from the
// GGUF within 1e-3, and the 16 greedy ids, decoded with the convolution
// and scan states carried from step to step.
func TestGraniteHybridFixture(t *testing.T) {
	checkFamilyFixture(t, "granitehybrid", 1e-3, familyFixturePaths(t, "granitehybrid")...)
}
