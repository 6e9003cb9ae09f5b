package arch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The Llama family: RMSNorm, rotary attention with grouped keys/values,
// SwiGLU feed-forward, tied or separate classifier. Covers Llama 1/2/3.x,
// llama2.c checkpoints and SmolLM2.

func init() {
	register(&Family{
		Name:              "llama",
		HFArchitectures:   []string{"LlamaForCausalLM"},
		HFModelTypes:      []string{"llama"},
		GGUFArchitectures: []string{"llama"},
		configHF:          llamaConfigHF,
		configGGUF:        llamaConfigGGUF,
		tensorNames:       llamaTensorName,
		permutesQK:        true,
		build:             buildDecoder,
	})
}

func llamaConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias", "mlp_bias"); err != nil {
		return Config{}, err
	}
	return decoderConfigHF(m, "llama", graph.RopeHalf)
}

func ropeScalingHF(rs map[string]any) (RopeScaling, error) {
	t, _ := format.MetaString(rs, "rope_type")
	if t == "" {
		t, _ = format.MetaString(rs, "type")
	}
	s := RopeScaling{Type: t, Factor: floatOr(rs, "factor", 1),
		LowFreqFactor: floatOr(rs, "low_freq_factor", 1), HighFreqFactor: floatOr(rs, "high_freq_factor", 4)}
	if v, ok := format.MetaInt(rs, "original_max_position_embeddings"); ok {
		s.OriginalMaxPosition = int(v)
	}
	switch t {
	case "", "default", "linear", "llama3", "dynamic":
		return s, nil
	case "yarn":
		s.BetaFast, s.BetaSlow = floatOr(rs, "beta_fast", 32), floatOr(rs, "beta_slow", 1)
		s.AttentionFactor = floatOr(rs, "attention_factor", 0)
		s.Mscale, s.MscaleAllDim = floatOr(rs, "mscale", 0), floatOr(rs, "mscale_all_dim", 0)
		if tr, ok := rs["truncate"].(bool); ok && !tr {
			s.NoTruncate = true
		}
		return s, nil
	}
	return s, fmt.Errorf("rope_scaling type %q is not supported", t)
}

// llamaConfigGGUF reads GGUF metadata; llama.cpp's converter permutes the
// q/k rows of Llama checkpoints for interleaved RoPE.
func llamaConfigGGUF(m map[string]any, arch string) (Config, error) {
	return decoderConfigGGUF(m, arch, "llama", graph.RopeInterleaved)
}

// llamaTensorName maps a canonical (HF) tensor name to its name in source.
func llamaTensorName(source, name string) (string, bool) {
	switch source {
	case "hf":
		return name, true
	case "gguf":
		return mapLayerName(name, ggufDecoderNames)
	case "llama2c":
		return mapLayerName(name, llama2cNames)
	}
	return "", false
}

var llama2cNames = map[string]string{
	"model.embed_tokens.weight":       "tok_embeddings.weight",
	"model.norm.weight":               "norm.weight",
	"lm_head.weight":                  "output.weight",
	"input_layernorm.weight":          "attention_norm.weight",
	"self_attn.q_proj.weight":         "attention.wq.weight",
	"self_attn.k_proj.weight":         "attention.wk.weight",
	"self_attn.v_proj.weight":         "attention.wv.weight",
	"self_attn.o_proj.weight":         "attention.wo.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "feed_forward.w1.weight",
	"mlp.up_proj.weight":              "feed_forward.w3.weight",
	"mlp.down_proj.weight":            "feed_forward.w2.weight",
	"layer-prefix":                    "layers.",
}

// mapLayerName maps "model.layers.N.<rest>" to "<prefix>N.<table[rest]>"
// and global names through the table.
func mapLayerName(name string, table map[string]string) (string, bool) {
	if v, ok := table[name]; ok {
		return v, true
	}
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return "", false
	}
	num, tail, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	if _, err := strconv.Atoi(num); err != nil {
		return "", false
	}
	v, ok := table[tail]
	if !ok {
		return "", false
	}
	return table["layer-prefix"] + num + "." + v, true
}
