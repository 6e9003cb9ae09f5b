package arch

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// The Gemma 4 family (text models of the E2B/E4B layout). Per layer l:
//
//	h = input_layernorm(x)
//	q = RoPE(q_norm(q_proj h)); k = RoPE(k_norm(k_proj h)); v = rms(v_proj h)  (v: no gain)
//	x = x + post_attention_layernorm(o_proj(attention(q, k, v)))      (q·k unscaled)
//	x = x + post_feedforward_layernorm(down(gelu_tanh(gate h') * up h')),  h' = pre_feedforward_layernorm(x)
//	x = x + post_per_layer_input_norm(per_layer_projection(gelu_tanh(per_layer_input_gate x) * pli[l]))
//	x = x * layer_scalar[l]
//
// with the per-layer inputs, P = hidden_size_per_layer_input wide each:
//
//	e   = embed_tokens[t] * sqrt(D)
//	pli = (RMSNorm_P(per_layer_model_projection(e) * D^-0.5) + embed_tokens_per_layer[t] * sqrt(P)) * 2^-0.5
//
// then the final norm, the tied classifier and 30*tanh(logits/30)
// (final_logit_softcapping). Every gain is plain (no 1+w). Sliding layers
// (layer_types) attend within sliding_window with head_dim and the
// sliding rope_theta; full layers use global_head_dim and "proportional"
// RoPE: of the global_head_dim/2 NeoX pairs (i, i+E/2) only the first
// partial_rotary_factor*E/2 rotate, at theta^(-2i/E). The last
// num_kv_shared_layers layers compute no keys or values: each attends
// over the cache of the last earlier layer of its type that does (their
// k/v tensors in the checkpoint go unused), and with use_double_wide_mlp
// their feed-forward is twice as wide.
//
// llama.cpp's gemma4 GGUF: key_length / key_length_swa are the full and
// sliding head sizes, sliding_window_pattern marks sliding layers,
// feed_forward_length is per layer, attention.shared_kv_layers, and the
// proportional RoPE is rope.dimension_count = E with a rope_freqs tensor
// of divisors (1e30 for the pairs that do not rotate).

// Gemma4Config holds what Gemma 4 adds to the shared decoder fields, whose
// HeadDim, RopeTheta and LocalRopeTheta are the sliding layers' head size,
// the full layers' base and the sliding layers' base.
type Gemma4Config struct {
	// GlobalHeadDim is the head size of the full-attention layers.
	GlobalHeadDim int `json:"global_head_dim"`
	// GlobalRotaryPairs is how many of the full layers' GlobalHeadDim/2
	// pairs rotate (HF's partial_rotary_factor); 0 with GGUF, whose
	// RopeFreqFactors say it.
	GlobalRotaryPairs int `json:"global_rotary_pairs,omitempty"`
	// PerLayerDim is the width of each layer's input from the per-layer
	// embeddings (hidden_size_per_layer_input).
	PerLayerDim int `json:"per_layer_dim"`
	// PerLayerVocab is the row count of embed_tokens_per_layer; 0 means
	// Vocab.
	PerLayerVocab int `json:"per_layer_vocab,omitempty"`
	// SharedKVLayers is how many of the last layers reuse another layer's
	// keys and values (num_kv_shared_layers).
	SharedKVLayers int `json:"shared_kv_layers,omitempty"`
	// LayerFFN holds each layer's feed-forward width.
	LayerFFN []int `json:"layer_ffn"`
	// FinalSoftcap caps the logits at c*tanh(logits/c); 0 means none.
	FinalSoftcap float64 `json:"final_softcap,omitempty"`
}

func init() {
	register(&Family{
		Name:              "gemma4",
		HFArchitectures:   []string{"Gemma4ForCausalLM"},
		HFModelTypes:      []string{"gemma4_text"},
		GGUFArchitectures: []string{"gemma4"},
		configHF:          gemma4ConfigHF,
		configGGUF:        gemma4ConfigGGUF,
		tensorNames:       gemma4TensorName,
		build:             buildGemma4,
		validate:          validateGemma4,
	})
}

// gemma4MaxLayers bounds the per-layer lists read from a config.
const gemma4MaxLayers = 1 << 12

func gemma4ConfigHF(m map[string]any) (Config, error) {
	for _, k := range []string{"attention_k_eq_v", "enable_moe_block", "attention_bias"} {
		if b, ok := m[k].(bool); ok && b {
			return Config{}, fmt.Errorf("config.json: %q is true, which the gemma4 family does not support", k)
		}
	}
	if v, ok := m["attn_logit_softcapping"]; ok && v != nil {
		return Config{}, fmt.Errorf("config.json: attn_logit_softcapping %s is not supported", show(v))
	}
	if a, ok := m["hidden_activation"]; ok && a != nil {
		if s, _ := a.(string); s != "gelu_pytorch_tanh" && s != "gelu_new" && s != "gelu_fast" {
			return Config{}, fmt.Errorf("config.json: hidden_activation %s is not supported (only tanh-approximated GELU)", show(a))
		}
	}
	// intermediate_size may be one width or one per layer
	mm := maps.Clone(m)
	ffList, isList := format.List(m["intermediate_size"])
	if isList {
		if len(ffList) == 0 {
			return Config{}, fmt.Errorf("config.json: \"intermediate_size\" is an empty list")
		}
		mm["intermediate_size"] = ffList[0]
	}
	c, err := decoderConfigHF(mm, "gemma4", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	if t := c.RopeScaling.Type; t != "" && t != "default" {
		return c, fmt.Errorf("config.json: rope_scaling of type %q is not supported by the gemma4 family", t)
	}
	c.RopeScaling = RopeScaling{}
	dtype, _ := format.MetaString(m, "torch_dtype")
	gemmaCommon(&c, 0, dtype)
	if _, ok := m["tie_word_embeddings"].(bool); !ok {
		c.Tied = true
	}
	c.QKNorm, c.SandwichNorms, c.AttnScale = true, true, 1
	if v, ok := m["num_global_key_value_heads"]; ok && v != nil {
		n, ok := format.MetaInt(m, "num_global_key_value_heads")
		if !ok || int(n) != c.KVHeads {
			return c, fmt.Errorf("config.json: num_global_key_value_heads %s differs from num_key_value_heads %d, which the gemma4 family does not support", show(v), c.KVHeads)
		}
	}
	g := &Gemma4Config{GlobalHeadDim: c.HeadDim}
	c.Gemma4 = g
	geti := func(key string, def int) (int, error) {
		v, present := m[key]
		if !present || v == nil {
			return def, nil
		}
		n, ok := format.MetaInt(m, key)
		if !ok || n < 0 || n > 1<<24 {
			return 0, fmt.Errorf("config.json: %q is %s, not a size", key, show(v))
		}
		return int(n), nil
	}
	if g.GlobalHeadDim, err = geti("global_head_dim", c.HeadDim); err != nil {
		return c, err
	}
	if g.PerLayerDim, err = geti("hidden_size_per_layer_input", -1); err != nil {
		return c, err
	}
	if g.PerLayerVocab, err = geti("vocab_size_per_layer_input", c.Vocab); err != nil {
		return c, err
	}
	if g.SharedKVLayers, err = geti("num_kv_shared_layers", 0); err != nil {
		return c, err
	}
	if v, ok := m["final_logit_softcapping"]; ok && v != nil {
		g.FinalSoftcap, _ = format.MetaFloat(m, "final_logit_softcapping")
	}
	if c.Layers < 0 || c.Layers > gemma4MaxLayers {
		return c, fmt.Errorf("config.json: num_hidden_layers %d is outside [0, %d]", c.Layers, gemma4MaxLayers)
	}
	c.SlidingWindow = 512
	if v, ok := format.MetaInt(m, "sliding_window"); ok {
		c.SlidingWindow = int(v)
	}
	if c.SlidingLayers, err = gemma3LayerTypes(m, c.Layers); err != nil {
		return c, err
	}
	g.LayerFFN = make([]int, c.Layers)
	for l := range g.LayerFFN {
		g.LayerFFN[l] = c.FFN
	}
	if isList {
		if len(ffList) != c.Layers {
			return c, fmt.Errorf("config.json: \"intermediate_size\" has %d entries for %d layers", len(ffList), c.Layers)
		}
		for l, e := range ffList {
			n, ok := format.MetaInt(map[string]any{"v": e}, "v")
			if !ok {
				return c, fmt.Errorf("config.json: intermediate_size[%d] is %s, not an integer", l, show(e))
			}
			g.LayerFFN[l] = int(n)
		}
	}
	if b, ok := m["use_double_wide_mlp"].(bool); ok && b {
		for l := max(c.Layers-g.SharedKVLayers, 0); l < c.Layers; l++ {
			g.LayerFFN[l] *= 2
		}
	}
	if err := gemma4RopeHF(m, &c); err != nil {
		return c, err
	}
	return c, nil
}

// gemma4RopeHF reads rope_parameters: per layer type, a rope_theta and a
// rope_type of "default" or (full layers) "proportional" with a
// partial_rotary_factor. Without it, Gemma 3's keys: rope_theta (full
// layers, 1e6) and rope_local_base_freq (sliding layers, 1e4), every pair
// turning.
func gemma4RopeHF(m map[string]any, c *Config) error {
	g := c.Gemma4
	c.RopeTheta, c.LocalRopeTheta = floatOr(m, "rope_theta", 1e6), floatOr(m, "rope_local_base_freq", 10000)
	g.GlobalRotaryPairs = g.GlobalHeadDim / 2
	rp, present := m["rope_parameters"]
	if !present || rp == nil {
		return nil
	}
	p, ok := rp.(map[string]any)
	if !ok {
		return fmt.Errorf("config.json: \"rope_parameters\" is %s, not an object", show(rp))
	}
	for _, kind := range []string{"sliding_attention", "full_attention"} {
		v, present := p[kind]
		if !present || v == nil {
			continue
		}
		e, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("config.json: rope_parameters.%s is %s, not an object", kind, show(v))
		}
		theta := &c.RopeTheta
		if kind == "sliding_attention" {
			theta = &c.LocalRopeTheta
		}
		if t, present := e["rope_theta"]; present && t != nil {
			f, ok := format.MetaFloat(e, "rope_theta")
			if !ok || !(f > 0) || math.IsInf(f, 0) {
				return fmt.Errorf("config.json: rope_parameters.%s.rope_theta is %s, not a positive number", kind, show(t))
			}
			*theta = f
		}
		typ, _ := e["rope_type"].(string)
		switch {
		case typ == "" || typ == "default":
		case typ == "proportional" && kind == "full_attention":
			f := 1.0
			if v, present := e["partial_rotary_factor"]; present && v != nil {
				var ok bool
				if f, ok = format.MetaFloat(e, "partial_rotary_factor"); !ok || !(f > 0 && f <= 1) {
					return fmt.Errorf("config.json: rope_parameters.%s.partial_rotary_factor is %s, not in (0, 1]", kind, show(v))
				}
			}
			g.GlobalRotaryPairs = int(f * float64(g.GlobalHeadDim) / 2)
		default:
			return fmt.Errorf("config.json: rope_parameters.%s.rope_type is %s, which the gemma4 family does not compute", kind, show(e["rope_type"]))
		}
	}
	return nil
}

func gemma4ConfigGGUF(m map[string]any, arch string) (Config, error) {
	ffList, isList := format.List(m[arch+".feed_forward_length"])
	mm := maps.Clone(m)
	if isList {
		if len(ffList) == 0 {
			return Config{}, fmt.Errorf("gguf: metadata %s.feed_forward_length is an empty list", arch)
		}
		mm[arch+".feed_forward_length"] = ffList[0]
	}
	// one key/value head count, or one per layer that must agree
	if kv, ok := format.List(m[arch+".attention.head_count_kv"]); ok {
		var first int64
		for l, e := range kv {
			n, ok := format.MetaInt(map[string]any{"v": e}, "v")
			if l == 0 {
				first = n
			}
			if !ok || n != first {
				return Config{}, fmt.Errorf("gguf: metadata %s.attention.head_count_kv[%d] is %s; the gemma4 family needs one key/value head count for every layer", arch, l, show(e))
			}
			mm[arch+".attention.head_count_kv"] = n
		}
	}
	c, err := decoderConfigGGUF(mm, arch, "gemma4", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	gemmaCommon(&c, 0, "")
	c.QKNorm, c.SandwichNorms, c.AttnScale = true, true, 1
	if c.Layers < 0 || c.Layers > gemma4MaxLayers {
		return c, fmt.Errorf("gguf: metadata %s.block_count %d is outside [0, %d]", arch, c.Layers, gemma4MaxLayers)
	}
	g := &Gemma4Config{GlobalHeadDim: c.HeadDim}
	c.Gemma4 = g
	need := func(key string) (int, error) {
		v, ok := format.MetaInt(m, arch+"."+key)
		if !ok || v < 0 || v > 1<<24 {
			return 0, fmt.Errorf("gguf: metadata %s.%s missing or not a size", arch, key)
		}
		return int(v), nil
	}
	if c.HeadDim, err = need("attention.key_length_swa"); err != nil {
		return c, err
	}
	if g.PerLayerDim, err = need("embedding_length_per_layer_input"); err != nil {
		return c, err
	}
	if v, ok := format.MetaInt(m, arch+".attention.shared_kv_layers"); ok {
		g.SharedKVLayers = int(v)
	}
	if c.SlidingWindow, err = need("attention.sliding_window"); err != nil {
		return c, err
	}
	g.FinalSoftcap = floatOr(m, arch+".final_logit_softcapping", 0)
	c.LocalRopeTheta = floatOr(m, arch+".rope.freq_base_swa", 10000)
	if r, ok := format.MetaInt(m, arch+".rope.dimension_count"); ok && int(r) != g.GlobalHeadDim {
		return c, fmt.Errorf("gguf: metadata %s.rope.dimension_count %d differs from the full layers' head size %d", arch, r, g.GlobalHeadDim)
	}
	if r, ok := format.MetaInt(m, arch+".rope.dimension_count_swa"); ok && int(r) != c.HeadDim {
		return c, fmt.Errorf("gguf: metadata %s.rope.dimension_count_swa %d differs from the sliding layers' head size %d", arch, r, c.HeadDim)
	}
	c.RotaryDim = 0
	pat, ok := format.List(m[arch+".attention.sliding_window_pattern"])
	if !ok || len(pat) != c.Layers {
		return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window_pattern is not a list of %d layer flags", arch, c.Layers)
	}
	for l, e := range pat {
		b, ok := e.(bool)
		if !ok {
			return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window_pattern[%d] is %s, not a boolean", arch, l, show(e))
		}
		if b {
			c.SlidingLayers = append(c.SlidingLayers, l)
		}
	}
	g.LayerFFN = make([]int, c.Layers)
	for l := range g.LayerFFN {
		g.LayerFFN[l] = c.FFN
		if isList {
			if len(ffList) != c.Layers {
				return c, fmt.Errorf("gguf: metadata %s.feed_forward_length has %d entries for %d layers", arch, len(ffList), c.Layers)
			}
			n, ok := format.MetaInt(map[string]any{"v": ffList[l]}, "v")
			if !ok {
				return c, fmt.Errorf("gguf: metadata %s.feed_forward_length[%d] is %s, not an integer", arch, l, show(ffList[l]))
			}
			g.LayerFFN[l] = int(n)
		}
	}
	return c, nil
}

func validateGemma4(c *Config) error {
	g := c.Gemma4
	if g == nil {
		return fmt.Errorf("gemma4 config: the gemma4 sizes are missing")
	}
	// the rope frequency factors (GGUF) belong to the full layers' heads
	d := *c
	d.RopeFreqFactors = nil
	if err := d.validateDecoder(); err != nil {
		return err
	}
	if c.FusedQKV || c.FusedGateUp || c.QKVBias || len(c.NoRopeLayers) > 0 ||
		c.ShortConv != nil || c.RWKV != nil || c.RopeScaling.Type != "" || len(c.RopeSections) > 0 || c.RotaryDim != 0 {
		return fmt.Errorf("gemma4 config: a decoder variation the gemma4 family does not build is set")
	}
	for _, s := range []struct {
		name string
		v    int
	}{{"full-attention head size", g.GlobalHeadDim}, {"per-layer input size", g.PerLayerDim}} {
		if s.v <= 0 || s.v > 1<<16 {
			return fmt.Errorf("gemma4 config: %s %d is outside [1, %d]", s.name, s.v, 1<<16)
		}
	}
	if g.GlobalHeadDim%2 != 0 {
		return fmt.Errorf("gemma4 config: full-attention head size %d is odd", g.GlobalHeadDim)
	}
	if g.PerLayerVocab < 0 || g.PerLayerVocab > 1<<24 {
		return fmt.Errorf("gemma4 config: per-layer vocabulary %d out of range", g.PerLayerVocab)
	}
	if int64(c.Layers)*int64(g.PerLayerDim) > 1<<24 {
		return fmt.Errorf("gemma4 config: %d layers of per-layer inputs of %d is implausibly large", c.Layers, g.PerLayerDim)
	}
	if g.GlobalRotaryPairs < 0 || g.GlobalRotaryPairs > g.GlobalHeadDim/2 {
		return fmt.Errorf("gemma4 config: %d rotating pairs in a head of %d", g.GlobalRotaryPairs, g.GlobalHeadDim)
	}
	if n := len(c.RopeFreqFactors); n != 0 && n != g.GlobalHeadDim/2 {
		return fmt.Errorf("gemma4 config: %d rope frequency factors for full-attention heads of %d", n, g.GlobalHeadDim)
	}
	for i, f := range c.RopeFreqFactors {
		if !(f > 0) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("gemma4 config: rope frequency factor %d is %v, not positive", i, f)
		}
	}
	if s := g.FinalSoftcap; s < 0 || math.IsNaN(s) || math.IsInf(s, 0) || (s != 0 && (s < 1e-3 || s > 1e6)) {
		return fmt.Errorf("gemma4 config: final logit softcapping %v out of range", s)
	}
	if len(g.LayerFFN) != c.Layers {
		return fmt.Errorf("gemma4 config: %d feed-forward widths for %d layers", len(g.LayerFFN), c.Layers)
	}
	for l, f := range g.LayerFFN {
		if f <= 0 || f > 1<<24 {
			return fmt.Errorf("gemma4 config: layer %d's feed-forward width %d out of range", l, f)
		}
	}
	if g.SharedKVLayers < 0 || g.SharedKVLayers >= c.Layers {
		return fmt.Errorf("gemma4 config: %d shared key/value layers of %d (at least the first layer computes its own)", g.SharedKVLayers, c.Layers)
	}
	for l := c.Layers - g.SharedKVLayers; l < c.Layers; l++ {
		if gemma4KVSource(c, l) < 0 {
			return fmt.Errorf("gemma4 config: shared layer %d has no earlier %s layer to take keys and values from", l, gemma4Kind(c, l))
		}
	}
	return nil
}

// gemma4Kind names layer l's attention type.
func gemma4Kind(c *Config, l int) string {
	if slices.Contains(c.SlidingLayers, l) {
		return "sliding_attention"
	}
	return "full_attention"
}

// gemma4KVSource returns the layer whose cache layer l attends over: l
// itself, or for a shared layer the last layer before the shared ones of
// the same type; -1 when there is none.
func gemma4KVSource(c *Config, l int) int {
	first := c.Layers - c.Gemma4.SharedKVLayers
	if l < first {
		return l
	}
	sliding := slices.Contains(c.SlidingLayers, l)
	for j := first - 1; j >= 0; j-- {
		if slices.Contains(c.SlidingLayers, j) == sliding {
			return j
		}
	}
	return -1
}

// gemma4GlobalRope is the full layers' proportional RoPE: NeoX pairs (i,
// i+E/2) over the whole head, pair i turning at theta^(-2i/E) when it
// rotates (i below GlobalRotaryPairs, or divided by the GGUF factor) and
// not at all otherwise.
func gemma4GlobalRope(c *Config) graph.Rope {
	g := c.Gemma4
	E := g.GlobalHeadDim
	f := make([]float64, E/2)
	for i := range f {
		inv := 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(E))
		switch {
		case len(c.RopeFreqFactors) > 0:
			f[i] = inv / float64(c.RopeFreqFactors[i])
		case i < g.GlobalRotaryPairs:
			f[i] = inv
		}
	}
	return graph.Rope{Style: graph.RopeHalf, HeadDim: E, RotDim: E, InvFreq: f}
}

// gemma4LocalRope is the sliding layers' RoPE: every pair of HeadDim at
// LocalRopeTheta.
func gemma4LocalRope(c *Config) graph.Rope {
	E := c.HeadDim
	f := make([]float64, E/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.LocalRopeTheta, float64(2*i)/float64(E))
	}
	return graph.Rope{Style: graph.RopeHalf, HeadDim: E, RotDim: E, InvFreq: f}
}

// gemma4GGUFNames maps Gemma 4's canonical (HF) names to llama.cpp's.
var gemma4GGUFNames = func() map[string]string {
	t := maps.Clone(gemma3GGUFNames)
	t["model.embed_tokens_per_layer.weight"] = "per_layer_token_embd.weight"
	t["model.per_layer_model_projection.weight"] = "per_layer_model_proj.weight"
	t["model.per_layer_projection_norm.weight"] = "per_layer_proj_norm.weight"
	t["per_layer_input_gate.weight"] = "inp_gate.weight"
	t["per_layer_projection.weight"] = "proj.weight"
	t["post_per_layer_input_norm.weight"] = "post_norm.weight"
	t["layer_scalar"] = "layer_output_scale.weight"
	return t
}()

func gemma4TensorName(source, name string) (string, bool) {
	return sourceTensorName(source, name, gemma4GGUFNames)
}

func buildGemma4(c *Config, opts BuildOptions) (*graph.Graph, error) {
	g4 := c.Gemma4
	D, P, L := c.Hidden, g4.PerLayerDim, c.Layers
	eps := float32(c.NormEps)
	g := graph.New()
	tok := g.Tokens()
	x := g.Embed(tok, "model.embed_tokens.weight", c.Vocab, D)
	x = g.Scale(x, float32(orOne(c.EmbedScale)))
	// per-layer inputs: [L, P] a row
	pv := g4.PerLayerVocab
	if pv == 0 {
		pv = c.Vocab
	}
	pe := g.Scale(g.Embed(tok, "model.embed_tokens_per_layer.weight", pv, L*P), float32(math.Sqrt(float64(P))))
	pp := g.Scale(g.Linear(x, "model.per_layer_model_projection.weight", L*P, ""), float32(1/math.Sqrt(float64(D))))
	pp = g.HeadRMSNorm(pp, "model.per_layer_projection_norm.weight", P, eps, 0)
	pli := g.Scale(g.Add(pp, pe), float32(1/math.Sqrt2))

	local, global := gemma4LocalRope(c), gemma4GlobalRope(c)
	// cache slots: the layers before the shared ones write slot l
	for l := 0; l < L; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		sliding := slices.Contains(c.SlidingLayers, l)
		E, rope := g4.GlobalHeadDim, global
		if sliding {
			E, rope = c.HeadDim, local
		}
		at := graph.Attn{Layer: l, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: E, Scale: 1}
		if sliding {
			at.Window = c.SlidingWindow
		}
		h := g.RMSNorm(x, p+"input_layernorm.weight", eps, 0)
		q := g.Linear(h, p+"self_attn.q_proj.weight", c.Heads*E, "")
		q = g.RoPE(g.HeadRMSNorm(q, p+"self_attn.q_norm.weight", E, eps, 0), rope)
		if c.RotateQK {
			// a shared layer's keys were rotated by their source layer,
			// whose heads are as wide
			q = g.Hadamard(q, op.HadamardBlock(E))
		}
		var o int
		if src := gemma4KVSource(c, l); src != l {
			at.Layer = src
			o = g.SharedAttention(q, at)
		} else {
			k := g.Linear(h, p+"self_attn.k_proj.weight", c.KVHeads*E, "")
			v := g.Linear(h, p+"self_attn.v_proj.weight", c.KVHeads*E, "")
			k = g.RoPE(g.HeadRMSNorm(k, p+"self_attn.k_norm.weight", E, eps, 0), rope)
			if c.RotateQK {
				k = g.Hadamard(k, op.HadamardBlock(E))
			}
			v = g.UnitHeadRMSNorm(v, E, eps, p+"self_attn.v_norm")
			o = g.Attention(q, k, v, at)
		}
		o = g.Linear(o, p+"self_attn.o_proj.weight", D, "")
		x = g.Add(x, g.RMSNorm(o, p+"post_attention_layernorm.weight", eps, 0))
		h = g.RMSNorm(x, p+"pre_feedforward_layernorm.weight", eps, 0)
		F := g4.LayerFFN[l]
		gate := g.Linear(h, p+"mlp.gate_proj.weight", F, "")
		up := g.Linear(h, p+"mlp.up_proj.weight", F, "")
		mid := g.Mul(g.GELUTanh(gate), up)
		if c.RotateDown {
			mid = g.Hadamard(mid, op.HadamardBlock(F))
		}
		m := g.Linear(mid, p+"mlp.down_proj.weight", D, "")
		x = g.Add(x, g.RMSNorm(m, p+"post_feedforward_layernorm.weight", eps, 0))
		pg := g.GELUTanh(g.Linear(x, p+"per_layer_input_gate.weight", P, ""))
		pg = g.Mul(pg, g.Columns(pli, l*P, (l+1)*P))
		pg = g.Linear(pg, p+"per_layer_projection.weight", D, "")
		x = g.Add(x, g.RMSNorm(pg, p+"post_per_layer_input_norm.weight", eps, 0))
		x = g.ScaleBy(x, p+"layer_scalar")
	}
	x = g.RMSNorm(x, "model.norm.weight", eps, 0)
	logits := lmHead(g, c, opts, x)
	if s := g4.FinalSoftcap; s > 0 {
		logits = g.Scale(g.Tanh(g.Scale(logits, float32(1/s))), float32(s))
	}
	g.SetOutput(logits)
	return g, nil
}
