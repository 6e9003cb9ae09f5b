package arch

import (
	"fmt"
	"maps"
	"math"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The Phi-3 family (Phi-3, Phi-3.5, Phi-4-mini): the Llama block with a
// fused qkv_proj (rows [q | k | v]) and a fused gate_up_proj (rows
// [gate | up], SiLU on the gate half), NeoX RoPE over the first
// partial_rotary_factor * head_dim dimensions of each head, an optional
// sliding window on every layer, and an untied classifier. llama.cpp keeps
// both fused tensors (blk.N.attn_qkv, blk.N.ffn_up) and does not permute
// rows.
//
// Long-context "longrope" (formerly "su") scaling divides the base
// frequencies pairwise by rope_scaling.short_factor or long_factor and
// multiplies cos and sin by an attention factor (see ropeMagnitude). The
// factor set is chosen once for the context the graph is built for
// (Config.LongRopeFactors): long when it exceeds
// original_max_position_embeddings. llama.cpp's GGUF stores the sets as
// the tensors rope_factors_long.weight and rope_factors_short.weight, the
// magnitude as phi3.rope.scaling.attn_factor and the original context as
// phi3.rope.scaling.original_context_length.

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
	var long *RopeScaling
	if rs, ok := m["rope_scaling"].(map[string]any); ok {
		t, _ := format.MetaString(rs, "type")
		if rt, ok := format.MetaString(rs, "rope_type"); ok {
			t = rt
		}
		if t == "longrope" || t == "su" {
			s, err := longRopeHF(m, rs)
			if err != nil {
				return Config{}, fmt.Errorf("config.json: %w", err)
			}
			long = &s
			m = maps.Clone(m)
			delete(m, "rope_scaling")
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
	if long != nil {
		c.RopeScaling = *long
		if err := c.checkLongRope(); err != nil {
			return c, fmt.Errorf("config.json: %w", err)
		}
	}
	if w, ok := format.MetaInt(m, "sliding_window"); ok && w > 0 {
		c.setWindowAll(int(w))
	}
	return c, nil
}

// longRopeHF reads a longrope rope_scaling block; the original context is
// rope_scaling's original_max_position_embeddings or else the top-level one.
func longRopeHF(m, rs map[string]any) (RopeScaling, error) {
	s := RopeScaling{Type: "longrope"}
	var err error
	if s.ShortFactor, err = floatList(rs, "short_factor"); err != nil {
		return s, err
	}
	if s.LongFactor, err = floatList(rs, "long_factor"); err != nil {
		return s, err
	}
	o, ok := format.MetaInt(rs, "original_max_position_embeddings")
	if !ok {
		o, ok = format.MetaInt(m, "original_max_position_embeddings")
	}
	if !ok {
		return s, fmt.Errorf("rope_scaling.original_max_position_embeddings: missing or not an integer")
	}
	if o <= 0 || o > 1<<24 {
		return s, fmt.Errorf("rope_scaling.original_max_position_embeddings: %d must be positive", o)
	}
	s.OriginalMaxPosition = int(o)
	for key, dst := range map[string]*float64{"factor": &s.Factor, "attention_factor": &s.AttentionFactor} {
		if v, present := rs[key]; present && v != nil {
			f, ok := format.MetaFloat(rs, key)
			if !ok || !(f > 0) || math.IsInf(f, 0) {
				return s, fmt.Errorf("rope_scaling.%s: %v must be a positive number", key, v)
			}
			*dst = f
		}
	}
	return s, nil
}

// floatList reads rs[key] as a list of numbers.
func floatList(rs map[string]any, key string) ([]float64, error) {
	l, ok := format.List(rs[key])
	if !ok {
		return nil, fmt.Errorf("rope_scaling.%s: missing or not a list", key)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		f, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("rope_scaling.%s[%d]: %v is not a number", key, i, v)
		}
		out[i] = f
	}
	return out, nil
}

func phi3ConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := decoderConfigGGUF(m, arch, "phi3", graph.RopeHalf)
	if a, ok := format.MetaFloat(m, arch+".rope.scaling.attn_factor"); ok {
		if !(a > 0) || math.IsInf(a, 0) {
			return c, fmt.Errorf("gguf: %s.rope.scaling.attn_factor: %v must be positive", arch, a)
		}
		c.RopeScaling = RopeScaling{Type: "longrope", AttentionFactor: a, OriginalMaxPosition: c.Context}
		if o, ok := format.MetaInt(m, arch+".rope.scaling.original_context_length"); ok {
			if o <= 0 || o > 1<<24 {
				return c, fmt.Errorf("gguf: %s.rope.scaling.original_context_length: %d must be positive", arch, o)
			}
			c.RopeScaling.OriginalMaxPosition = int(o)
		}
	}
	c.FusedQKV, c.FusedGateUp = true, true
	if w, ok := format.MetaInt(m, arch+".attention.sliding_window"); ok && w > 0 {
		c.setWindowAll(int(w))
	}
	return c, err
}

// ggufLongRope reads llama.cpp's longrope factor tensors into c when the
// checkpoint has them (or its metadata asked for longrope), making the
// scaling longrope with the trained context as original context unless the
// metadata said otherwise.
func ggufLongRope(ck format.Checkpoint, c *Config) error {
	_, hasLong := format.Find(ck, "rope_factors_long.weight")
	_, hasShort := format.Find(ck, "rope_factors_short.weight")
	if !hasLong && !hasShort && c.RopeScaling.Type != "longrope" {
		return nil
	}
	if c.RopeScaling.Type != "longrope" {
		c.RopeScaling = RopeScaling{Type: "longrope", OriginalMaxPosition: c.Context}
	}
	for _, t := range []struct {
		name string
		dst  *[]float64
	}{{"rope_factors_long.weight", &c.RopeScaling.LongFactor}, {"rope_factors_short.weight", &c.RopeScaling.ShortFactor}} {
		if _, ok := format.Find(ck, t.name); !ok {
			return fmt.Errorf("gguf: tensor %q: missing, longrope needs it", t.name)
		}
		v, err := ck.ReadFloat32(t.name)
		if err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", t.name, err)
		}
		*t.dst = make([]float64, len(v))
		for i, f := range v {
			(*t.dst)[i] = float64(f)
		}
	}
	return nil
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
