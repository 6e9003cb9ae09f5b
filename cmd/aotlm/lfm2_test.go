package main

import (
	"testing"
)

// TestLogitsLFM2 runs `aotlm logits` on the lfm2 fixture (short
// convolutions between attention layers) from its HF folder, its GGUF and
// an artifact compiled with AR-8 prefill passes (shorter than the prompt)
// in both modes, and compares every position with llama.cpp's logits
// within the fixture tolerance 1e-3. Then it quantizes the folder with the
// default recipe, compiles the result with float and with int8
// activations, and compares with the quantized folder's logits through the
// interpreter: equal within 1e-5 relative RMS error with float
// activations, within 0.1 with int8 ones (measured 0.033).
func TestLogitsLFM2(t *testing.T) {
	checkLogitsFamily(t, logitsFamily{name: "lfm2", tol: 1e-3})
}
