package arch

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
)

// Config is everything the graph builder needs to know about a model.
type Config struct {
	Family  string  `json:"family"`            // "llama"
	Hidden  int     `json:"hidden_size"`       // D
	FFN     int     `json:"intermediate_size"` // F
	Layers  int     `json:"num_layers"`
	Heads   int     `json:"num_heads"`      // H
	KVHeads int     `json:"num_kv_heads"`   // G
	HeadDim int     `json:"head_dim"`       // E
	Vocab   int     `json:"vocab_size"`     // V
	Context int     `json:"context_length"` // trained context length
	NormEps float64 `json:"norm_eps"`
	// Pooling is how an embedding model turns a sequence's final hidden
	// rows into one vector ("mean", "cls", "last"), or "rank" for a
	// reranker, as its checkpoint declares (GGUF pooling_type); "" for a
	// generative model.
	Pooling string `json:"pooling,omitempty"`

	RopeTheta   float64         `json:"rope_theta"`
	RopeStyle   graph.RopeStyle `json:"rope_style"`
	RotaryDim   int             `json:"rotary_dim,omitempty"` // R; 0 means HeadDim
	RopeScaling RopeScaling     `json:"rope_scaling"`         // zero value: none
	// RopeFreqFactors divide the base frequencies pairwise (GGUF rope_freqs).
	RopeFreqFactors []float32 `json:"rope_freq_factors,omitempty"`
	// RopeSections splits the R/2 rotary pairs into runs that rotate by
	// the components of a multi-axis position (Qwen2-VL's M-RoPE: t, h, w
	// sections of mrope_section); empty means plain RoPE. See
	// graph.Rope.Sections.
	RopeSections []int `json:"rope_sections,omitempty"`
	// RopeContext is the number of positions the graph is built for; 0
	// means Context. It picks longrope's factor set once, statically (see
	// LongRopeFactors); the compiler sets it to the artifact's context.
	RopeContext int `json:"rope_context,omitempty"`

	// Variations of the shared decoder block (blocks.go); zero values
	// give plain Llama.
	QKVBias bool `json:"qkv_bias,omitempty"` // q, k and v projections add a bias (Qwen2)
	QKNorm  bool `json:"qk_norm,omitempty"`  // per-head RMSNorm of q and k before RoPE (Qwen3)
	// FusedQKV reads q, k and v from one projection qkv_proj whose rows
	// are [q | k | v] (Phi-3).
	FusedQKV bool `json:"fused_qkv,omitempty"`
	// QKVShards is the number of model-parallel shards whose rows make up
	// CodeGen's fused qkv_proj (codegen.go): 4, or 8 for CodeGen2-1B and
	// 3.7B; 0 for other families.
	QKVShards int `json:"qkv_shards,omitempty"`
	// FusedGateUp reads the feed-forward gate and up projections from one
	// gate_up_proj whose rows are [gate | up] (Phi-3, GLM).
	FusedGateUp bool `json:"fused_gate_up,omitempty"`
	// NoRopeLayers lists layers whose attention uses no rotary embedding
	// (SmolLM3).
	NoRopeLayers []int   `json:"no_rope_layers,omitempty"`
	AttnScale    float64 `json:"attn_scale,omitempty"`  // scale of q·k; 0 means 1/sqrt(HeadDim) (Granite)
	EmbedScale   float64 `json:"embed_scale,omitempty"` // multiplies the embeddings; 0 means 1 (Granite)
	// ResidualScale multiplies the attention and feed-forward outputs
	// before each residual add; 0 means 1 (Granite).
	ResidualScale float64 `json:"residual_scale,omitempty"`
	LogitScale    float64 `json:"logit_scale,omitempty"` // divides the logits; 0 means 1 (Granite)

	// NormOffset is added to every RMSNorm gain, per-head q/k norms
	// included: 1 for Gemma checkpoints that store w of a (1+w) gain
	// (llama.cpp's converter adds the 1 into its GGUF files, so 0 there).
	NormOffset float64 `json:"norm_offset,omitempty"`
	// RotateQK and RotateDown are QuaRot's online rotations, set by a
	// quantize recipe's r3 and r4 (package rotate): q and k are rotated
	// after RoPE by a Hadamard transform in blocks of the largest power of
	// two dividing HeadDim (the scores are unchanged, the cache holds
	// rotated keys), and down_proj's input in blocks of the largest power
	// of two dividing FFN (its weight holds W·B, so the output is
	// unchanged). Both make int8 activations and a uint8 cache see
	// spread-out values instead of a few outliers.
	RotateQK   bool `json:"rotate_qk,omitempty"`
	RotateDown bool `json:"rotate_down,omitempty"`
	// GELU makes the feed-forward gate a tanh-approximated GELU instead of
	// SiLU (Gemma).
	GELU bool `json:"gelu,omitempty"`
	// SandwichNorms adds Gemma 3's extra norms: post_attention_layernorm on
	// the attention output and post_feedforward_layernorm on the
	// feed-forward output, each before its residual add, and
	// pre_feedforward_layernorm in front of the feed-forward.
	SandwichNorms bool `json:"sandwich_norms,omitempty"`
	// SlidingLayers lists layers whose attention sees only the last
	// SlidingWindow positions (query i attends keys j with 0 <= i-j <
	// SlidingWindow) and, when LocalRopeTheta > 0, whose RoPE uses that
	// base without scaling (Gemma 3 local layers).
	SlidingLayers  []int   `json:"sliding_layers,omitempty"`
	SlidingWindow  int     `json:"sliding_window,omitempty"`
	LocalRopeTheta float64 `json:"local_rope_theta,omitempty"`

	// Bidirectional makes every attention layer see the whole sequence,
	// a sliding layer the positions at most SlidingWindow/2 away on
	// either side: an encoder, which gives embeddings only
	// (EmbeddingGemma).
	Bidirectional bool `json:"bidirectional,omitempty"`
	// DenseOut lists the output sizes of the linear projections without
	// bias applied to the rows after the final norm (EmbeddingGemma's
	// sentence-transformers Dense modules, weights "2_Dense.linear.weight"
	// and on); the last is the hidden size.
	DenseOut []int `json:"dense_out,omitempty"`

	// ShortConv holds LFM2's short-convolution layers (lfm2.go); nil for
	// other families.
	ShortConv *ShortConvConfig `json:"short_conv,omitempty"`

	// Gemma4 holds Gemma 4's per-layer sizes (gemma4.go); nil for other
	// families.
	Gemma4 *Gemma4Config `json:"gemma4,omitempty"`
	// Mamba holds the Mamba2 layers of Granite 4 hybrid models
	// (granitehybrid.go); nil for other families.
	Mamba *MambaConfig `json:"mamba,omitempty"`

	// RWKV holds RWKV-7's own sizes (rwkv7.go); nil for other families.
	RWKV *RWKVConfig `json:"rwkv,omitempty"`
	// DeltaNet holds the sizes of Qwen3.5's linear-attention layers
	// (qwen35.go); nil for other families.
	DeltaNet *DeltaNetConfig `json:"deltanet,omitempty"`

	Tied bool  `json:"tied"` // classifier shares the embedding table
	BOS  int   `json:"bos"`  // -1 if unknown
	EOS  []int `json:"eos"`

	// Source records where the config came from ("hf", "gguf", "llama2c").
	Source string `json:"source"`
}

// RopeScaling describes a rope_scaling entry of config.json.
type RopeScaling struct {
	Type                string  `json:"type,omitempty"`                             // "", "linear", "llama3", "yarn", "longrope", "dynamic"
	Factor              float64 `json:"factor,omitempty"`                           // linear, llama3 and yarn; longrope: 0 means Context/OriginalMaxPosition
	LowFreqFactor       float64 `json:"low_freq_factor,omitempty"`                  // llama3
	HighFreqFactor      float64 `json:"high_freq_factor,omitempty"`                 // llama3
	OriginalMaxPosition int     `json:"original_max_position_embeddings,omitempty"` // llama3, longrope, yarn (0: Context)
	// ShortFactor and LongFactor (longrope) hold R/2 divisors of the base
	// frequencies each; LongRopeFactors says which one applies.
	ShortFactor []float64 `json:"short_factor,omitempty"`
	LongFactor  []float64 `json:"long_factor,omitempty"`
	// AttentionFactor (longrope, yarn) multiplies cos and sin; 0 means
	// derived from the factor (see ropeMagnitude and yarnMagnitude).
	AttentionFactor float64 `json:"attention_factor,omitempty"`
	// BetaFast and BetaSlow (yarn) are the rotations over the original
	// context that bound YaRN's ramp (0: 32 and 1); NoTruncate keeps the
	// ramp's ends unrounded (config.json "truncate": false).
	BetaFast   float64 `json:"beta_fast,omitempty"`
	BetaSlow   float64 `json:"beta_slow,omitempty"`
	NoTruncate bool    `json:"no_truncate,omitempty"`
	// Mscale and MscaleAllDim (yarn, DeepSeek's configs) give the
	// attention factor as a ratio (see yarnMagnitude).
	Mscale       float64 `json:"mscale,omitempty"`
	MscaleAllDim float64 `json:"mscale_all_dim,omitempty"`
}

// LongRopeFactors reports whether longrope uses LongFactor: when the
// context the graph is built for (RopeContext, else Context) exceeds
// OriginalMaxPosition. Otherwise ShortFactor applies. Hugging Face decides
// per forward pass from the current sequence length, so it agrees for
// sequences on the same side of OriginalMaxPosition; llama.cpp decides
// once from its context size, as here.
func (c *Config) LongRopeFactors() bool {
	ctx := c.RopeContext
	if ctx <= 0 {
		ctx = c.Context
	}
	return ctx > c.RopeScaling.OriginalMaxPosition
}

// MaxContext is the most positions the model serves: Context, or, for
// dynamic and YaRN scaling, the original context (OriginalMaxPosition,
// else Context, as both read it) times the factor when that is more, and
// so for linear scaling when the original context is given (without one,
// a linear config's Context is the scaled context already, as Gemma 3's
// is). Llama 3 and longrope configs give the extended context as Context.
func (c *Config) MaxContext() int {
	s := c.RopeScaling
	o := s.OriginalMaxPosition
	switch {
	case s.Type == "dynamic", s.Type == "yarn":
	case s.Type == "linear" && o > 0:
	default:
		return c.Context
	}
	if o <= 0 {
		o = c.Context
	}
	n := float64(o) * s.Factor
	if !(n > float64(c.Context)) {
		return c.Context
	}
	return int(min(n, 1<<24))
}

// Validate checks the config for values a graph cannot be built from, by
// its family's rule (RWKV-7 has no attention, so no rope or key/value
// heads to check).
func (c *Config) Validate() error {
	if f := familyByName(c.Family); f != nil && f.validate != nil {
		return f.validate(c)
	}
	return c.validateDecoder()
}

// validateDecoder checks the fields of the shared decoder.
func (c *Config) validateDecoder() error {
	pos := []struct {
		name string
		v    int
	}{{"hidden size", c.Hidden}, {"feed-forward size", c.FFN}, {"layer count", c.Layers},
		{"head count", c.Heads}, {"key/value head count", c.KVHeads}, {"head size", c.HeadDim},
		{"vocabulary size", c.Vocab}, {"context length", c.Context}}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s config: %s is %d, must be positive", c.Family, p.name, p.v)
		}
		if p.v > 1<<24 {
			return fmt.Errorf("%s config: %s %d is implausibly large", c.Family, p.name, p.v)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("%s config: %d heads is not a multiple of %d key/value heads", c.Family, c.Heads, c.KVHeads)
	}
	r := c.rotDim()
	if r%2 != 0 || r > c.HeadDim || r <= 0 {
		return fmt.Errorf("%s config: rotary size %d does not fit head size %d", c.Family, r, c.HeadDim)
	}
	if c.RopeTheta <= 0 {
		return fmt.Errorf("%s config: rope theta %v must be positive", c.Family, c.RopeTheta)
	}
	if c.RopeContext < 0 || c.RopeContext > 1<<24 {
		return fmt.Errorf("%s config: rope context %d out of range", c.Family, c.RopeContext)
	}
	if c.RopeScaling.Type == "longrope" {
		if err := c.checkLongRope(); err != nil {
			return fmt.Errorf("%s config: %w", c.Family, err)
		}
	}
	if c.RopeScaling.Type == "yarn" {
		if err := c.checkYarn(); err != nil {
			return fmt.Errorf("%s config: %w", c.Family, err)
		}
	}
	if len(c.RopeSections) > 0 {
		sum := 0
		for _, n := range c.RopeSections {
			if n <= 0 || n > r {
				return fmt.Errorf("%s config: rope sections %v must be positive", c.Family, c.RopeSections)
			}
			sum += n
		}
		if sum != r/2 {
			return fmt.Errorf("%s config: rope sections %v add up to %d, want %d (half the rotary size)", c.Family, c.RopeSections, sum, r/2)
		}
	}
	if n := len(c.RopeFreqFactors); n != 0 && n != r/2 {
		return fmt.Errorf("%s config: %d rope frequency factors for rotary size %d", c.Family, n, r)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"attention scale", c.AttnScale}, {"embedding scale", c.EmbedScale},
		{"residual scale", c.ResidualScale}, {"logit scale", c.LogitScale}} {
		if m.v < 0 || math.IsNaN(m.v) || math.IsInf(m.v, 0) || m.v > 1e6 || (m.v != 0 && m.v < 1e-6) {
			return fmt.Errorf("%s config: %s %v out of range", c.Family, m.name, m.v)
		}
	}
	for _, l := range c.NoRopeLayers {
		if l < 0 || l >= c.Layers {
			return fmt.Errorf("%s config: layer %d without rotary embedding does not exist", c.Family, l)
		}
	}
	if err := c.validateSliding(); err != nil {
		return err
	}
	if !(c.NormEps > 0 && c.NormEps < 1) {
		return fmt.Errorf("%s config: norm epsilon %v out of range", c.Family, c.NormEps)
	}
	return nil
}

func (c *Config) rotDim() int {
	if c.RotaryDim > 0 {
		return c.RotaryDim
	}
	return c.HeadDim
}

// validateSliding checks the norm offset and the sliding-window layers.
func (c *Config) validateSliding() error {
	if c.NormOffset < 0 || c.NormOffset > 1 || math.IsNaN(c.NormOffset) {
		return fmt.Errorf("%s config: norm offset %v out of range", c.Family, c.NormOffset)
	}
	if n := len(c.DenseOut); n > 0 && c.DenseOut[n-1] != c.Hidden {
		return fmt.Errorf("%s config: the dense projections end with %d values, not the hidden size %d", c.Family, c.DenseOut[n-1], c.Hidden)
	}
	for _, n := range c.DenseOut {
		if n < 1 || n > 1<<20 {
			return fmt.Errorf("%s config: a dense projection of %d outputs", c.Family, n)
		}
	}
	if len(c.SlidingLayers) > 0 && c.SlidingWindow <= 0 {
		return fmt.Errorf("%s config: sliding window %d must be positive", c.Family, c.SlidingWindow)
	}
	for _, l := range c.SlidingLayers {
		if l < 0 || l >= c.Layers {
			return fmt.Errorf("%s config: sliding-window layer %d does not exist", c.Family, l)
		}
	}
	if c.LocalRopeTheta < 0 || math.IsNaN(c.LocalRopeTheta) || math.IsInf(c.LocalRopeTheta, 0) {
		return fmt.Errorf("%s config: local rope theta %v must be positive", c.Family, c.LocalRopeTheta)
	}
	return nil
}
