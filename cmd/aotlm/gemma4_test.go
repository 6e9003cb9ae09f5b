package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestLogitsGemma4 runs `aotlm logits` on the gemma4 fixture (per-layer
// embedding inputs, layers sharing another layer's keys and values) from
// its HF folder, its GGUF and an artifact compiled with AR-8 prefill
// passes (shorter than the prompt) in both modes, and compares every
// position with llama.cpp's logits within the fixture tolerance 2e-2
// (llama.cpp's fp16 GELU table). Then it quantizes the folder with the
// default recipe, compiles the result with float and with int8
// activations, and compares with the quantized folder's logits through
// the interpreter: equal within 1e-5 relative RMS error with float
// activations, within 0.1 with int8 ones (measured 0.013).
func TestLogitsGemma4(t *testing.T) {
	fixture := testutil.Path(t, "arch/gemma4")
	tmp := t.TempDir()
	// The fixture's tokenizer.json is the converter's vocabulary stub (a
	// BPE model without merges), which compile refuses by name; the model
	// is run from its config and weights alone.
	if code, _, stderr := runCLI(t, "compile", fixture, "-o", filepath.Join(tmp, "gemma4.aot")); code == 0 || !strings.Contains(stderr, "tokenizer.json") {
		t.Fatalf("compile with the stub tokenizer.json: exit %d, %q; want an error naming tokenizer.json", code, stderr)
	}
	dir := filepath.Join(tmp, "gemma4")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.CopyFiles(t, fixture, dir, "config.json", "model.safetensors")
	checkLogitsFamily(t, logitsFamily{name: "gemma4", dir: dir, tol: 2e-2})
}
