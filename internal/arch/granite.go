package arch

import "github.com/aotlm/aotlm/internal/graph"

// The Granite family (dense Granite 3.x): the Llama block with four
// multipliers: embeddings times embedding_multiplier, attention scores
// scaled by attention_multiplier instead of 1/sqrt(head_dim), both residual
// branches times residual_multiplier, logits divided by logits_scaling.
// llama.cpp's converter (a Llama subclass) permutes q/k rows, so GGUF
// checkpoints use interleaved RoPE; it stores the multipliers as
// granite.embedding_scale, .attention.scale, .residual_scale and
// .logit_scale.

func init() {
	register(&Family{
		Name:              "granite",
		HFArchitectures:   []string{"GraniteForCausalLM"},
		HFModelTypes:      []string{"granite"},
		GGUFArchitectures: []string{"granite"},
		configHF:          graniteConfigHF,
		configGGUF:        graniteConfigGGUF,
		tensorNames:       decoderTensorName,
		permutesQK:        true,
		build:             buildDecoder,
	})
}

func graniteConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias", "mlp_bias"); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "granite", graph.RopeHalf)
	// config.json's head_dim is ignored, as by llama.cpp's converter: the
	// modeling code splits hidden_size over the heads
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	c.EmbedScale = floatOr(m, "embedding_multiplier", 1)
	c.AttnScale = floatOr(m, "attention_multiplier", 0)
	c.ResidualScale = floatOr(m, "residual_multiplier", 1)
	c.LogitScale = floatOr(m, "logits_scaling", 1)
	return c, err
}

func graniteConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := decoderConfigGGUF(m, arch, "granite", graph.RopeInterleaved)
	c.EmbedScale = floatOr(m, arch+".embedding_scale", 1)
	c.AttnScale = floatOr(m, arch+".attention.scale", 0)
	c.ResidualScale = floatOr(m, arch+".residual_scale", 1)
	c.LogitScale = floatOr(m, arch+".logit_scale", 1)
	return c, err
}
