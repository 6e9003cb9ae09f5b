package main

import "testing"

// TestLogitsCodegen2 runs `aotlm logits` on the codegen2 fixture (HF folder
// only: llama.cpp has no CodeGen converter) from the folder and from an
// artifact compiled with AR-8 prefill passes, each with --mode hybrid and
// kv, and compares every position with the fixture's float64
// transcription of HF's code within its README's 2e-4 (the erf GELU in
// place of gelu_new would miss by 8e-4). Then it quantizes the folder with
// the default recipe and compiles the result with float and int8
// activations, as for the other families.
func TestLogitsCodegen2(t *testing.T) {
	checkLogitsFamily(t, logitsFamily{name: "codegen2", tol: 2e-4})
}
