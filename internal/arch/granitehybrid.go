package arch

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// The Granite 4 hybrid family (Granite 4.0 H without experts; HF
// GraniteMoeHybridForCausalLM, llama.cpp granitehybrid): a pre-norm
// decoder whose layers are Mamba2 mixers or grouped-query attention,
// with Granite's multipliers. Per layer:
//
//	h = input_layernorm(x)
//	mamba layer:     z | xBC | dt = in_proj(h)
//	                 x', B, C = silu(conv(xBC) + conv_bias)   (depthwise, causal)
//	                 y = scan(x', dt, B, C; A, D, dt_bias)     (op.SSMScan)
//	                 o = out_proj(norm(y * silu(z)))           (norm over d_inner / n_groups)
//	attention layer: o = o_proj(attention(q, k, v)), no RoPE when
//	                 position_embedding_type is "nope"
//	x = x + residual_multiplier * o
//	x = x + residual_multiplier * output_linear(silu(gate) * up)
//
// with gate | up the rows of shared_mlp.input_linear, embeddings times
// embedding_multiplier, attention scale attention_multiplier and logits
// divided by logits_scaling. The checkpoint stores A_log (A = -exp(A_log));
// llama.cpp's GGUF stores A itself, splits input_linear into ffn_gate and
// ffn_up, marks mamba layers by 0 in attention.head_count_kv and uses RoPE
// only when rope.scaling.finetuned is true.

// MambaConfig describes the Mamba2 layers of a Granite 4 hybrid model.
type MambaConfig struct {
	// Layers lists the Mamba2 layers, ascending; the others attend.
	Layers  []int `json:"layers"`
	Heads   int   `json:"heads"`    // H
	HeadDim int   `json:"head_dim"` // P; H*P is d_inner
	State   int   `json:"state"`    // N, per group
	Groups  int   `json:"groups"`   // G, dividing H
	Kernel  int   `json:"kernel"`   // the depthwise convolution's taps
	// ConvBias says whether the convolution has a bias.
	ConvBias bool `json:"conv_bias"`
}

// inner is d_inner, the width of the scan.
func (m *MambaConfig) inner() int { return m.Heads * m.HeadDim }

// convCols is the width of the convolved x | B | C.
func (m *MambaConfig) convCols() int { return m.inner() + 2*m.Groups*m.State }

// mambaMaxSize bounds each Mamba2 size, so products stay far from
// overflow and the state from absurd allocations.
const mambaMaxSize = 1 << 14

func init() {
	register(&Family{
		Name:              "granitehybrid",
		HFArchitectures:   []string{"GraniteMoeHybridForCausalLM"},
		HFModelTypes:      []string{"granitemoehybrid"},
		GGUFArchitectures: []string{"granitehybrid"},
		configHF:          graniteHybridConfigHF,
		configGGUF:        graniteHybridConfigGGUF,
		tensorNames:       graniteHybridTensorName,
		permutesQK:        true,
		build:             buildGraniteHybrid,
		validate:          validateGraniteHybrid,
		storedShape:       graniteHybridStoredShape,
		convert:           graniteHybridConvert,
	})
}

// graniteHybridStoredShape gives the checkpoint shapes that differ from
// the graph's: HF's conv weight [C, 1, K]; GGUF's A and D [H, 1] and norm
// gain [G, d_inner/G].
func graniteHybridStoredShape(c *Config, canonical string, shape []int) []int {
	switch {
	case c.Source == "hf" && strings.HasSuffix(canonical, ".mamba.conv1d.weight") && len(shape) == 2:
		return []int{shape[0], 1, shape[1]}
	case c.Source == "gguf" && (strings.HasSuffix(canonical, ".mamba.A") || strings.HasSuffix(canonical, ".mamba.D")):
		return []int{shape[0], 1}
	case c.Source == "gguf" && strings.HasSuffix(canonical, ".mamba.norm.weight") && c.Mamba != nil:
		return []int{c.Mamba.Groups, c.Mamba.inner() / c.Mamba.Groups}
	}
	return shape
}

// graniteHybridConvert turns HF's A_log into A = -exp(A_log).
func graniteHybridConvert(c *Config, canonical string, v []float32) ([]float32, error) {
	if c.Source != "hf" || !strings.HasSuffix(canonical, ".mamba.A") {
		return v, nil
	}
	for i, a := range v {
		v[i] = float32(-math.Exp(float64(a)))
	}
	return v, nil
}

// graniteHybridGGUFNames maps the canonical (HF) names to llama.cpp's: the
// decoder's, and the shared MLP's and Mamba2 mixer's.
var graniteHybridGGUFNames = func() map[string]string {
	t := maps.Clone(ggufDecoderNames)
	maps.Copy(t, map[string]string{
		"shared_mlp.gate_proj.weight":     "ffn_gate.weight",
		"shared_mlp.up_proj.weight":       "ffn_up.weight",
		"shared_mlp.output_linear.weight": "ffn_down.weight",
		"mamba.in_proj.weight":            "ssm_in.weight",
		"mamba.conv1d.weight":             "ssm_conv1d.weight",
		"mamba.conv1d.bias":               "ssm_conv1d.bias",
		"mamba.A":                         "ssm_a",
		"mamba.D":                         "ssm_d",
		"mamba.dt_bias":                   "ssm_dt.bias",
		"mamba.norm.weight":               "ssm_norm.weight",
		"mamba.out_proj.weight":           "ssm_out.weight",
	})
	return t
}()

func graniteHybridTensorName(source, name string) (string, bool) {
	if source == "hf" && strings.HasSuffix(name, ".mamba.A") {
		return name + "_log", true
	}
	return sourceTensorName(source, name, graniteHybridGGUFNames)
}

// graniteHybridCount reads a non-negative integer config key, def when
// absent or null; a value of another type is an error.
func graniteHybridCount(m map[string]any, key string, def int, src string) (int, error) {
	v, present := m[key]
	if !present || v == nil {
		return def, nil
	}
	n, ok := format.MetaInt(m, key)
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%s: %q is %s, not a count", src, key, show(v))
	}
	return int(n), nil
}

func graniteHybridConfigHF(m map[string]any) (Config, error) {
	if err := refuseBiases(m, "attention_bias", "mamba_proj_bias"); err != nil {
		return Config{}, err
	}
	// HF's defaults: 8 experts, a shared MLP of 1024
	if n, err := graniteHybridCount(m, "num_local_experts", 8, "config.json"); err != nil {
		return Config{}, err
	} else if n > 0 {
		return Config{}, fmt.Errorf("config.json: %d local experts (num_local_experts); the granitehybrid family runs the models without experts", n)
	}
	mm := make(map[string]any, len(m)+1)
	for k, v := range m {
		mm[k] = v
	}
	mm["intermediate_size"] = 1024.0
	if v, present := m["shared_intermediate_size"]; present && v != nil {
		mm["intermediate_size"] = v // the shared MLP's width
	}
	c, err := decoderConfigHF(mm, "granitehybrid", graph.RopeHalf)
	if err != nil {
		return c, err
	}
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	c.EmbedScale = floatOr(m, "embedding_multiplier", 1)
	c.AttnScale = floatOr(m, "attention_multiplier", 1) // HF's default, not 1/sqrt(head_dim)
	c.ResidualScale = floatOr(m, "residual_multiplier", 1)
	c.LogitScale = floatOr(m, "logits_scaling", 1)
	c.FusedGateUp = true
	switch pe := m["position_embedding_type"]; pe {
	case "rope":
	case nil, "nope":
		c.NoRopeLayers = everyNth(c.Layers, 1)
	default:
		return c, fmt.Errorf("config.json: \"position_embedding_type\" is %s, want \"rope\" or \"nope\"", show(pe))
	}
	mc := &MambaConfig{ConvBias: true}
	if b, ok := m["mamba_conv_bias"].(bool); ok {
		mc.ConvBias = b
	}
	expand, err := graniteHybridCount(m, "mamba_expand", 2, "config.json")
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		key string
		dst *int
		def int
	}{{"mamba_n_heads", &mc.Heads, 128}, {"mamba_d_state", &mc.State, 256},
		{"mamba_n_groups", &mc.Groups, 1}, {"mamba_d_conv", &mc.Kernel, 4}} {
		if *f.dst, err = graniteHybridCount(m, f.key, f.def, "config.json"); err != nil {
			return c, err
		}
	}
	inner := expand * c.Hidden
	if v, present := m["mamba_d_head"]; present && v != nil && v != "auto" {
		if mc.HeadDim, err = graniteHybridCount(m, "mamba_d_head", 0, "config.json"); err != nil {
			return c, err
		}
	} else if mc.Heads > 0 {
		mc.HeadDim = inner / mc.Heads
	}
	if mc.Heads*mc.HeadDim != inner {
		return c, fmt.Errorf("config.json: %d Mamba2 heads of %d are not mamba_expand %d x hidden_size %d",
			mc.Heads, mc.HeadDim, expand, c.Hidden)
	}
	if v, present := m["layer_types"]; !present || v == nil {
		// HF's default: every layer is a Mamba2 layer
		mc.Layers = everyNth(c.Layers, 1)
		c.Mamba = mc
		return c, nil
	}
	types, ok := format.List(m["layer_types"])
	if !ok || len(types) != c.Layers {
		return c, fmt.Errorf("config.json: \"layer_types\" is %s, want %d layer kinds", show(m["layer_types"]), c.Layers)
	}
	for l, t := range types {
		switch t {
		case "mamba":
			mc.Layers = append(mc.Layers, l)
		case "attention":
		default:
			return c, fmt.Errorf("config.json: layer_types[%d] is %s, want \"mamba\" or \"attention\"", l, show(t))
		}
	}
	c.Mamba = mc
	return c, nil
}

func graniteHybridConfigGGUF(m map[string]any, arch string) (Config, error) {
	kv, isList := format.List(m[arch+".attention.head_count_kv"])
	if n, ok := format.MetaInt(m, arch+".expert_count"); ok && n > 0 {
		return Config{}, fmt.Errorf("gguf: %d experts; the granitehybrid family runs the models without experts", n)
	}
	c, err := decoderConfigGGUF(m, arch, "granitehybrid", graph.RopeInterleaved)
	if err != nil {
		return c, err
	}
	if v, ok := format.MetaInt(m, arch+".expert_shared_feed_forward_length"); ok {
		c.FFN = int(v)
	}
	c.EmbedScale = floatOr(m, arch+".embedding_scale", 1)
	c.AttnScale = floatOr(m, arch+".attention.scale", 0)
	c.ResidualScale = floatOr(m, arch+".residual_scale", 1)
	c.LogitScale = floatOr(m, arch+".logit_scale", 1)
	// llama.cpp applies RoPE only to models marked as finetuned for it
	if b, ok := m[arch+".rope.scaling.finetuned"].(bool); !ok || !b {
		c.NoRopeLayers = everyNth(c.Layers, 1)
	}
	mc := &MambaConfig{ConvBias: true}
	var missing []string
	for _, f := range []struct {
		key string
		dst *int
	}{{"ssm.time_step_rank", &mc.Heads}, {"ssm.state_size", &mc.State},
		{"ssm.group_count", &mc.Groups}, {"ssm.conv_kernel", &mc.Kernel}, {"ssm.inner_size", &mc.HeadDim}} {
		v, ok := format.MetaInt(m, arch+"."+f.key)
		if !ok || v < 0 || v > math.MaxInt32 {
			missing = append(missing, arch+"."+f.key)
			continue
		}
		*f.dst = int(v)
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("gguf: metadata %s missing or not a count", strings.Join(missing, ", "))
	}
	inner := mc.HeadDim
	if mc.Heads < 1 || inner%mc.Heads != 0 {
		return c, fmt.Errorf("gguf: %s.ssm.inner_size %d does not split into %d heads", arch, inner, mc.Heads)
	}
	mc.HeadDim = inner / mc.Heads
	if !isList {
		return c, fmt.Errorf("gguf: metadata %s.attention.head_count_kv is not a per-layer list, so the Mamba2 layers are unknown", arch)
	}
	if mc.Layers, err = ggufLayersWithoutKV(&c, arch, kv); err != nil {
		return c, err
	}
	c.Mamba = mc
	return c, nil
}

func validateGraniteHybrid(c *Config) error {
	if err := c.validateDecoder(); err != nil {
		return err
	}
	mc := c.Mamba
	if mc == nil {
		return fmt.Errorf("granitehybrid config: the Mamba2 layers are missing")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"heads", mc.Heads}, {"head size", mc.HeadDim}, {"state size", mc.State}, {"groups", mc.Groups}} {
		if f.v < 1 || f.v > mambaMaxSize {
			return fmt.Errorf("granitehybrid config: Mamba2 %s %d is outside [1, %d]", f.name, f.v, mambaMaxSize)
		}
	}
	if mc.Kernel < 2 || mc.Kernel > lfm2MaxKernel {
		return fmt.Errorf("granitehybrid config: Mamba2 convolution kernel %d is outside [2, %d]", mc.Kernel, lfm2MaxKernel)
	}
	if mc.Heads%mc.Groups != 0 {
		return fmt.Errorf("granitehybrid config: %d Mamba2 heads do not split into %d groups", mc.Heads, mc.Groups)
	}
	if mc.Groups != 1 {
		// HF's gated norm spans d_inner, llama.cpp's d_inner / groups: they
		// agree only for one group, which every released model has
		return fmt.Errorf("granitehybrid config: %d Mamba2 groups; only models with one group are supported", mc.Groups)
	}
	if int64(mc.inner())*int64(mc.State) > 1<<26 {
		return fmt.Errorf("granitehybrid config: a Mamba2 state of %d x %d floats is too large", mc.inner(), mc.State)
	}
	if err := checkAscendingLayers(c, "granitehybrid config: Mamba2 layers", mc.Layers); err != nil {
		return err
	}
	if c.FusedQKV || c.QKVBias || c.GELU || c.SandwichNorms || c.QKNorm || len(c.SlidingLayers) > 0 {
		return fmt.Errorf("granitehybrid config: a decoder variation the granitehybrid family does not build is set")
	}
	return nil
}

func buildGraniteHybrid(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	x := embedTokens(g, c)
	eps, off := float32(c.NormEps), float32(c.NormOffset)
	scale := attnScaleOf(c)
	residual := scaledResidual(g, c)
	D, mc := c.Hidden, c.Mamba
	cache := 0 // attention layers get consecutive cache slots
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := g.RMSNorm(x, p+"input_layernorm.weight", eps, off)
		var o int
		if slices.Contains(mc.Layers, l) {
			o = mamba2Mixer(g, c, h, p+"mamba.")
		} else {
			q := g.Linear(h, p+"self_attn.q_proj.weight", c.Heads*c.HeadDim, "")
			k := g.Linear(h, p+"self_attn.k_proj.weight", c.KVHeads*c.HeadDim, "")
			v := g.Linear(h, p+"self_attn.v_proj.weight", c.KVHeads*c.HeadDim, "")
			if !slices.Contains(c.NoRopeLayers, l) {
				q, k = g.RoPE(q, rope), g.RoPE(k, rope)
			}
			if c.RotateQK { // after RoPE when there is one
				b := op.HadamardBlock(c.HeadDim)
				q, k = g.Hadamard(q, b), g.Hadamard(k, b)
			}
			at := graph.Attn{Layer: cache, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: float32(scale)}
			cache++
			o = g.Linear(g.Attention(q, k, v, at), p+"self_attn.o_proj.weight", D, "")
		}
		x = residual(x, o)
		h = g.RMSNorm(x, p+"post_attention_layernorm.weight", eps, off)
		var gate, up int
		if c.FusedGateUp {
			gu := g.Linear(h, p+"shared_mlp.input_linear.weight", 2*c.FFN, "")
			gate, up = g.Columns(gu, 0, c.FFN), g.Columns(gu, c.FFN, 2*c.FFN)
		} else {
			gate = g.Linear(h, p+"shared_mlp.gate_proj.weight", c.FFN, "")
			up = g.Linear(h, p+"shared_mlp.up_proj.weight", c.FFN, "")
		}
		mid := g.Mul(g.SiLU(gate), up)
		if c.RotateDown {
			mid = g.Hadamard(mid, op.HadamardBlock(c.FFN))
		}
		x = residual(x, g.Linear(mid, p+"shared_mlp.output_linear.weight", D, ""))
	}
	x = g.RMSNorm(x, "model.norm.weight", eps, off)
	logits := lmHead(g, c, opts, x)
	if s := orOne(c.LogitScale); s != 1 {
		logits = g.Scale(logits, float32(1/s))
	}
	g.SetOutput(logits)
	return g, nil
}

// mamba2Mixer adds the Mamba2 mixer of one layer on h, its weights
// under prefix p.
func mamba2Mixer(g *graph.Graph, c *Config, h int, p string) int {
	mc := c.Mamba
	di, gn, cc := mc.inner(), mc.Groups*mc.State, mc.convCols()
	proj := g.Linear(h, p+"in_proj.weight", di+cc+mc.Heads, "")
	z, xbc, dt := g.Columns(proj, 0, di), g.Columns(proj, di, di+cc), g.Columns(proj, di+cc, di+cc+mc.Heads)
	if mc.ConvBias {
		xbc = g.CausalConvBias(xbc, p+"conv1d.weight", p+"conv1d.bias", mc.Kernel, p+"conv1d")
	} else {
		xbc = g.CausalConv(xbc, p+"conv1d.weight", mc.Kernel, p+"conv1d")
	}
	xbc = g.SiLU(xbc)
	xs, b, cm := g.Columns(xbc, 0, di), g.Columns(xbc, di, di+gn), g.Columns(xbc, di+gn, di+2*gn)
	y := g.SSMScan(xs, dt, b, cm, graph.SSMWeights{A: p + "A", D: p + "D", DTBias: p + "dt_bias"},
		mc.HeadDim, mc.Groups, p+"scan")
	y = g.Mul(y, g.SiLU(z))
	y = g.RMSNorm(y, p+"norm.weight", float32(c.NormEps), float32(c.NormOffset))
	return g.Linear(y, p+"out_proj.weight", c.Hidden, "")
}
