package arch

import (
	"fmt"
	"math"
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
		build:             buildLlama,
	})
}

func llamaConfigHF(m map[string]any) (Config, error) {
	c := Config{Family: "llama", Source: "hf", RopeStyle: graph.RopeHalf}
	var err error
	get := func(key string, def int) int {
		if err != nil {
			return 0
		}
		v, ok := format.MetaInt(m, key)
		if !ok {
			if _, present := m[key]; present || def < 0 {
				err = fmt.Errorf("config.json: %q is missing or not an integer", key)
			}
			return def
		}
		return int(v)
	}
	c.Hidden = get("hidden_size", -1)
	c.FFN = get("intermediate_size", -1)
	c.Layers = get("num_hidden_layers", -1)
	c.Heads = get("num_attention_heads", -1)
	c.KVHeads = get("num_key_value_heads", c.Heads)
	c.Vocab = get("vocab_size", -1)
	c.Context = get("max_position_embeddings", 2048)
	if err != nil {
		return c, err
	}
	c.HeadDim = 0
	if v, ok := format.MetaInt(m, "head_dim"); ok {
		c.HeadDim = int(v)
	} else if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	c.NormEps = floatOr(m, "rms_norm_eps", 1e-6)
	c.RopeTheta = floatOr(m, "rope_theta", 10000)
	if b, ok := m["tie_word_embeddings"].(bool); ok {
		c.Tied = b
	}
	c.BOS = -1
	if v, ok := format.MetaInt(m, "bos_token_id"); ok {
		c.BOS = int(v)
	}
	c.EOS = intList(m["eos_token_id"])
	if rs, ok := m["rope_scaling"].(map[string]any); ok {
		s, err := ropeScalingHF(rs)
		if err != nil {
			return c, fmt.Errorf("config.json: %w", err)
		}
		c.RopeScaling = s
	}
	return c, nil
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
	case "", "default", "linear", "llama3":
		return s, nil
	}
	return s, fmt.Errorf("rope_scaling type %q is not supported", t)
}

func llamaConfigGGUF(m map[string]any, arch string) (Config, error) {
	c := Config{Family: "llama", Source: "gguf", RopeStyle: graph.RopeInterleaved, BOS: -1}
	var missing []string
	get := func(key string, def int) int {
		v, ok := format.MetaInt(m, arch+"."+key)
		if !ok {
			if def < 0 {
				missing = append(missing, arch+"."+key)
			}
			return def
		}
		return int(v)
	}
	c.Hidden = get("embedding_length", -1)
	c.FFN = get("feed_forward_length", -1)
	c.Layers = get("block_count", -1)
	c.Heads = get("attention.head_count", -1)
	c.KVHeads = get("attention.head_count_kv", c.Heads)
	c.Context = get("context_length", 2048)
	if len(missing) > 0 {
		return c, fmt.Errorf("gguf: metadata %s missing or not an integer", strings.Join(missing, ", "))
	}
	c.HeadDim = get("attention.key_length", c.Hidden/max(c.Heads, 1))
	c.RotaryDim = get("rope.dimension_count", c.HeadDim)
	c.NormEps = floatOr(m, arch+".attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeTheta = floatOr(m, arch+".rope.freq_base", 10000)
	if t, ok := format.MetaString(m, arch+".rope.scaling.type"); ok && t != "none" {
		c.RopeScaling = RopeScaling{Type: t, Factor: floatOr(m, arch+".rope.scaling.factor", 1)}
	}
	if v, ok := format.MetaInt(m, "tokenizer.ggml.bos_token_id"); ok {
		c.BOS = int(v)
	}
	if v, ok := format.MetaInt(m, "tokenizer.ggml.eos_token_id"); ok {
		c.EOS = []int{int(v)}
	}
	return c, nil
}

// llamaTensorName maps a canonical (HF) tensor name to its name in source.
func llamaTensorName(source, name string) (string, bool) {
	switch source {
	case "hf":
		return name, true
	case "gguf":
		return mapLayerName(name, ggufLlamaNames)
	case "llama2c":
		return mapLayerName(name, llama2cNames)
	}
	return "", false
}

var ggufLlamaNames = map[string]string{
	"model.embed_tokens.weight":       "token_embd.weight",
	"model.norm.weight":               "output_norm.weight",
	"lm_head.weight":                  "output.weight",
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"layer-prefix":                    "blk.",
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

func buildLlama(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	x := g.Embed(g.Tokens(), "model.embed_tokens.weight", c.Vocab, c.Hidden)
	eps := float32(c.NormEps)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := g.RMSNorm(x, p+"input_layernorm.weight", eps, 0)
		q := g.RoPE(g.Linear(h, p+"self_attn.q_proj.weight", c.Heads*c.HeadDim, ""), rope)
		k := g.RoPE(g.Linear(h, p+"self_attn.k_proj.weight", c.KVHeads*c.HeadDim, ""), rope)
		v := g.Linear(h, p+"self_attn.v_proj.weight", c.KVHeads*c.HeadDim, "")
		a := g.Attention(q, k, v, graph.Attn{Layer: l, Heads: c.Heads, KVHeads: c.KVHeads,
			HeadDim: c.HeadDim, Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))})
		x = g.Add(x, g.Linear(a, p+"self_attn.o_proj.weight", c.Hidden, ""))
		h = g.RMSNorm(x, p+"post_attention_layernorm.weight", eps, 0)
		gate := g.SiLU(g.Linear(h, p+"mlp.gate_proj.weight", c.FFN, ""))
		up := g.Linear(h, p+"mlp.up_proj.weight", c.FFN, "")
		x = g.Add(x, g.Linear(g.Mul(gate, up), p+"mlp.down_proj.weight", c.Hidden, ""))
	}
	x = g.RMSNorm(x, "model.norm.weight", eps, 0)
	if !opts.AllLogits {
		x = g.LastRow(x)
	}
	head := "lm_head.weight"
	if c.Tied {
		head = "model.embed_tokens.weight"
	}
	g.SetOutput(g.Linear(x, head, c.Vocab, ""))
	return g, nil
}
