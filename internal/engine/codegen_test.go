package engine_test

import "testing"

// codegenRefTol is the codegen2 fixture README's tolerance against its
// float64 transcription of HF's CodeGen code.
const codegenRefTol = 2e-4

// TestCodegenArtifact compiles the codegen2 fixture (HF folder only:
// llama.cpp has no CodeGen converter) with AR-8 and AR-16 plans and checks
// against the reference within 2e-4: the logits of every position in kv
// mode and in hybrid mode, the last logits after a prefill split in two
// calls, and the 16 greedy ids.
func TestCodegenArtifact(t *testing.T) {
	checkFixtureFamilyArtifact(t, "codegen2", codegenRefTol)
}
