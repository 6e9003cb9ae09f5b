package arch

import "github.com/aotlm/aotlm/internal/graph"

// The Qwen2 family (Qwen2, Qwen2.5): the Llama block with biases on the
// q, k and v projections (none on o_proj) and NeoX (rotate_half) RoPE.
// llama.cpp does not permute Qwen2's q/k rows (its qwen2 runtime uses NeoX
// rope), so GGUF checkpoints rotate half-split pairs too.

func init() {
	register(&Family{
		Name:              "qwen2",
		HFArchitectures:   []string{"Qwen2ForCausalLM"},
		HFModelTypes:      []string{"qwen2"},
		GGUFArchitectures: []string{"qwen2"},
		configHF: func(m map[string]any) (Config, error) {
			c, err := decoderConfigHF(m, "qwen2", graph.RopeHalf)
			c.QKVBias = true
			return c, err
		},
		configGGUF: func(m map[string]any, arch string) (Config, error) {
			c, err := decoderConfigGGUF(m, arch, "qwen2", graph.RopeHalf)
			c.QKVBias = true
			return c, err
		},
		tensorNames: decoderTensorName,
		build:       buildDecoder,
	})
}
