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

// The Qwen3.5 family (dense): Gated DeltaNet linear-attention layers with a
// gated full-attention layer every full_attention_interval-th layer
// (layer_types in config.json), and the SwiGLU block of Qwen3. Per layer:
//
//	h = x + mixer(input_layernorm(x)); x = h + mlp(post_attention_layernorm(h))
//
// Full attention: q_proj rows per head are [query | gate]; q_norm, k_norm
// per head before a partial NeoX RoPE (partial_rotary_factor of the head;
// the text-only M-RoPE is plain RoPE); the output times sigmoid(gate)
// goes into o_proj. DeltaNet: in_proj_qkv -> causal depthwise conv + SiLU
// -> gated delta rule (op.GatedDeltaRows) -> per-head RMSNorm (plain gain
// linear_attn.norm) * silu(in_proj_z x) -> out_proj.
//
// The weights are the GGUF's in value: every RMSNorm gain but
// linear_attn.norm holds 1 + w, A_log holds A = -exp(A_log), and the value
// heads of a key head are tiled (value head j reads key head j % key
// heads). Reading an HF folder converts to this (qwen35Convert): HF
// stores w, A_log, and groups the value heads (j reads j / ratio). The
// multi-token-prediction block (mtp.*, GGUF block L with nextn tensors) is
// not part of the model's graph: LoadMTP builds it (qwen35_mtp.go).

// DeltaNetConfig holds the sizes Qwen3.5's linear-attention layers add to
// Config.
type DeltaNetConfig struct {
	KeyHeads   int `json:"key_heads"`
	ValueHeads int `json:"value_heads"`
	KeyDim     int `json:"key_dim"`
	ValueDim   int `json:"value_dim"`
	ConvKernel int `json:"conv_kernel"`
	// FullLayers lists the layers of gated full attention; the others are
	// DeltaNet layers.
	FullLayers []int `json:"full_layers"`
	// AttnGate says whether q_proj also yields the output gate.
	AttnGate bool `json:"attn_gate"`
	// MTPLayers is the number of multi-token-prediction blocks the
	// checkpoint carries (the first one: LoadMTP).
	MTPLayers int `json:"mtp_layers,omitempty"`
}

func (d *DeltaNetConfig) dims() op.DeltaDims {
	return op.DeltaDims{KeyHeads: d.KeyHeads, ValueHeads: d.ValueHeads, KeyDim: d.KeyDim, ValueDim: d.ValueDim}
}

func init() {
	register(&Family{
		Name:              "qwen35",
		HFArchitectures:   []string{"Qwen3_5ForCausalLM"},
		HFModelTypes:      []string{"qwen3_5_text"},
		GGUFArchitectures: []string{"qwen35"},
		configHF:          qwen35ConfigHF,
		configGGUF:        qwen35ConfigGGUF,
		tensorNames:       qwen35TensorName,
		build:             buildQwen35,
		validate:          validateQwen35,
		storedShape:       qwen35StoredShape,
		convert:           qwen35Convert,
	})
}

// qwen35Interval is the default spacing of full-attention layers.
const qwen35Interval = 4

func qwen35ConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias"); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "qwen35", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	// rope_parameters (newer config.json) holds what older ones keep at
	// the top; a key it lacks is read at the top
	rp := map[string]any{}
	for _, k := range []string{"rope_type", "rope_theta", "partial_rotary_factor"} {
		if v, ok := m[k]; ok {
			rp[k] = v
		}
	}
	if p, ok := m["rope_parameters"].(map[string]any); ok {
		for k, v := range p {
			rp[k] = v
		}
	} else if v, ok := m["rope_parameters"]; ok && v != nil {
		return c, fmt.Errorf("config.json: \"rope_parameters\" is %s, not an object", show(v))
	}
	if t, ok := rp["rope_type"]; ok && t != nil && t != "default" {
		return c, fmt.Errorf("config.json: rope_type %s is not supported (want \"default\")", show(t))
	}
	for _, k := range []string{"rope_theta", "partial_rotary_factor"} {
		if v, ok := rp[k]; ok && v != nil {
			if _, ok := format.MetaFloat(rp, k); !ok {
				return c, fmt.Errorf("config.json: %q is %s, not a number", k, show(v))
			}
		}
	}
	c.RopeTheta = floatOr(rp, "rope_theta", c.RopeTheta)
	if err := partialRotary(rp, &c, 0.25); err != nil {
		return c, err
	}
	d := &DeltaNetConfig{AttnGate: true}
	if g, ok := m["attn_output_gate"]; ok && g != nil {
		b, ok := g.(bool)
		if !ok {
			return c, fmt.Errorf("config.json: \"attn_output_gate\" is %s, not a boolean", show(g))
		}
		d.AttnGate = b
	}
	var bad []string
	get := func(key string, def int) int {
		v, ok := format.MetaInt(m, key)
		if !ok {
			if x, present := m[key]; (present && x != nil) || def < 0 {
				bad = append(bad, key)
			}
			return def
		}
		return int(v)
	}
	d.KeyHeads = get("linear_num_key_heads", -1)
	d.ValueHeads = get("linear_num_value_heads", -1)
	d.KeyDim = get("linear_key_head_dim", -1)
	d.ValueDim = get("linear_value_head_dim", -1)
	d.ConvKernel = get("linear_conv_kernel_dim", 4)
	d.MTPLayers = get("mtp_num_hidden_layers", 0)
	interval := get("full_attention_interval", qwen35Interval)
	if len(bad) > 0 {
		return c, fmt.Errorf("config.json: %s missing or not an integer", strings.Join(bad, ", "))
	}
	if types, ok := m["layer_types"]; ok && types != nil {
		list, ok := format.List(types)
		if !ok || len(list) != c.Layers {
			return c, fmt.Errorf("config.json: \"layer_types\" is %s, want one entry per layer (%d)", show(types), c.Layers)
		}
		for l, t := range list {
			switch t {
			case "full_attention":
				d.FullLayers = append(d.FullLayers, l)
			case "linear_attention":
			default:
				return c, fmt.Errorf("config.json: layer_types[%d] is %s, want \"full_attention\" or \"linear_attention\"", l, show(t))
			}
		}
	} else {
		if interval < 1 {
			return c, fmt.Errorf("config.json: full_attention_interval %d must be positive", interval)
		}
		d.FullLayers = everyNth(c.Layers, interval)
	}
	c.DeltaNet = d
	return c, nil
}

func qwen35ConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := decoderConfigGGUF(m, arch, "qwen35", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	var bad []string
	get := func(key string, def int) int {
		v, ok := format.MetaInt(m, arch+"."+key)
		if !ok {
			if def < 0 {
				bad = append(bad, arch+"."+key)
			}
			return def
		}
		return int(v)
	}
	d := &DeltaNetConfig{AttnGate: true}
	d.KeyHeads = get("ssm.group_count", -1)
	d.ValueHeads = get("ssm.time_step_rank", -1)
	d.KeyDim = get("ssm.state_size", -1)
	inner := get("ssm.inner_size", -1)
	d.ConvKernel = get("ssm.conv_kernel", -1)
	d.MTPLayers = get("nextn_predict_layers", 0)
	interval := get("full_attention_interval", qwen35Interval)
	if len(bad) > 0 {
		return c, fmt.Errorf("gguf: metadata %s missing or not an integer", strings.Join(bad, ", "))
	}
	if d.ValueHeads < 1 || inner%d.ValueHeads != 0 {
		return c, fmt.Errorf("gguf: %s.ssm.inner_size %d does not split into %d value heads", arch, inner, d.ValueHeads)
	}
	d.ValueDim = inner / d.ValueHeads
	if d.MTPLayers < 0 || d.MTPLayers >= c.Layers {
		return c, fmt.Errorf("gguf: %s.nextn_predict_layers %d of %d blocks", arch, d.MTPLayers, c.Layers)
	}
	// the block count includes the MTP blocks, which come last
	c.Layers -= d.MTPLayers
	if interval < 1 {
		return c, fmt.Errorf("gguf: %s.full_attention_interval %d must be positive", arch, interval)
	}
	d.FullLayers = everyNth(c.Layers, interval)
	c.DeltaNet = d
	return c, nil
}

func validateQwen35(c *Config) error {
	if err := c.validateDecoder(); err != nil {
		return err
	}
	d := c.DeltaNet
	if d == nil {
		return fmt.Errorf("%s config: the linear-attention sizes are missing", c.Family)
	}
	if err := d.dims().Check(); err != nil {
		return fmt.Errorf("%s config: %w", c.Family, err)
	}
	if d.ConvKernel < 2 || d.ConvKernel > 64 {
		return fmt.Errorf("%s config: convolution kernel %d is outside [2, 64]", c.Family, d.ConvKernel)
	}
	for i, l := range d.FullLayers {
		if l < 0 || l >= c.Layers || (i > 0 && l <= d.FullLayers[i-1]) {
			return fmt.Errorf("%s config: full-attention layers %v are not ascending layers of %d", c.Family, d.FullLayers, c.Layers)
		}
	}
	if c.NormOffset != 0 {
		return fmt.Errorf("%s config: norm offset %v (the gains hold 1 + w)", c.Family, c.NormOffset)
	}
	return nil
}

func buildQwen35(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	d := c.DeltaNet
	dims := d.dims()
	g := graph.New()
	x := g.Embed(g.Tokens(), "model.embed_tokens.weight", c.Vocab, c.Hidden)
	eps := float32(c.NormEps)
	cache := 0
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := g.RMSNorm(x, p+"input_layernorm.weight", eps, 0)
		var o int
		if slices.Contains(d.FullLayers, l) {
			o = qwen35Attention(g, c, h, p+"self_attn.", cache, rope)
			cache++
		} else {
			a := p + "linear_attn."
			qkv := g.Linear(h, a+"in_proj_qkv.weight", dims.In(), "")
			z := g.Linear(h, a+"in_proj_z.weight", dims.Out(), "")
			beta := g.Linear(h, a+"in_proj_b.weight", d.ValueHeads, "")
			alpha := g.Linear(h, a+"in_proj_a.weight", d.ValueHeads, "")
			conv := g.SiLU(g.CausalConv(qkv, a+"conv1d.weight", d.ConvKernel, a+"conv1d"))
			o = g.GatedDelta(conv, alpha, beta, a+"A_log", a+"dt_bias", dims, a+"delta")
			o = g.Mul(g.HeadRMSNorm(o, a+"norm.weight", d.ValueDim, eps, 0), g.SiLU(z))
			o = g.Linear(o, a+"out_proj.weight", c.Hidden, "")
		}
		x = qwen35MLP(g, c, g.Add(x, o), p)
	}
	x = g.RMSNorm(x, "model.norm.weight", eps, 0)
	if !opts.AllLogits {
		x = g.LastRow(x)
	}
	if opts.Hidden {
		g.SetOutput(x)
		return g, nil
	}
	g.SetOutput(qwen35Head(g, c, x))
	return g, nil
}

// qwen35Attention adds the gated full attention of layer prefix p (its
// self_attn. part) reading h, writing cache slot cache.
func qwen35Attention(g *graph.Graph, c *Config, h int, a string, cache int, rope graph.Rope) int {
	E, eps := c.HeadDim, float32(c.NormEps)
	var q, gate int
	if c.DeltaNet.AttnGate {
		qg := g.Linear(h, a+"q_proj.weight", 2*c.Heads*E, "")
		q, gate = g.HeadColumns(qg, 2*E, 0, E), g.HeadColumns(qg, 2*E, E, 2*E)
	} else {
		q = g.Linear(h, a+"q_proj.weight", c.Heads*E, "")
	}
	k := g.Linear(h, a+"k_proj.weight", c.KVHeads*E, "")
	v := g.Linear(h, a+"v_proj.weight", c.KVHeads*E, "")
	q = g.RoPE(g.HeadRMSNorm(q, a+"q_norm.weight", E, eps, 0), rope)
	k = g.RoPE(g.HeadRMSNorm(k, a+"k_norm.weight", E, eps, 0), rope)
	if c.RotateQK {
		b := op.HadamardBlock(E)
		q, k = g.Hadamard(q, b), g.Hadamard(k, b)
	}
	o := g.Attention(q, k, v, graph.Attn{Layer: cache, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: E,
		Scale: float32(1 / math.Sqrt(float64(E)))})
	if c.DeltaNet.AttnGate {
		o = g.Mul(o, g.Sigmoid(gate))
	}
	return g.Linear(o, a+"o_proj.weight", c.Hidden, "")
}

// qwen35MLP adds the feed-forward half of the layer of prefix p to the
// residual stream x.
func qwen35MLP(g *graph.Graph, c *Config, x int, p string) int {
	h := g.RMSNorm(x, p+"post_attention_layernorm.weight", float32(c.NormEps), 0)
	gate := g.Linear(h, p+"mlp.gate_proj.weight", c.FFN, "")
	up := g.Linear(h, p+"mlp.up_proj.weight", c.FFN, "")
	mid := g.Mul(g.SiLU(gate), up)
	if c.RotateDown {
		mid = g.Hadamard(mid, op.HadamardBlock(c.FFN))
	}
	return g.Add(x, g.Linear(mid, p+"mlp.down_proj.weight", c.Hidden, ""))
}

// qwen35Head adds the classifier.
func qwen35Head(g *graph.Graph, c *Config, x int) int {
	head := "lm_head.weight"
	if c.Tied {
		head = "model.embed_tokens.weight"
	}
	return g.Linear(x, head, c.Vocab, "")
}

// ggufQwen35Names maps canonical names to llama.cpp's qwen35 names.
var ggufQwen35Names = map[string]string{
	"model.embed_tokens.weight":       "token_embd.weight",
	"model.norm.weight":               "output_norm.weight",
	"lm_head.weight":                  "output.weight",
	"input_layernorm.weight":          "attn_norm.weight",
	"post_attention_layernorm.weight": "post_attention_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"linear_attn.in_proj_qkv.weight":  "attn_qkv.weight",
	"linear_attn.in_proj_z.weight":    "attn_gate.weight",
	"linear_attn.in_proj_a.weight":    "ssm_alpha.weight",
	"linear_attn.in_proj_b.weight":    "ssm_beta.weight",
	"linear_attn.A_log":               "ssm_a",
	"linear_attn.dt_bias":             "ssm_dt.bias",
	"linear_attn.conv1d.weight":       "ssm_conv1d.weight",
	"linear_attn.norm.weight":         "ssm_norm.weight",
	"linear_attn.out_proj.weight":     "ssm_out.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"layer-prefix":                    "blk.",
}

func qwen35TensorName(source, name string) (string, bool) {
	switch source {
	case "hf":
		return name, true
	case "gguf":
		return mapLayerName(name, ggufQwen35Names)
	}
	return "", false
}

// qwen35StoredShape: an HF conv1d weight is [C, 1, K].
func qwen35StoredShape(c *Config, name string, shape []int) []int {
	if c.Source == "hf" && strings.HasSuffix(name, ".linear_attn.conv1d.weight") && len(shape) == 2 {
		return []int{shape[0], 1, shape[1]}
	}
	return shape
}

// qwen35Convert turns HF values into the GGUF's (see the family comment):
// 1 + w for the zero-centred gains, -exp(A_log), and the value heads
// reordered from grouped to tiled in every tensor that has them.
func qwen35Convert(c *Config, name string, v []float32) ([]float32, error) {
	if c.Source != "hf" {
		return v, nil
	}
	d := c.DeltaNet
	if !strings.Contains(name, ".linear_attn.") {
		if strings.HasSuffix(name, "norm.weight") {
			for i := range v {
				v[i]++
			}
		}
		return v, nil
	}
	_, field, _ := strings.Cut(name, ".linear_attn.")
	Hv, Dv, nk := d.ValueHeads, d.ValueDim, d.KeyHeads*d.KeyDim
	var off, outer, inner int // the value heads: v[off:] as [outer][Hv][inner]
	switch field {
	case "norm.weight":
		return v, nil
	case "A_log":
		for i, a := range v {
			v[i] = float32(-math.Exp(float64(a)))
		}
		outer, inner = 1, 1
	case "dt_bias":
		outer, inner = 1, 1
	case "in_proj_a.weight", "in_proj_b.weight":
		outer, inner = 1, c.Hidden
	case "in_proj_z.weight":
		outer, inner = 1, Dv*c.Hidden
	case "in_proj_qkv.weight":
		off, outer, inner = 2*nk*c.Hidden, 1, Dv*c.Hidden
	case "conv1d.weight":
		off, outer, inner = 2*nk*d.ConvKernel, 1, Dv*d.ConvKernel
	case "out_proj.weight":
		outer, inner = c.Hidden, Dv
	default:
		return nil, fmt.Errorf("qwen35: no conversion for %q", name)
	}
	if off+outer*Hv*inner != len(v) {
		return nil, fmt.Errorf("qwen35: %q holds %d values, want %d", name, len(v), off+outer*Hv*inner)
	}
	tileValueHeads(v[off:], outer, inner, d.KeyHeads, Hv)
	return v, nil
}

// tileValueHeads reorders the value-head axis of v [outer][Hv][inner]
// from grouped (head j reads key head j / (Hv/Hk)) to tiled (j reads
// j % Hk): grouped head kh*r + m moves to m*Hk + kh.
func tileValueHeads(v []float32, outer, inner, Hk, Hv int) {
	r := Hv / Hk
	tmp := make([]float32, Hv*inner)
	for o := 0; o < outer; o++ {
		blk := v[o*Hv*inner : (o+1)*Hv*inner]
		for j := 0; j < Hv; j++ {
			kh, m := j/r, j%r
			n := m*Hk + kh
			copy(tmp[n*inner:(n+1)*inner], blk[j*inner:(j+1)*inner])
		}
		copy(blk, tmp)
	}
}
