package arch

import "github.com/aotlm/aotlm/internal/graph"

// The Qwen3 family (dense): the Llama block with a per-head RMSNorm of q
// and k (q_norm, k_norm of size head_dim, before RoPE), NeoX RoPE and an
// explicit head_dim that need not equal hidden/heads. GGUF q/k rows are
// not permuted (llama.cpp's qwen3 uses NeoX rope).

func init() {
	register(&Family{
		Name:              "qwen3",
		HFArchitectures:   []string{"Qwen3ForCausalLM"},
		HFModelTypes:      []string{"qwen3"},
		GGUFArchitectures: []string{"qwen3"},
		configHF: func(m map[string]any) (Config, error) {
			if err := refuseBiases(m, "attention_bias"); err != nil {
				return Config{}, err
			}
			c, err := decoderConfigHF(m, "qwen3", graph.RopeHalf)
			c.QKNorm = true
			return c, err
		},
		configGGUF: func(m map[string]any, arch string) (Config, error) {
			c, err := decoderConfigGGUF(m, arch, "qwen3", graph.RopeHalf)
			c.QKNorm = true
			return c, err
		},
		tensorNames: decoderTensorName,
		build:       buildDecoder,
	})
}
