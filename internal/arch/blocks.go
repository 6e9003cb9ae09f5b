package arch

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// The shared pre-norm decoder: embeddings, then per layer RMSNorm ->
// grouped-query rotary attention -> residual add, RMSNorm -> SwiGLU ->
// residual add, then a final RMSNorm and the classifier. Families differ
// only in Config fields this file reads (biases, per-head q/k norms,
// layers without RoPE, Granite's multipliers, Gemma's (1+w) gains,
// GELU-tanh gate, sandwich norms and sliding-window layers with their own
// RoPE base) and in their config readers and tensor names.

// decoderConfigHF reads the config.json fields every decoder family shares.
func decoderConfigHF(m map[string]any, family string, style graph.RopeStyle) (Config, error) {
	c := Config{Family: family, Source: "hf", RopeStyle: style}
	var err error
	get := func(key string, def int) int {
		if err != nil {
			return 0
		}
		v, ok := format.MetaInt(m, key)
		if !ok {
			if _, present := m[key]; (present && m[key] != nil) || def < 0 {
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
		if s.Type == "yarn" && !yarnFamilies[family] {
			return c, fmt.Errorf("config.json: rope_scaling type %q is not supported by the %s family", s.Type, family)
		}
		c.RopeScaling = s
	}
	return c, nil
}

// yarnFamilies are the families whose config.json may ask for YaRN:
// those whose rotary layers share one rotary embedding (layers without
// rotation aside), and gemma3, whose local layers keep theirs unscaled
// as Hugging Face's Gemma 3 does. Vision-language families add
// themselves in their own files.
var yarnFamilies = map[string]bool{"llama": true, "qwen2": true, "qwen3": true, "granite": true, "smollm3": true,
	"glm": true, "phi3": true, "gemma": true, "gemma3": true, "qwen35": true, "lfm2": true, "granitehybrid": true}

// refuseBiases rejects config.json flags for biases a family's graph does
// not carry, rather than loading the model without them.
func refuseBiases(m map[string]any, keys ...string) error {
	for _, k := range keys {
		if b, ok := m[k].(bool); ok && b {
			return fmt.Errorf("config.json: %q is true, which this family does not support", k)
		}
	}
	return nil
}

// decoderConfigGGUF reads the GGUF metadata every decoder family shares;
// keys are prefixed with the GGUF architecture name.
func decoderConfigGGUF(m map[string]any, arch, family string, style graph.RopeStyle) (Config, error) {
	c := Config{Family: family, Source: "gguf", RopeStyle: style, BOS: -1}
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
	if v, ok := format.MetaInt(m, arch+".pooling_type"); ok {
		// llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank
		switch v {
		case 4:
			c.Pooling = "rank"
		case 1:
			c.Pooling = "mean"
		case 2:
			c.Pooling = "cls"
		case 3:
			c.Pooling = "last"
		}
	}
	c.RotaryDim = get("rope.dimension_count", c.HeadDim)
	c.NormEps = floatOr(m, arch+".attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeTheta = floatOr(m, arch+".rope.freq_base", 10000)
	if t, ok := format.MetaString(m, arch+".rope.scaling.type"); ok && t != "none" {
		c.RopeScaling = RopeScaling{Type: t, Factor: floatOr(m, arch+".rope.scaling.factor", 1)}
		if t == "yarn" {
			c.RopeScaling.OriginalMaxPosition = get("rope.scaling.original_context_length", 0)
			c.RopeScaling.BetaFast = floatOr(m, arch+".rope.scaling.yarn_beta_fast", 32)
			c.RopeScaling.BetaSlow = floatOr(m, arch+".rope.scaling.yarn_beta_slow", 1)
		}
	}
	// -1, or its 32-bit unsigned spelling, is "no such token"
	none := func(v int64) bool { return v == -1 || v == math.MaxUint32 }
	if v, ok := format.MetaInt(m, "tokenizer.ggml.bos_token_id"); ok && !none(v) {
		c.BOS = int(v)
	}
	if v, ok := format.MetaInt(m, "tokenizer.ggml.eos_token_id"); ok && !none(v) {
		c.EOS = []int{int(v)}
	}
	return c, nil
}

// ggufDecoderNames maps canonical (HF) names to llama.cpp's for every
// decoder family; entries a family's graph does not name are never used.
var ggufDecoderNames = map[string]string{
	"model.embed_tokens.weight":       "token_embd.weight",
	"model.norm.weight":               "output_norm.weight",
	"lm_head.weight":                  "output.weight",
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"layer-prefix":                    "blk.",
}

// decoderTensorName maps a canonical name for the HF and GGUF sources.
func decoderTensorName(source, name string) (string, bool) {
	return sourceTensorName(source, name, ggufDecoderNames)
}

// sourceTensorName maps a canonical (HF) tensor name to its name in an HF
// source (unchanged) or a GGUF one (through gguf, a mapLayerName table).
func sourceTensorName(source, name string, gguf map[string]string) (string, bool) {
	switch source {
	case "hf":
		return name, true
	case "gguf":
		return mapLayerName(name, gguf)
	}
	return "", false
}

// orOne returns v, or 1 when v is 0 (unset).
func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

// embedTokens adds the token embedding of c, times c.EmbedScale when set.
func embedTokens(g *graph.Graph, c *Config) int {
	x := g.Embed(g.Tokens(), "model.embed_tokens.weight", c.Vocab, c.Hidden)
	if s := orOne(c.EmbedScale); s != 1 {
		x = g.Scale(x, float32(s))
	}
	return x
}

// attnScaleOf returns the scale of q·k: c.AttnScale, or 1/sqrt(head size)
// when unset.
func attnScaleOf(c *Config) float64 {
	if c.AttnScale == 0 {
		return 1 / math.Sqrt(float64(c.HeadDim))
	}
	return c.AttnScale
}

// scaledResidual returns a function adding a branch to the residual x,
// the branch times c.ResidualScale when set.
func scaledResidual(g *graph.Graph, c *Config) func(x, branch int) int {
	return func(x, branch int) int {
		if s := orOne(c.ResidualScale); s != 1 {
			branch = g.Scale(branch, float32(s))
		}
		return g.Add(x, branch)
	}
}

// lmHead adds the output projection on the normed hidden rows x (the last
// one only unless opts.AllLogits): lm_head, or the embedding when tied.
func lmHead(g *graph.Graph, c *Config, opts BuildOptions, x int) int {
	if !opts.AllLogits {
		x = g.LastRow(x)
	}
	head := "lm_head.weight"
	if c.Tied {
		head = "model.embed_tokens.weight"
	}
	return g.Linear(x, head, c.Vocab, "")
}

// buildDecoder returns the graph of the shared decoder for c.
func buildDecoder(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	x := embedTokens(g, c)
	eps, off := float32(c.NormEps), float32(c.NormOffset)
	localRope, err := slidingRope(c, rope)
	if err != nil {
		return nil, err
	}
	act := g.SiLU
	if c.GELU {
		act = g.GELUTanh
	}
	scale := attnScaleOf(c)
	residual := scaledResidual(g, c)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := g.RMSNorm(x, p+"input_layernorm.weight", eps, off)
		proj := func(name string, n int) int {
			bias := ""
			if c.QKVBias {
				bias = p + "self_attn." + name + ".bias"
			}
			return g.Linear(h, p+"self_attn."+name+".weight", n, bias)
		}
		var q, k, v int
		if c.FusedQKV {
			// rows [q | k | v] of one projection (Phi-3)
			nq, nkv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
			qkv := proj("qkv_proj", nq+2*nkv)
			q, k, v = g.Columns(qkv, 0, nq), g.Columns(qkv, nq, nq+nkv), g.Columns(qkv, nq+nkv, nq+2*nkv)
		} else {
			q = proj("q_proj", c.Heads*c.HeadDim)
			k = proj("k_proj", c.KVHeads*c.HeadDim)
			v = proj("v_proj", c.KVHeads*c.HeadDim)
		}
		if c.QKNorm {
			q = g.HeadRMSNorm(q, p+"self_attn.q_norm.weight", c.HeadDim, eps, off)
			k = g.HeadRMSNorm(k, p+"self_attn.k_norm.weight", c.HeadDim, eps, off)
		}
		sliding := slices.Contains(c.SlidingLayers, l)
		if !slices.Contains(c.NoRopeLayers, l) {
			r := rope
			if sliding {
				r = localRope
			}
			q, k = g.RoPE(q, r), g.RoPE(k, r)
		}
		if c.RotateQK {
			b := op.HadamardBlock(c.HeadDim)
			q, k = g.Hadamard(q, b), g.Hadamard(k, b)
		}
		at := graph.Attn{Layer: l, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: float32(scale),
			Bidirectional: c.Bidirectional}
		if sliding {
			at.Window = c.SlidingWindow
		}
		o := g.Linear(g.Attention(q, k, v, at), p+"self_attn.o_proj.weight", c.Hidden, "")
		if c.SandwichNorms {
			// Gemma 3: norm the branch output, then a separate pre-FFN norm
			x = residual(x, g.RMSNorm(o, p+"post_attention_layernorm.weight", eps, off))
			h = g.RMSNorm(x, p+"pre_feedforward_layernorm.weight", eps, off)
		} else {
			x = residual(x, o)
			h = g.RMSNorm(x, p+"post_attention_layernorm.weight", eps, off)
		}
		var gate, up int
		if c.FusedGateUp {
			// rows [gate | up] of one projection (Phi-3, GLM)
			gu := g.Linear(h, p+"mlp.gate_up_proj.weight", 2*c.FFN, "")
			gate, up = act(g.Columns(gu, 0, c.FFN)), g.Columns(gu, c.FFN, 2*c.FFN)
		} else {
			// Both projections before the activation: adjacent linears
			// of one input, which the engine runs as one dispatch.
			gate = g.Linear(h, p+"mlp.gate_proj.weight", c.FFN, "")
			up = g.Linear(h, p+"mlp.up_proj.weight", c.FFN, "")
			gate = act(gate)
		}
		mid := g.Mul(gate, up)
		if c.RotateDown {
			mid = g.Hadamard(mid, op.HadamardBlock(c.FFN))
		}
		m := g.Linear(mid, p+"mlp.down_proj.weight", c.Hidden, "")
		if c.SandwichNorms {
			m = g.RMSNorm(m, p+"post_feedforward_layernorm.weight", eps, off)
		}
		x = residual(x, m)
	}
	x = buildDense(g, c, g.RMSNorm(x, "model.norm.weight", eps, off))
	logits := lmHead(g, c, opts, x)
	if s := orOne(c.LogitScale); s != 1 {
		logits = g.Scale(logits, float32(1/s))
	}
	g.SetOutput(logits)
	return g, nil
}

// slidingRope returns the rotary embedding of sliding-window layers: the
// global one, or with LocalRopeTheta set, that base without scaling or
// per-pair factors (Gemma 3 local layers).
func slidingRope(c *Config, global graph.Rope) (graph.Rope, error) {
	if c.LocalRopeTheta == 0 || len(c.SlidingLayers) == 0 {
		return global, nil
	}
	local := *c
	local.RopeTheta, local.RopeScaling, local.RopeFreqFactors = c.LocalRopeTheta, RopeScaling{}, nil
	r, err := ropeOf(&local)
	if err != nil {
		return graph.Rope{}, fmt.Errorf("local rope: %w", err)
	}
	return r, nil
}

// ggufLayersWithoutKV reads a per-layer <arch>.attention.head_count_kv
// list of a hybrid model: it returns the layers with no key/value heads
// (the ones that do not attend) and sets c.KVHeads to the one count the
// attention layers share.
func ggufLayersWithoutKV(c *Config, arch string, kv []any) ([]int, error) {
	if len(kv) != c.Layers {
		return nil, fmt.Errorf("gguf: metadata %s.attention.head_count_kv has %d entries for %d layers", arch, len(kv), c.Layers)
	}
	var none []int
	c.KVHeads = 0
	for l, e := range kv {
		n, ok := format.MetaInt(map[string]any{"v": e}, "v")
		switch {
		case !ok || n < 0:
			return nil, fmt.Errorf("gguf: metadata %s.attention.head_count_kv[%d] is %s, not a count", arch, l, show(e))
		case n == 0:
			none = append(none, l)
		case c.KVHeads != 0 && int(n) != c.KVHeads:
			return nil, fmt.Errorf("gguf: metadata %s.attention.head_count_kv: layers with %d and %d key/value heads", arch, c.KVHeads, n)
		default:
			c.KVHeads = int(n)
		}
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads // no attention layer: the count is never used
	}
	return none, nil
}

// checkAscendingLayers returns an error unless layers are ascending
// layers of c; what names them in the error.
func checkAscendingLayers(c *Config, what string, layers []int) error {
	for i, l := range layers {
		if l < 0 || l >= c.Layers || (i > 0 && l <= layers[i-1]) {
			return fmt.Errorf("%s %v are not ascending layers of %d", what, layers, c.Layers)
		}
	}
	return nil
}

// GGUFDecoderName returns llama.cpp's name for the canonical (Hugging
// Face) name of a decoder tensor ("model.layers.3.mlp.down_proj.weight"
// is "blk.3.ffn_down.weight"); false for a name the decoder table does
// not map.
func GGUFDecoderName(name string) (string, bool) {
	return sourceTensorName("gguf", name, ggufDecoderNames)
}
