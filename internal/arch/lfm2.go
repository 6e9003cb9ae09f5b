package arch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// The LFM2 family (Liquid AI): a pre-norm decoder whose layers are either
// short-convolution blocks or grouped-query attention blocks. Per layer:
//
//	h = operator_norm(x)
//	conv layer:      B | C | v = in_proj(h);  y = conv(B * v);  o = out_proj(C * y)
//	attention layer: q, k = q_layernorm(q_proj h), k_layernorm(k_proj h) (per head),
//	                 NeoX RoPE, attention, o = out_proj(.)
//	x = x + o;  x = x + w2(silu(w1 ffn_norm(x)) * w3 ffn_norm(x))
//
// then embedding_norm (the FINAL norm, despite its name) and the tied
// classifier. conv is a depthwise causal convolution over time with
// conv_L_cache taps per channel and no bias: its state is the last
// conv_L_cache-1 rows of B * v. Traps: the layer kinds come from
// layer_types (or full_attn_idxs); the feed-forward width is not
// block_ff_dim but, with block_auto_adjust_ff_dim, int(2*ff/3) times
// block_ffn_dim_multiplier, rounded up to a multiple of block_multiple_of;
// eps is norm_eps. GGUF (llama.cpp's lfm2) marks conv layers by 0 in the
// per-layer attention.head_count_kv and stores the adjusted width.

// ShortConvConfig describes LFM2's short-convolution layers.
type ShortConvConfig struct {
	// Layers lists the layers whose operator is a short convolution,
	// ascending; the others attend.
	Layers []int `json:"layers"`
	// Kernel is the number of taps of each channel's kernel (conv_L_cache).
	Kernel int `json:"kernel"`
}

// lfm2MaxKernel bounds conv_L_cache: real models use 3.
const lfm2MaxKernel = 64

func init() {
	register(&Family{
		Name:              "lfm2",
		HFArchitectures:   []string{"Lfm2ForCausalLM"},
		HFModelTypes:      []string{"lfm2"},
		GGUFArchitectures: []string{"lfm2"},
		configHF:          lfm2ConfigHF,
		configGGUF:        lfm2ConfigGGUF,
		tensorNames:       lfm2TensorName,
		build:             buildLFM2,
		validate:          validateLFM2,
		storedShape:       lfm2StoredShape,
	})
}

// lfm2StoredShape is the HF checkpoint's shape of the conv weight, [C, 1,
// L] (PyTorch's Conv1d), which the graph reads as [C, L].
func lfm2StoredShape(c *Config, canonical string, shape []int) []int {
	if c.Source == "hf" && strings.HasSuffix(canonical, ".conv.conv.weight") && len(shape) == 2 {
		return []int{shape[0], 1, shape[1]}
	}
	return shape
}

func lfm2ConfigHF(m map[string]any) (Config, error) {
	if b, ok := m["conv_bias"].(bool); ok && b {
		return Config{}, fmt.Errorf("config.json: \"conv_bias\" is true, which the lfm2 family does not support")
	}
	// block_ff_dim, when present, is the width HF's config takes
	ff, ok := format.MetaInt(m, "block_ff_dim")
	if !ok {
		if ff, ok = format.MetaInt(m, "intermediate_size"); !ok {
			return Config{}, fmt.Errorf("config.json: \"block_ff_dim\" or \"intermediate_size\" is missing or not an integer")
		}
	}
	mm := make(map[string]any, len(m)+1)
	for k, v := range m {
		mm[k] = v
	}
	mm["intermediate_size"] = ff
	c, err := decoderConfigHF(mm, "lfm2", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	c.QKNorm = true
	if v, present := m["norm_eps"]; present && v != nil {
		if _, ok := format.MetaFloat(m, "norm_eps"); !ok {
			return c, fmt.Errorf("config.json: \"norm_eps\" is %s, not a number", show(v))
		}
	}
	c.NormEps = floatOr(m, "norm_eps", 1e-5)
	if c.RopeTheta, err = lfm2RopeTheta(m); err != nil {
		return c, err
	}
	// tie_embedding, the original key, wins over tie_word_embeddings
	c.Tied = true
	for _, k := range []string{"tie_word_embeddings", "tie_embedding"} {
		if b, ok := m[k].(bool); ok {
			c.Tied = b
		}
	}
	if c.FFN, err = lfm2FFN(m, int(ff)); err != nil {
		return c, err
	}
	kernel := 3
	if _, present := m["conv_L_cache"]; present {
		v, ok := format.MetaInt(m, "conv_L_cache")
		if !ok {
			return c, fmt.Errorf("config.json: \"conv_L_cache\" is not an integer")
		}
		kernel = int(v)
	}
	conv, err := lfm2ConvLayers(m, c.Layers)
	if err != nil {
		return c, err
	}
	c.ShortConv = &ShortConvConfig{Layers: conv, Kernel: kernel}
	return c, nil
}

// lfm2RopeTheta reads the rotary base: theta (the original key), else
// rope_theta, else rope_parameters' rope_theta (whose rope_type must be
// the default), else 1e6.
func lfm2RopeTheta(m map[string]any) (float64, error) {
	for _, k := range []string{"theta", "rope_theta"} {
		if v, present := m[k]; present && v != nil {
			t, ok := format.MetaFloat(m, k)
			if !ok {
				return 0, fmt.Errorf("config.json: %q is %s, not a number", k, show(v))
			}
			return t, nil
		}
	}
	rp, present := m["rope_parameters"]
	if !present || rp == nil {
		return 1e6, nil
	}
	p, ok := rp.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("config.json: \"rope_parameters\" is %s, not an object", show(rp))
	}
	if t, present := p["rope_type"]; present && t != nil && t != "default" {
		return 0, fmt.Errorf("config.json: rope_parameters.rope_type is %s; the lfm2 family computes the default rope", show(t))
	}
	if v, present := p["rope_theta"]; present && v != nil {
		t, ok := format.MetaFloat(p, "rope_theta")
		if !ok {
			return 0, fmt.Errorf("config.json: rope_parameters.rope_theta is %s, not a number", show(v))
		}
		return t, nil
	}
	return 1e6, nil
}

// lfm2FFN applies HF's block_auto_adjust_ff_dim rule to the width ff:
// int(2*ff/3), then, when block_ffn_dim_multiplier is not null (absent
// means 1.0), int(multiplier*ff) rounded up to a multiple of
// block_multiple_of; with a null multiplier HF rounds nothing.
func lfm2FFN(m map[string]any, ff int) (int, error) {
	if b, ok := m["block_auto_adjust_ff_dim"].(bool); ok && !b {
		return ff, nil
	}
	if v, present := m["block_auto_adjust_ff_dim"]; present && v != nil {
		if _, ok := v.(bool); !ok {
			return 0, fmt.Errorf("config.json: \"block_auto_adjust_ff_dim\" is %s, not a boolean", show(v))
		}
	}
	ff = int(2 * float64(ff) / 3)
	scale := 1.0
	if v, present := m["block_ffn_dim_multiplier"]; present {
		if v == nil {
			return ff, nil
		}
		var ok bool
		if scale, ok = format.MetaFloat(m, "block_ffn_dim_multiplier"); !ok || !(scale > 0 && scale < 1e3) {
			return 0, fmt.Errorf("config.json: \"block_ffn_dim_multiplier\" is %s, not a positive number", show(v))
		}
	}
	ff = int(scale * float64(ff))
	mult := int64(256)
	if v, present := m["block_multiple_of"]; present {
		var ok bool
		if mult, ok = format.MetaInt(m, "block_multiple_of"); !ok || mult < 1 || mult > 1<<20 {
			return 0, fmt.Errorf("config.json: \"block_multiple_of\" is %s, not a positive integer", show(v))
		}
	}
	return int(mult) * ((ff + int(mult) - 1) / int(mult)), nil
}

// lfm2ConvLayers reads the layer kinds: layer_types ("conv" or
// "full_attention" per layer), else full_attn_idxs (the attention layers),
// else every layer attends (as HF's config does).
func lfm2ConvLayers(m map[string]any, layers int) ([]int, error) {
	if v, present := m["layer_types"]; present && v != nil {
		types, ok := format.List(v)
		if !ok || len(types) != layers {
			return nil, fmt.Errorf("config.json: \"layer_types\" is %s, want %d layer kinds", show(v), layers)
		}
		var conv []int
		for l, t := range types {
			switch t {
			case "conv":
				conv = append(conv, l)
			case "full_attention":
			default:
				return nil, fmt.Errorf("config.json: layer_types[%d] is %s, want \"conv\" or \"full_attention\"", l, show(t))
			}
		}
		return conv, nil
	}
	v, present := m["full_attn_idxs"]
	if !present || v == nil {
		return nil, nil // HF's default: every layer attends
	}
	idx, ok := format.List(v)
	if !ok {
		return nil, fmt.Errorf("config.json: \"full_attn_idxs\" is %s, not a list of layers", show(v))
	}
	attn := make([]bool, layers)
	for i, e := range idx {
		l, ok := format.MetaInt(map[string]any{"v": e}, "v")
		if !ok || l < 0 || l >= int64(layers) {
			return nil, fmt.Errorf("config.json: full_attn_idxs[%d] is %s, not a layer in [0, %d)", i, show(e), layers)
		}
		attn[l] = true
	}
	var conv []int
	for l, a := range attn {
		if !a {
			conv = append(conv, l)
		}
	}
	return conv, nil
}

func lfm2ConfigGGUF(m map[string]any, arch string) (Config, error) {
	kv, isList := format.List(m[arch+".attention.head_count_kv"])
	c, err := decoderConfigGGUF(m, arch, "lfm2", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	c.QKNorm = true
	v, ok := format.MetaInt(m, arch+".shortconv.l_cache")
	if !ok {
		return c, fmt.Errorf("gguf: metadata %s.shortconv.l_cache missing or not an integer", arch)
	}
	sc := &ShortConvConfig{Kernel: int(v)}
	if !isList {
		// one count for every layer: no conv layers unless it is 0
		if c.KVHeads == 0 {
			for l := range c.Layers {
				sc.Layers = append(sc.Layers, l)
			}
			c.KVHeads = c.Heads
		}
		c.ShortConv = sc
		return c, nil
	}
	if sc.Layers, err = ggufLayersWithoutKV(&c, arch, kv); err != nil {
		return c, err
	}
	c.ShortConv = sc
	return c, nil
}

func validateLFM2(c *Config) error {
	if err := c.validateDecoder(); err != nil {
		return err
	}
	sc := c.ShortConv
	if sc == nil {
		return fmt.Errorf("lfm2 config: the short-convolution layers are missing")
	}
	if sc.Kernel < 2 || sc.Kernel > lfm2MaxKernel {
		return fmt.Errorf("lfm2 config: short-convolution kernel %d is outside [2, %d]", sc.Kernel, lfm2MaxKernel)
	}
	if err := checkAscendingLayers(c, "lfm2 config: short-convolution layers", sc.Layers); err != nil {
		return err
	}
	if c.FusedQKV || c.FusedGateUp || c.QKVBias || c.GELU || c.SandwichNorms || len(c.SlidingLayers) > 0 {
		return fmt.Errorf("lfm2 config: a decoder variation the lfm2 family does not build is set")
	}
	return nil
}

// lfm2GGUFNames maps LFM2's canonical (HF) names to llama.cpp's.
var lfm2GGUFNames = map[string]string{
	"model.embed_tokens.weight":    "token_embd.weight",
	"model.embedding_norm.weight":  "token_embd_norm.weight",
	"lm_head.weight":               "output.weight",
	"operator_norm.weight":         "attn_norm.weight",
	"ffn_norm.weight":              "ffn_norm.weight",
	"feed_forward.w1.weight":       "ffn_gate.weight",
	"feed_forward.w3.weight":       "ffn_up.weight",
	"feed_forward.w2.weight":       "ffn_down.weight",
	"self_attn.q_proj.weight":      "attn_q.weight",
	"self_attn.k_proj.weight":      "attn_k.weight",
	"self_attn.v_proj.weight":      "attn_v.weight",
	"self_attn.q_layernorm.weight": "attn_q_norm.weight",
	"self_attn.k_layernorm.weight": "attn_k_norm.weight",
	"self_attn.out_proj.weight":    "attn_output.weight",
	"conv.in_proj.weight":          "shortconv.in_proj.weight",
	"conv.conv.weight":             "shortconv.conv.weight",
	"conv.out_proj.weight":         "shortconv.out_proj.weight",
	"layer-prefix":                 "blk.",
}

func lfm2TensorName(source, name string) (string, bool) {
	return sourceTensorName(source, name, lfm2GGUFNames)
}

func buildLFM2(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	x := g.Embed(g.Tokens(), "model.embed_tokens.weight", c.Vocab, c.Hidden)
	eps, off := float32(c.NormEps), float32(c.NormOffset)
	scale := attnScaleOf(c)
	D := c.Hidden
	cache := 0 // attention layers get consecutive cache slots
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := g.RMSNorm(x, p+"operator_norm.weight", eps, off)
		var o int
		if slices.Contains(c.ShortConv.Layers, l) {
			bcx := g.Linear(h, p+"conv.in_proj.weight", 3*D, "")
			b, cg, v := g.Columns(bcx, 0, D), g.Columns(bcx, D, 2*D), g.Columns(bcx, 2*D, 3*D)
			y := g.CausalConv(g.Mul(b, v), p+"conv.conv.weight", c.ShortConv.Kernel, p+"conv")
			o = g.Linear(g.Mul(cg, y), p+"conv.out_proj.weight", D, "")
		} else {
			q := g.Linear(h, p+"self_attn.q_proj.weight", c.Heads*c.HeadDim, "")
			k := g.Linear(h, p+"self_attn.k_proj.weight", c.KVHeads*c.HeadDim, "")
			v := g.Linear(h, p+"self_attn.v_proj.weight", c.KVHeads*c.HeadDim, "")
			q = g.HeadRMSNorm(q, p+"self_attn.q_layernorm.weight", c.HeadDim, eps, off)
			k = g.HeadRMSNorm(k, p+"self_attn.k_layernorm.weight", c.HeadDim, eps, off)
			q, k = g.RoPE(q, rope), g.RoPE(k, rope)
			if c.RotateQK {
				b := op.HadamardBlock(c.HeadDim)
				q, k = g.Hadamard(q, b), g.Hadamard(k, b)
			}
			at := graph.Attn{Layer: cache, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: float32(scale)}
			cache++
			o = g.Linear(g.Attention(q, k, v, at), p+"self_attn.out_proj.weight", D, "")
		}
		x = g.Add(x, o)
		h = g.RMSNorm(x, p+"ffn_norm.weight", eps, off)
		gate := g.Linear(h, p+"feed_forward.w1.weight", c.FFN, "")
		up := g.Linear(h, p+"feed_forward.w3.weight", c.FFN, "")
		mid := g.Mul(g.SiLU(gate), up)
		if c.RotateDown {
			mid = g.Hadamard(mid, op.HadamardBlock(c.FFN))
		}
		x = g.Add(x, g.Linear(mid, p+"feed_forward.w2.weight", D, ""))
	}
	x = g.RMSNorm(x, "model.embedding_norm.weight", eps, off)
	g.SetOutput(lmHead(g, c, opts, x))
	return g, nil
}
