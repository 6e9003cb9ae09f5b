package arch

import "github.com/aotlm/aotlm/internal/graph"

// The GLM family (GLM-Edge, HF GlmForCausalLM; llama.cpp arch "chatglm"):
// the Llama block with biases on q, k and v, a fused gate_up_proj (rows
// [gate | up], SiLU on the gate half), and RoPE over the first
// partial_rotary_factor * head_dim dimensions (default half) rotating
// INTERLEAVED pairs (x0,x1),(x2,x3)... with frequencies over the rotary
// dimensions only; untied classifier. llama.cpp keeps GLM-Edge's separate
// q/k/v (with biases) and the fused ffn_up, rotates adjacent pairs
// ("normal" rope) and stores the rotary size as rope.dimension_count.
// Older ChatGLM checkpoints with a fused attn_qkv are not covered.

// glmEdgeContext is GLM-Edge's max_position_embeddings, used for GGUF
// files whose context_length is the converter's placeholder.
const glmEdgeContext = 8192

func init() {
	register(&Family{
		Name:              "glm",
		HFArchitectures:   []string{"GlmForCausalLM"},
		HFModelTypes:      []string{"glm"},
		GGUFArchitectures: []string{"chatglm"},
		configHF:          glmConfigHF,
		configGGUF: func(m map[string]any, arch string) (Config, error) {
			c, err := decoderConfigGGUF(m, arch, "glm", graph.RopeInterleaved)
			c.QKVBias, c.FusedGateUp = true, true
			if c.Context == c.Hidden {
				// llama.cpp's converter writes the hidden size when config.json
				// has no seq_length (as in GLM-Edge's): not a trained length
				c.Context = glmEdgeContext
			}
			return c, err
		},
		tensorNames: fusedTensorName,
		build:       buildDecoder,
	})
}

func glmConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "mlp_bias"); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "glm", graph.RopeInterleaved)
	if err != nil {
		return c, err
	}
	// GlmConfig's attention_bias defaults to true
	c.QKVBias = true
	if b, ok := m["attention_bias"].(bool); ok {
		c.QKVBias = b
	}
	c.FusedGateUp = true
	return c, partialRotary(m, &c, 0.5)
}
