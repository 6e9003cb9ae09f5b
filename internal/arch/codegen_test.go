package arch

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// codegenTol is the fixture README's comparison: float32 against its
// float64 reference within 2e-4 (the erf GELU in place of gelu_new moves
// the logits by 8e-4).
const codegenTol = 2e-4

// TestCodegenFixture checks the codegen2 fixture (no GGUF: llama.cpp has
// no CodeGen converter) against its float64 transcription of HF's code
// within 2e-4, and that the traps it names move the logits: NeoX pairs in
// place of GPT-J's interleaved ones (README: 1.2), RoPE on the whole head
// (0.91), no attention scale (2.2).
func TestCodegenFixture(t *testing.T) {
	checkArchFixture(t, "codegen2", codegenTol)
	for _, c := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"half pairs", func(c *Config) { c.RopeStyle = graph.RopeHalf }},
		{"whole-head rotary", func(c *Config) { c.RotaryDim = c.HeadDim }},
		{"no attention scale", func(c *Config) { c.AttnScale = 1 }},
	} {
		d := fixtureDiff(t, "codegen2", false, c.mut)
		t.Logf("%s: max |logit diff| %.3g", c.name, d)
		if d < 0.1 {
			t.Errorf("%s moves the logits by only %.3g: the trap is not exercised", c.name, d)
		}
	}
}

// TestCodegenConfigHF reads the fixture's config.json (README: 8 heads of
// 8, rotary_dim 4, n_inner null so an MLP of 4·64, untied) and CodeGen's
// defaults where a key is absent or null.
func TestCodegenConfigHF(t *testing.T) {
	c, err := codegenConfigHF(fixtureConfig(t, "codegen2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Family != "codegen" || c.Hidden != 64 || c.Layers != 3 || c.Heads != 8 || c.KVHeads != 8 || c.HeadDim != 8 || c.QKVShards != 4 ||
		c.RotaryDim != 4 || c.FFN != 256 || c.Vocab != 384 || c.Context != 512 || c.NormEps != 1e-5 ||
		c.RopeStyle != graph.RopeInterleaved || c.RopeTheta != 10000 || c.Tied || c.BOS != 1 || len(c.EOS) != 1 || c.EOS[0] != 2 {
		t.Errorf("config %+v", c)
	}
	m := fixtureConfig(t, "codegen2")
	m["rotary_dim"] = nil
	m["n_inner"] = 100.0
	delete(m, "layer_norm_epsilon")
	if c, err = codegenConfigHF(m); err != nil || c.RotaryDim != 0 || c.FFN != 100 || c.NormEps != 1e-5 {
		t.Errorf("null rotary_dim, n_inner 100: rotary %d, MLP %d, eps %v, %v; want the whole head, 100, 1e-5", c.RotaryDim, c.FFN, c.NormEps, err)
	}
	m = fixtureConfig(t, "codegen2")
	m["n_embd"], m["n_head"] = 2048.0, 16.0
	delete(m, "rotary_dim")
	if c, err = codegenConfigHF(m); err != nil || c.RotaryDim != 64 || c.HeadDim != 128 || c.QKVShards != 4 {
		t.Errorf("absent rotary_dim: rotary %d of head %d, %d shards, %v; want CodeGenConfig's 64 of 128 and HF's 4 shards",
			c.RotaryDim, c.HeadDim, c.QKVShards, err)
	}
	// CodeGen2-1B's config.json has head_dim 128 (3.7B: 256): its own
	// modeling code splits qkv_proj into 8 shards
	for _, sz := range []struct{ embd, heads, headDim, shards float64 }{{2048, 16, 128, 8}, {4096, 16, 256, 8}, {1024, 16, 64, 4}} {
		m = fixtureConfig(t, "codegen2")
		m["n_embd"], m["n_head"], m["head_dim"] = sz.embd, sz.heads, sz.headDim
		c, err = codegenConfigHF(m)
		if err == nil {
			err = c.Validate()
		}
		if err != nil || c.QKVShards != int(sz.shards) {
			t.Errorf("head_dim %v: %d shards, %v; want %v", sz.headDim, c.QKVShards, err, sz.shards)
		}
	}
}

// TestCodegenConfigRefused checks config.json values the graph cannot
// build from are refused naming them.
func TestCodegenConfigRefused(t *testing.T) {
	for _, r := range []archKeyRefusal{
		{"activation_function", func(m map[string]any) { m["activation_function"] = "gelu" }},
		{"activation_function", func(m map[string]any) { m["activation_function"] = 1.0 }},
		{"qkv_proj shards", func(m map[string]any) { m["n_head"], m["n_embd"] = 6.0, 48.0 }},
		{"not n_head", func(m map[string]any) { m["n_embd"] = 60.0 }},
		{"rotary size", func(m map[string]any) { m["rotary_dim"] = 10.0 }},
		{"rotary size", func(m map[string]any) { m["rotary_dim"] = 3.0 }},
		{"rotary_dim", func(m map[string]any) { m["rotary_dim"] = 0.0 }},
		{"feed-forward size", func(m map[string]any) { m["n_inner"] = 0.0 }},
		{"head_dim", func(m map[string]any) { m["head_dim"] = 16.0 }},
		{"head_dim", func(m map[string]any) { m["head_dim"] = "8" }},
		{"qkv_proj shards", func(m map[string]any) { m["n_embd"], m["n_head"], m["head_dim"] = 1024.0, 4.0, 256.0 }},
		{"n_embd", func(m map[string]any) { m["n_embd"] = "wide" }},
		{"n_layer", func(m map[string]any) { delete(m, "n_layer") }},
		{"rope_scaling", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear", "factor": 2.0} }},
		{"num_key_value_heads", func(m map[string]any) { m["num_key_value_heads"] = 2.0 }},
	} {
		m := fixtureConfig(t, "codegen2") // the codegen family's fixture
		r.mut(m)
		c, err := codegenConfigHF(m)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("got %v, want an error naming %s", err, r.want)
		}
	}
}

// TestCodegenQKVRows checks the qkv_proj reordering against the README's
// rule, written per row, for 4 and 8 shards S: the q row of (head h,
// dim e) is s·3D/S + j·E + e with s = h / (H/S), j = h mod (H/S); v adds
// D/S, k adds 2D/S; the output is [q | k | v] with rows h·E + e.
func TestCodegenQKVRows(t *testing.T) {
	for _, sz := range []struct{ heads, headDim, shards int }{{4, 2, 4}, {8, 3, 4}, {16, 1, 4}, {8, 2, 8}, {16, 3, 8}} {
		d := sz.heads * sz.headDim
		w := make([]float32, 3*d*d)
		for i := range w {
			w[i] = float32(i)
		}
		got := codegenQKVRows(w, d, sz.shards)
		per := sz.heads / sz.shards
		for part, add := range []int{0, 2 * d / sz.shards, d / sz.shards} { // q, k, v
			for h := range sz.heads {
				for e := range sz.headDim {
					src := (h/per)*3*d/sz.shards + (h%per)*sz.headDim + e + add
					dst := part*d + h*sz.headDim + e
					for col := range d {
						if got[dst*d+col] != w[src*d+col] {
							t.Fatalf("%d heads of %d in %d shards: part %d head %d dim %d: row %d holds %v, want row %d",
								sz.heads, sz.headDim, sz.shards, part, h, e, dst, got[dst*d+col], src)
						}
					}
				}
			}
		}
	}
	c, err := codegenConfigHF(fixtureConfig(t, "codegen2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codegenConvert(&c, "transformer.h.0.attn.qkv_proj.weight", make([]float32, 10)); err == nil || !strings.Contains(err.Error(), "qkv_proj") {
		t.Errorf("a qkv_proj of the wrong size: %v", err)
	}
	v := []float32{1, 2, 3}
	if got, err := codegenConvert(&c, "transformer.h.0.mlp.fc_in.bias", v); err != nil || &got[0] != &v[0] {
		t.Errorf("another weight was changed: %v", err)
	}
}

// TestCodegenGraph checks the block's shape: one LayerNorm per layer
// feeding both the qkv and fc_in linears (parallel residual, no second
// norm), biases on fc_in, fc_out and lm_head, none on qkv and out_proj.
func TestCodegenGraph(t *testing.T) {
	c, err := codegenConfigHF(fixtureConfig(t, "codegen2"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(&c, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	norms, bias := 0, map[string]string{}
	for _, n := range g.Nodes {
		switch n.Op {
		case op.LayerNorm:
			norms++
		case op.RMSNorm:
			t.Errorf("an RMSNorm %s", n.Weight)
		case op.Linear:
			bias[n.Weight] = n.Bias
			if strings.HasSuffix(n.Weight, "qkv_proj.weight") || strings.HasSuffix(n.Weight, "fc_in.weight") {
				if in := g.Nodes[n.In[0]]; in.Op != op.LayerNorm || !strings.HasSuffix(in.Weight, "ln_1.weight") {
					t.Errorf("%s reads %v %s, want ln_1", n.Weight, in.Op, in.Weight)
				}
			}
		}
	}
	if norms != c.Layers+1 {
		t.Errorf("%d LayerNorms, want one per layer and ln_f", norms)
	}
	for w, b := range map[string]string{
		"transformer.h.2.attn.qkv_proj.weight": "", "transformer.h.2.attn.out_proj.weight": "",
		"transformer.h.2.mlp.fc_in.weight": "transformer.h.2.mlp.fc_in.bias", "transformer.h.2.mlp.fc_out.weight": "transformer.h.2.mlp.fc_out.bias",
		"lm_head.weight": "lm_head.bias",
	} {
		if got, ok := bias[w]; !ok || got != b {
			t.Errorf("%s: bias %q (linear present %v), want %q", w, got, ok, b)
		}
	}
}

// FuzzCodegenConfig feeds config.json documents to the codegen reader; a
// config that reads and validates must build without panicking.
func FuzzCodegenConfig(f *testing.F) {
	fuzzArchConfig(f, "codegen2", codegenConfigHF, func(c *Config) bool {
		return c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 || c.FFN*c.Hidden > 1<<20
	},
		`{"n_embd":8,"n_layer":1,"n_head":4,"vocab_size":3,"rotary_dim":null,"n_inner":1}`,
		`{"n_embd":12,"n_layer":1,"n_head":4,"vocab_size":3,"rotary_dim":2,"tie_word_embeddings":true}`)
}
