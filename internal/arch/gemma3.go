package arch

import (
	"fmt"
	"maps"
	"math"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The Gemma 3 family (text models): Gemma's block plus per-head q/k
// RMSNorm, sandwich norms (post_attention_layernorm on the attention
// output and post_feedforward_layernorm on the feed-forward output, each
// before its residual add; pre_feedforward_layernorm before the
// feed-forward), all gains (1+w); local layers attend within a sliding
// window with RoPE base rope_local_base_freq and no scaling, global layers
// use rope_theta with rope_scaling; q·k is scaled by
// query_pre_attn_scalar^-0.5.
//
// llama.cpp differs in what it stores: every *norm.weight already holds
// 1+w; the layer pattern is fixed (every 6th layer global); the local base
// is gemma3.rope.freq_base_swa (10000 when absent); and the attention
// scale is 1/sqrt(head_dim) except for its 62-layer model, which uses
// 1/sqrt(hidden/heads). GGUF names: pre_feedforward_layernorm is ffn_norm,
// post_attention_layernorm post_attention_norm, post_feedforward_layernorm
// post_ffw_norm.

// gemma3GlobalEvery is llama.cpp's fixed pattern: layer l is global when
// (l+1) % 6 == 0, and also the HF default sliding_window_pattern.
const gemma3GlobalEvery = 6

func init() {
	register(&Family{
		Name:              "gemma3",
		HFArchitectures:   []string{"Gemma3ForCausalLM"},
		HFModelTypes:      []string{"gemma3_text"},
		GGUFArchitectures: []string{"gemma3"},
		configHF:          gemma3ConfigHF,
		configGGUF:        gemma3ConfigGGUF,
		tensorNames:       gemma3TensorName,
		build:             buildDecoder,
	})
}

func gemma3ConfigHF(m map[string]any) (Config, error) {
	if err := gemmaRefuse(m); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "gemma3", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	dtype, _ := format.MetaString(m, "torch_dtype")
	gemmaCommon(&c, 1, dtype)
	if _, ok := m["tie_word_embeddings"].(bool); !ok {
		c.Tied = true
	}
	c.QKNorm, c.SandwichNorms = true, true
	// defaults of the HF Gemma 3 text config
	scalar := floatOr(m, "query_pre_attn_scalar", 256)
	if !(scalar > 0) || math.IsInf(scalar, 0) {
		return c, fmt.Errorf("config.json: query_pre_attn_scalar %v must be positive", scalar)
	}
	c.AttnScale = 1 / math.Sqrt(scalar)
	c.LocalRopeTheta = floatOr(m, "rope_local_base_freq", 10000)
	c.SlidingWindow = 4096
	if v, ok := format.MetaInt(m, "sliding_window"); ok {
		c.SlidingWindow = int(v)
	}
	if c.SlidingLayers, err = gemma3LayerTypes(m, c.Layers); err != nil {
		return c, err
	}
	return c, nil
}

// gemma3LayerTypes reads the sliding-window layers from layer_types, or
// from sliding_window_pattern (every n-th layer global) without it.
func gemma3LayerTypes(m map[string]any, layers int) ([]int, error) {
	types, ok := format.List(m["layer_types"])
	if !ok || types == nil {
		n := gemma3GlobalEvery
		if v, ok := format.MetaInt(m, "sliding_window_pattern"); ok {
			n = int(v)
		}
		if n < 1 {
			return nil, fmt.Errorf("config.json: sliding_window_pattern %d must be positive", n)
		}
		return slidingLayers(layers, n), nil
	}
	if len(types) != layers {
		return nil, fmt.Errorf("config.json: layer_types has %d entries for %d layers", len(types), layers)
	}
	var out []int
	for l, t := range types {
		switch t {
		case "sliding_attention":
			out = append(out, l)
		case "full_attention":
		default:
			return nil, fmt.Errorf("config.json: layer_types[%d] is %v, want sliding_attention or full_attention", l, t)
		}
	}
	return out, nil
}

// slidingLayers returns the layers l < layers with (l+1) % n != 0.
func slidingLayers(layers, n int) []int {
	var out []int
	for l := 0; l < layers; l++ {
		if (l+1)%n != 0 {
			out = append(out, l)
		}
	}
	return out
}

// gemma3LargeLayers is the layer count of the model llama.cpp scales by
// 1/sqrt(hidden/heads) (Gemma 3 27B, query_pre_attn_scalar 168).
const gemma3LargeLayers = 62

func gemma3ConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := decoderConfigGGUF(m, arch, "gemma3", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	gemmaCommon(&c, 0, "")
	c.QKNorm, c.SandwichNorms = true, true
	w, ok := format.MetaInt(m, arch+".attention.sliding_window")
	if !ok {
		return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window missing or not an integer", arch)
	}
	c.SlidingWindow = int(w)
	c.SlidingLayers = slidingLayers(c.Layers, gemma3GlobalEvery)
	c.LocalRopeTheta = floatOr(m, arch+".rope.freq_base_swa", 10000)
	if c.Layers == gemma3LargeLayers && c.Heads > 0 {
		c.AttnScale = 1 / math.Sqrt(float64(c.Hidden/c.Heads))
	}
	return c, nil
}

var gemma3GGUFNames = func() map[string]string {
	t := maps.Clone(ggufDecoderNames)
	t["post_attention_layernorm.weight"] = "post_attention_norm.weight"
	t["pre_feedforward_layernorm.weight"] = "ffn_norm.weight"
	t["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight"
	return t
}()

// gemma3TensorName maps a canonical (HF) tensor name to its name in source.
func gemma3TensorName(source, name string) (string, bool) {
	return sourceTensorName(source, name, gemma3GGUFNames)
}
