package arch

import (
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// The CodeGen family (Salesforce CodeGen and CodeGen2, HF
// CodeGenForCausalLM, model_type "codegen"): a GPT-J block. Per layer one
// LayerNorm with a bias (ln_1) feeds attention and the MLP in parallel,
// and both add to the residual: x + out_proj(attn(h)) + fc_out(gelu(fc_in(h)))
// with h = ln_1(x). The MLP (width n_inner, 4·n_embd when null) has biases,
// its activation is the tanh-approximated GELU (gelu_new); attention has
// no biases, a final ln_f precedes lm_head, which has a bias.
//
// Traps:
//   - qkv_proj's 3·n_embd rows are S model-parallel shards (mp_num, fixed
//     in the modeling code, not in config.json), each [q | v | k] of
//     n_embd/S rows; global head h is head h mod (n_head/S) of shard
//     h / (n_head/S). Reading the weight reorders its rows to plain
//     [q | k | v] (codegenConvert), so the graph splits it with columns.
//     S is 4 in HF's CodeGen; CodeGen2-1B and 3.7B were trained with 8
//     (their own modeling code), and their config.json is the one with a
//     head_dim key, of 128 or 256 (codegenShardsOf).
//   - RoPE is GPT-J's: interleaved pairs (x[2i], x[2i+1]) on the first
//     rotary_dim dimensions of each head (the rest pass through), at
//     pos·10000^(-2i/rotary_dim); a null rotary_dim rotates the whole head.
//   - q·k is divided by sqrt(head_dim); no embedding scale.
//
// Only Hugging Face folders exist for it (llama.cpp has no converter), and
// the graph names its weights with their HF names.

// codegenShardsOf returns the number of qkv_proj shards of a CodeGen
// config.json: 8 when it has a head_dim key of 128 or 256 (CodeGen2-1B
// and 3.7B, whose modeling code splits qkv_proj into 8 shards; HF's
// CodeGenConfig has no such key), else 4, HF CodeGen's mp_num. A head_dim
// that is not n_embd/n_head is refused.
func codegenShardsOf(m map[string]any, c *Config) (int, error) {
	v, ok := m["head_dim"]
	if !ok || v == nil {
		return 4, nil
	}
	hd, ok := format.MetaInt(m, "head_dim")
	if !ok || int(hd) != c.HeadDim || c.Hidden != c.Heads*c.HeadDim {
		return 0, fmt.Errorf("config.json: \"head_dim\" is %s; n_embd %d / n_head %d is %d", show(v), c.Hidden, c.Heads, c.HeadDim)
	}
	if hd == 128 || hd == 256 {
		return 8, nil
	}
	return 4, nil
}

func init() {
	register(&Family{
		Name:            "codegen",
		HFArchitectures: []string{"CodeGenForCausalLM"},
		HFModelTypes:    []string{"codegen"},
		configHF:        codegenConfigHF,
		tensorNames:     codegenTensorName,
		build:           buildCodegen,
		validate:        validateCodegen,
		convert:         codegenConvert,
	})
}

// codegenActivations are the activation_function values that name the
// tanh-approximated GELU (the same function, written differently).
var codegenActivations = []string{"gelu_new", "gelu_fast", "gelu_pytorch_tanh"}

// codegenConfigHF reads CodeGenConfig's keys (n_embd, n_layer, n_head,
// n_inner, n_positions, rotary_dim, layer_norm_epsilon,
// activation_function) with its defaults where a key is absent.
func codegenConfigHF(m map[string]any) (Config, error) {
	c := Config{Family: "codegen", Source: "hf", RopeStyle: graph.RopeInterleaved, RopeTheta: 10000, BOS: -1, GELU: true}
	var err error
	get := func(key string, def int) int {
		if err != nil {
			return 0
		}
		v, ok := format.MetaInt(m, key)
		if !ok {
			if x, present := m[key]; (present && x != nil) || def < 0 {
				err = fmt.Errorf("config.json: %q is missing or not an integer", key)
			}
			return def
		}
		return int(v)
	}
	c.Hidden = get("n_embd", -1)
	c.Layers = get("n_layer", -1)
	c.Heads = get("n_head", -1)
	c.Vocab = get("vocab_size", -1)
	c.Context = get("n_positions", 2048)
	c.FFN = get("n_inner", 4*c.Hidden) // null: 4·n_embd
	rot := get("rotary_dim", 0)
	if err != nil {
		return c, err
	}
	c.KVHeads = c.Heads
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.QKVShards, err = codegenShardsOf(m, &c); err != nil {
		return c, err
	}
	if v, ok := m["rotary_dim"]; !ok || v != nil {
		// CodeGenConfig's default is 64; null rotates the whole head
		if !ok {
			rot = 64
		}
		if rot <= 0 {
			return c, fmt.Errorf("config.json: rotary_dim %d must be positive", rot)
		}
		c.RotaryDim = rot
	}
	c.NormEps = floatOr(m, "layer_norm_epsilon", 1e-5)
	if v, ok := m["activation_function"]; ok && v != nil {
		s, _ := v.(string)
		known := false
		for _, a := range codegenActivations {
			known = known || s == a
		}
		if !known {
			return c, fmt.Errorf("config.json: \"activation_function\" is %s; the codegen family computes the tanh-approximated gelu (%s)",
				show(v), strings.Join(codegenActivations, ", "))
		}
	}
	for _, k := range []string{"rope_scaling", "rope_theta", "partial_rotary_factor", "num_key_value_heads"} {
		if v, ok := m[k]; ok && v != nil {
			return c, fmt.Errorf("config.json: %q is set; CodeGen's attention does not read it", k)
		}
	}
	if b, ok := m["tie_word_embeddings"].(bool); ok {
		c.Tied = b
	}
	if v, ok := format.MetaInt(m, "bos_token_id"); ok {
		c.BOS = int(v)
	}
	c.EOS = intList(m["eos_token_id"])
	return c, nil
}

// validateCodegen checks the decoder's fields and the shape CodeGen's
// attention needs: n_embd = n_head·head_dim, one key/value head per head,
// and heads that fill the 4 or 8 qkv shards evenly.
func validateCodegen(c *Config) error {
	if err := c.validateDecoder(); err != nil {
		return err
	}
	switch {
	case c.Hidden != c.Heads*c.HeadDim:
		return fmt.Errorf("codegen config: n_embd %d is not n_head %d times a head size", c.Hidden, c.Heads)
	case c.KVHeads != c.Heads:
		return fmt.Errorf("codegen config: %d key/value heads for %d heads; CodeGen has one per head", c.KVHeads, c.Heads)
	case c.QKVShards != 4 && c.QKVShards != 8:
		return fmt.Errorf("codegen config: %d qkv_proj shards, want 4 or 8", c.QKVShards)
	case c.Heads%c.QKVShards != 0:
		return fmt.Errorf("codegen config: n_head %d is not a multiple of the %d qkv_proj shards", c.Heads, c.QKVShards)
	case c.RopeScaling.Type != "" || len(c.RopeSections) > 0 || c.QKVBias || c.QKNorm || c.FusedQKV || c.FusedGateUp ||
		len(c.NoRopeLayers) > 0 || len(c.SlidingLayers) > 0 || c.NormOffset != 0:
		return fmt.Errorf("codegen config: a decoder variation CodeGen's graph does not have is set")
	}
	return nil
}

// codegenTensorName maps the graph's (HF) names; only HF folders exist.
func codegenTensorName(source, name string) (string, bool) {
	if source == "hf" {
		return name, true
	}
	return "", false
}

// codegenConvert reorders the rows of every qkv_proj weight from
// CodeGen's shards of [q | v | k] to [q | k | v], each head-major; other
// weights are unchanged.
func codegenConvert(c *Config, name string, v []float32) ([]float32, error) {
	if !strings.HasSuffix(name, ".attn.qkv_proj.weight") {
		return v, nil
	}
	d := c.Hidden
	if c.QKVShards <= 0 || d%c.QKVShards != 0 {
		return nil, fmt.Errorf("qkv_proj of width %d in %d shards", d, c.QKVShards)
	}
	if len(v) != 3*d*d {
		return nil, fmt.Errorf("qkv_proj holds %d values, want 3·%d·%d", len(v), d, d)
	}
	return codegenQKVRows(v, d, c.QKVShards), nil
}

// codegenQKVRows returns the [3d, d] matrix w with its rows moved from
// CodeGen's order to [q | k | v]: shard s (of shards) holds rows
// [q_s | v_s | k_s], each d/shards rows, and q_s (k_s, v_s) are the rows
// of heads s·H/shards .. (s+1)·H/shards-1.
func codegenQKVRows(w []float32, d, shards int) []float32 {
	out := make([]float32, len(w))
	local := d / shards
	// part p of a shard in CodeGen's order goes to block dst[p] of the output
	dst := [3]int{0, 2, 1} // q, v, k -> q | k | v
	for s := range shards {
		for p := range 3 {
			from := (s*3 + p) * local * d
			to := (dst[p]*d + s*local) * d
			copy(out[to:to+local*d], w[from:from+local*d])
		}
	}
	return out
}

// buildCodegen returns the graph of a CodeGen model.
func buildCodegen(c *Config, opts BuildOptions) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	d, eps := c.Hidden, float32(c.NormEps)
	x := g.Embed(g.Tokens(), "transformer.wte.weight", c.Vocab, d)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("transformer.h.%d.", l)
		h := g.LayerNorm(x, p+"ln_1.weight", p+"ln_1.bias", eps)
		// both linears of h first: adjacent linears of one input, which
		// the engine runs as one dispatch
		qkv := g.Linear(h, p+"attn.qkv_proj.weight", 3*d, "")
		up := g.Linear(h, p+"mlp.fc_in.weight", c.FFN, p+"mlp.fc_in.bias")
		q, k, v := g.Columns(qkv, 0, d), g.Columns(qkv, d, 2*d), g.Columns(qkv, 2*d, 3*d)
		q, k = g.RoPE(q, rope), g.RoPE(k, rope)
		if c.RotateQK {
			b := op.HadamardBlock(c.HeadDim)
			q, k = g.Hadamard(q, b), g.Hadamard(k, b)
		}
		at := graph.Attn{Layer: l, Heads: c.Heads, KVHeads: c.Heads, HeadDim: c.HeadDim, Scale: float32(attnScaleOf(c))}
		o := g.Linear(g.Attention(q, k, v, at), p+"attn.out_proj.weight", d, "")
		mid := g.GELUTanh(up)
		if c.RotateDown {
			mid = g.Hadamard(mid, op.HadamardBlock(c.FFN))
		}
		m := g.Linear(mid, p+"mlp.fc_out.weight", d, p+"mlp.fc_out.bias")
		x = g.Add(g.Add(x, o), m)
	}
	x = g.LayerNorm(x, "transformer.ln_f.weight", "transformer.ln_f.bias", eps)
	if !opts.AllLogits {
		x = g.LastRow(x)
	}
	head := "lm_head.weight"
	if c.Tied {
		head = "transformer.wte.weight"
	}
	g.SetOutput(g.Linear(x, head, c.Vocab, "lm_head.bias"))
	return g, nil
}
