package arch

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The SmolLM3 family: the Llama block where some layers attend without
// rotary embedding. config.json's no_rope_layers holds one flag per layer,
// 1 meaning "use RoPE"; without it every no_rope_layer_interval-th layer
// (default 4) goes without. llama.cpp stores no flag and always skips
// every 4th layer; its converter (a Llama subclass) permutes q/k rows, so
// GGUF checkpoints use interleaved RoPE.

// smolNoRopeInterval is llama.cpp's fixed interval of layers without RoPE.
const smolNoRopeInterval = 4

func init() {
	register(&Family{
		Name:              "smollm3",
		HFArchitectures:   []string{"SmolLM3ForCausalLM"},
		HFModelTypes:      []string{"smollm3"},
		GGUFArchitectures: []string{"smollm3"},
		configHF:          smollm3ConfigHF,
		configGGUF: func(m map[string]any, arch string) (Config, error) {
			c, err := decoderConfigGGUF(m, arch, "smollm3", graph.RopeInterleaved)
			c.NoRopeLayers = everyNth(c.Layers, smolNoRopeInterval)
			return c, err
		},
		tensorNames: decoderTensorName,
		permutesQK:  true,
		build:       buildDecoder,
	})
}

func smollm3ConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias", "mlp_bias"); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "smollm3", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	flags, ok := format.List(m["no_rope_layers"])
	if !ok || flags == nil {
		n := smolNoRopeInterval
		if v, ok := format.MetaInt(m, "no_rope_layer_interval"); ok {
			n = int(v)
		}
		if n < 1 {
			return c, fmt.Errorf("config.json: no_rope_layer_interval %d must be positive", n)
		}
		c.NoRopeLayers = everyNth(c.Layers, n)
		return c, nil
	}
	if len(flags) != c.Layers {
		return c, fmt.Errorf("config.json: no_rope_layers has %d entries for %d layers", len(flags), c.Layers)
	}
	for l, f := range flags {
		v, ok := format.MetaInt(map[string]any{"v": f}, "v")
		if !ok || (v != 0 && v != 1) {
			return c, fmt.Errorf("config.json: no_rope_layers[%d] is %v, want 0 or 1", l, f)
		}
		if v == 0 {
			c.NoRopeLayers = append(c.NoRopeLayers, l)
		}
	}
	return c, nil
}

// everyNth returns the layers l < layers with (l+1) % n == 0.
func everyNth(layers, n int) []int {
	var out []int
	for l := n - 1; l < layers; l += n {
		out = append(out, l)
	}
	return out
}
