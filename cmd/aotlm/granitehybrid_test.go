package main

import (
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestLogitsGraniteHybrid runs `aotlm logits` on the granitehybrid fixture
// (Mamba2 layers between attention layers) from its HF folder, its GGUF and
// an artifact compiled with AR-8 prefill passes (shorter than the prompt)
// in both modes, and compares every position with llama.cpp's logits
// within the fixture tolerance 1e-3. Then it quantizes the folder with the
// default recipe, compiles the result with float and with int8
// activations, and compares with the quantized folder's logits through the
// interpreter: equal within 1e-5 relative RMS error with float
// activations, within 0.1 with int8 ones (measured 0.0055); the quantized
// folder itself stays within 0.1 of llama.cpp's f32 logits.
func TestLogitsGraniteHybrid(t *testing.T) {
	checkLogitsFamily(t, logitsFamily{name: "granitehybrid", tol: 1e-3,
		quantized: func(t *testing.T, ref testutil.ArchReference, q [][]float32) {
			// the quantized folder is still this model (its A read once as -exp(A_log))
			rel := relRMSLogitError(ref.Logits, q)
			t.Logf("quantized folder: relative RMS logit error %.3g from llama.cpp's f32 logits", rel)
			if !(rel < 0.1) {
				t.Errorf("quantized folder: relative RMS logit error %.3g from llama.cpp's f32 logits, want below 0.1", rel)
			}
		}})
}
