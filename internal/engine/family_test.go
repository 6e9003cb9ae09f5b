package engine_test

import (
	"fmt"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestFamilyParity compiles the llama.cpp fixture models of the families
// beyond Llama (Qwen2 biases, Qwen3 per-head q/k norms, SmolLM3 layers
// without RoPE, Granite multipliers, Gemma (1+w) gains and GELU, Gemma 3
// sandwich norms and sliding window 8, which prompts of up to 14
// positions cross, LFM2 short convolutions whose state crosses passes,
// Gemma 4 per-layer inputs and shared key/value layers, Granite 4 hybrid's
// Mamba2 scans, CodeGen2's parallel LayerNorm block with biases and
// partial interleaved RoPE) from their HF folders into f32
// artifacts and checks the engine against the interpreter within logitTol,
// in hybrid mode (AR-1 and AR-4 plans) and kv mode.
func TestFamilyParity(t *testing.T) {
	for _, family := range []string{"qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3", "lfm2", "gemma4", "granitehybrid", "codegen2"} {
		m := loadModel(t, testutil.Path(t, "arch/"+family))
		e := compileModel(t, m, 64, 4)
		for _, n := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/ar%d", family, n), func(t *testing.T) { checkParity(t, m, e, n, engine.ModeHybrid) })
		}
		t.Run(family+"/kv", func(t *testing.T) { checkParity(t, m, e, 4, engine.ModeKV) })
	}
}
