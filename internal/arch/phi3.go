package arch

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The Phi-3 family (Phi-3, Phi-3.5, Phi-4-mini): the Llama block with a
// fused qkv_proj (rows [q | k | v]) and a fused gate_up_proj (rows
// [gate | up], SiLU on the gate half), NeoX RoPE over the first
// partial_rotary_factor * head_dim dimensions of each head, an optional
// sliding window on every layer, and an untied classifier. llama.cpp keeps
// both fused tensors (blk.N.attn_qkv, blk.N.ffn_up) and does not permute
// rows. Long-context "longrope" scaling is refused: it scales the rotated
// dimensions' magnitude, which the graph's RoPE does not express.

func init() {
	register(&Family{
		Name:              "phi3",
		HFArchitectures:   []string{"Phi3ForCausalLM"},
		HFModelTypes:      []string{"phi3"},
		GGUFArchitectures: []string{"phi3"},
		configHF:          phi3ConfigHF,
		configGGUF:        phi3ConfigGGUF,
		tensorNames:       fusedTensorName,
		build:             buildDecoder,
	})
}

func phi3ConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias", "mlp_bias"); err != nil {
		return Config{}, err
	}
	if rs, ok := m["rope_scaling"].(map[string]any); ok {
		t, _ := format.MetaString(rs, "type")
		if rt, ok := format.MetaString(rs, "rope_type"); ok {
			t = rt
		}
		if t == "longrope" || t == "su" {
			return Config{}, fmt.Errorf("config.json: rope_scaling type %q (Phi-3 long context) is not supported", t)
		}
	}
	c, err := decoderConfigHF(m, "phi3", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	c.FusedQKV, c.FusedGateUp = true, true
	if err := partialRotary(m, &c, 1); err != nil {
		return c, err
	}
	if w, ok := format.MetaInt(m, "sliding_window"); ok && w > 0 {
		c.setWindowAll(int(w))
	}
	return c, nil
}

func phi3ConfigGGUF(m map[string]any, arch string) (Config, error) {
	if _, ok := m[arch+".rope.scaling.attn_factor"]; ok {
		return Config{}, fmt.Errorf("gguf: %s.rope.scaling.attn_factor: Phi-3 long-context rope scaling is not supported", arch)
	}
	c, err := decoderConfigGGUF(m, arch, "phi3", graph.RopeHalf)
	c.FusedQKV, c.FusedGateUp = true, true
	if w, ok := format.MetaInt(m, arch+".attention.sliding_window"); ok && w > 0 {
		c.setWindowAll(int(w))
	}
	return c, err
}

// setWindowAll gives every layer a sliding window of w positions.
func (c *Config) setWindowAll(w int) {
	c.SlidingWindow = w
	c.SlidingLayers = make([]int, c.Layers)
	for l := range c.SlidingLayers {
		c.SlidingLayers[l] = l
	}
}

// partialRotary sets the rotary size from config.json's
// partial_rotary_factor (def when absent): the first
// int(head_dim * factor) dimensions of each head rotate.
func partialRotary(m map[string]any, c *Config, def float64) error {
	f := floatOr(m, "partial_rotary_factor", def)
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("config.json: partial_rotary_factor %v must be in (0, 1]", f)
	}
	c.RotaryDim = int(float64(c.HeadDim) * f)
	if c.RotaryDim <= 0 || c.RotaryDim%2 != 0 {
		return fmt.Errorf("config.json: partial_rotary_factor %v gives rotary size %d of head size %d, want a positive even size",
			f, c.RotaryDim, c.HeadDim)
	}
	return nil
}

// ggufFusedNames maps the fused projections of Phi-3 and GLM to
// llama.cpp's names; llama.cpp's ffn_up holds the fused [gate | up] rows.
var ggufFusedNames = map[string]string{
	"self_attn.qkv_proj.weight": "attn_qkv.weight",
	"self_attn.qkv_proj.bias":   "attn_qkv.bias",
	"mlp.gate_up_proj.weight":   "ffn_up.weight",
	"layer-prefix":              "blk.",
}

// fusedTensorName maps canonical names of decoders with fused projections.
func fusedTensorName(source, name string) (string, bool) {
	if source == "gguf" {
		if v, ok := mapLayerName(name, ggufFusedNames); ok {
			return v, true
		}
	}
	return decoderTensorName(source, name)
}
