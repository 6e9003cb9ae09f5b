package arch

import (
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
)

// codegenTol is the fixture README's comparison: float32 against its
// float64 reference within 2e-4 (the erf GELU in place of gelu_new moves
// the logits by 8e-4).
const codegenTol = 2e-4

// TestCodegenFixture checks the codegen2 fixture (no GGUF: llama.cpp has
// no CodeGen converter) against its float64 transcription of HF's code
// within 2e-4, and that the traps it names move the logits: NeoX pairs in
// place of GPT-J's interleaved ones (README: 1.2), RoPE on the whole head
// (0.91), no attention scale (2.2).
func TestCodegenFixture(t *testing.T) {
	checkArchFixture(t, "codegen2", codegenTol)
	for _, c := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"half pairs", func(c *Config) { c.RopeStyle = graph.RopeHalf }},
		{"whole-head rotary", func(c *Config) { c.RotaryDim = c.HeadDim }},
		{"no attention scale", func(c *Config) { c.AttnScale = 1 }},
	} {
		d := fixtureDiff(t, "codegen2", false, c.mut)
		t.Logf("%s: max |logit diff| %.3g", c.name, d)
		if d < 0.1 {
			t.Errorf("%s moves the logits by only %.3g: the trap is not exercised", c.name, d)
		}
	}
}
