package arch

import (
	"math"
	"slices"
	"testing"
)

// TestGraniteHybridFixture checks the granitehybrid fixture (Mamba2 and
// attention layers, NoPE, Granite multipliers) against llama.cpp from both
// sources within the README's 1e-3.
func TestGraniteHybridFixture(t *testing.T) {
	checkArchFixture(t, "granitehybrid", 1e-3)
}

// TestGraniteHybridSplitPrefill feeds the reference tokens to the
// interpreter in chunks (split_prefill's k, then 1 and 7) and checks
// every row against llama.cpp's one-call logits; the second part alone
// must miss the last row (README: by 0.021), so the Mamba2 state is what
// carries it.
func TestGraniteHybridSplitPrefill(t *testing.T) {
	checkArchSplitPrefill(t, archSplitCase{family: "granitehybrid", sources: []string{"arch/granitehybrid", "arch/granitehybrid/model.gguf"},
		chunks: []int{1, 7}, tol: 1e-3, alone: 5e-3, carrier: "state"})
}

// TestGraniteHybridConfig checks the fields read from config.json and
// from GGUF metadata, and refusals naming the field at fault.
func TestGraniteHybridConfig(t *testing.T) {
	f := familyNamed(t, "granitehybrid")
	c, err := f.configHF(fixtureConfig(t, "granitehybrid"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.check(&c); err != nil {
		t.Fatal(err)
	}
	want := MambaConfig{Layers: []int{0, 1, 3, 4}, Heads: 8, HeadDim: 16, State: 16, Groups: 1, Kernel: 4, ConvBias: true}
	check := func(what string, c Config) {
		t.Helper()
		mc := c.Mamba
		if mc == nil || !slices.Equal(mc.Layers, want.Layers) || mc.Heads != want.Heads || mc.HeadDim != want.HeadDim ||
			mc.State != want.State || mc.Groups != want.Groups || mc.Kernel != want.Kernel || mc.ConvBias != want.ConvBias {
			t.Errorf("%s: mamba %+v, want %+v", what, mc, want)
		}
		if c.FFN != 128 || c.KVHeads != 2 || c.HeadDim != 16 || len(c.NoRopeLayers) != 6 || c.EmbedScale != 12 ||
			c.AttnScale != 0.125 || math.Abs(c.ResidualScale-0.22) > 1e-7 || c.LogitScale != 8 || !c.Tied {
			t.Errorf("%s: config %+v", what, c)
		}
	}
	check("config.json", c)
	check("gguf", ggufFixtureConfig(t, "granitehybrid"))

	m := fixtureConfig(t, "granitehybrid")
	m["position_embedding_type"] = "rope"
	if c, err := f.configHF(m); err != nil || len(c.NoRopeLayers) != 0 {
		t.Errorf("position_embedding_type rope: no-rope layers %v, %v; want none", c.NoRopeLayers, err)
	}
	m = fixtureConfig(t, "granitehybrid")
	m["mamba_conv_bias"] = false
	if c, err := f.configHF(m); err != nil || c.Mamba.ConvBias {
		t.Errorf("mamba_conv_bias false: %+v, %v", c.Mamba, err)
	}
	m = fixtureConfig(t, "granitehybrid")
	for _, k := range []string{"layer_types", "shared_intermediate_size", "attention_multiplier"} {
		delete(m, k)
	}
	if c, err := f.configHF(m); err != nil || len(c.Mamba.Layers) != 6 || c.FFN != 1024 || c.AttnScale != 1 {
		t.Errorf("HF defaults: mamba layers %v, FFN %d, attention scale %v, %v; want all 6, 1024, 1", c.Mamba.Layers, c.FFN, c.AttnScale, err)
	}
	checkArchHFRefusals(t, "granitehybrid", f.check, []archKeyRefusal{
		{"experts", func(m map[string]any) { m["num_local_experts"] = 4.0 }},
		{"mamba_proj_bias", func(m map[string]any) { m["mamba_proj_bias"] = true }},
		{"layer_types[1]", func(m map[string]any) { m["layer_types"].([]any)[1] = "conv" }},
		{"layer_types", func(m map[string]any) { m["layer_types"] = []any{"mamba"} }},
		{"num_local_experts", func(m map[string]any) { delete(m, "num_local_experts") }},
		{"position_embedding_type", func(m map[string]any) { m["position_embedding_type"] = "alibi" }},
		{"mamba_expand", func(m map[string]any) { m["mamba_n_heads"] = 6.0 }},
		{"mamba_d_state", func(m map[string]any) { m["mamba_d_state"] = "big" }},
		{"groups", func(m map[string]any) { m["mamba_n_groups"] = 2.0 }},
		{"kernel", func(m map[string]any) { m["mamba_d_conv"] = 1.0 }},
	})
}

// TestGraniteHybridConfigGGUFRefused checks that GGUF metadata a
// granitehybrid graph cannot be built from is refused with an error
// naming the key.
func TestGraniteHybridConfigGGUFRefused(t *testing.T) {
	const a = "granitehybrid."
	checkArchGGUFRefusals(t, "granitehybrid", graniteHybridConfigGGUF, []archKeyRefusal{
		{"head_count_kv", func(m map[string]any) {
			m[a+"attention.head_count_kv"] = []any{int64(0), int64(0), int64(2), int64(0), int64(0), int64(1)}
		}},
		{"head_count_kv[1]", func(m map[string]any) {
			m[a+"attention.head_count_kv"] = []any{int64(0), int64(-1), int64(2), int64(0), int64(0), int64(2)}
		}},
		{"6 layers", func(m map[string]any) { m[a+"attention.head_count_kv"] = []any{int64(0), int64(2)} }},
		{"per-layer list", func(m map[string]any) { m[a+"attention.head_count_kv"] = int64(2) }},
		{"ssm.state_size", func(m map[string]any) { delete(m, a+"ssm.state_size") }},
		{"ssm.inner_size", func(m map[string]any) { m[a+"ssm.inner_size"] = int64(100) }},
		{"kernel", func(m map[string]any) { m[a+"ssm.conv_kernel"] = int64(1) }},
		{"groups", func(m map[string]any) { m[a+"ssm.group_count"] = int64(3) }},
		{"experts", func(m map[string]any) { m[a+"expert_count"] = int64(4) }},
	})
}

// FuzzGraniteHybridConfig feeds config.json documents to the
// granitehybrid reader; a config that reads and validates must build
// without panicking.
func FuzzGraniteHybridConfig(f *testing.F) {
	fuzzArchConfig(f, "granitehybrid", graniteHybridConfigHF, func(c *Config) bool {
		mc := c.Mamba
		return c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 || c.FFN*c.Hidden > 1<<20 ||
			mc.convCols()*(c.Hidden+mc.Kernel) > 1<<20 || mc.inner()*mc.State > 1<<20
	},
		`{"hidden_size":64,"intermediate_size":8,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":2,"layer_types":["mamba","mamba"],"mamba_n_heads":4,"mamba_d_state":2,"mamba_d_conv":2,"mamba_conv_bias":false}`,
		`{"hidden_size":8,"shared_intermediate_size":4,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":3,"layer_types":["attention"],"position_embedding_type":"rope","mamba_n_heads":2,"mamba_d_head":"auto","mamba_expand":1}`)
}

// TestGraniteHybridTraps checks that the fixture sees each trap: RoPE on
// the attention layers, no convolution bias, or no residual multiplier
// move the logits well past the tolerance.
func TestGraniteHybridTraps(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"rope", func(c *Config) { c.NoRopeLayers = nil }},
		{"no conv bias", func(c *Config) { c.Mamba.ConvBias = false }},
		{"no residual multiplier", func(c *Config) { c.ResidualScale = 1 }},
	} {
		d := fixtureDiff(t, "granitehybrid", false, c.mut)
		t.Logf("%s: max |logit diff| %.3g", c.name, d)
		if d < 5e-3 {
			t.Errorf("%s: logits within %.3g of llama.cpp's: the fixture does not see it", c.name, d)
		}
	}
}
