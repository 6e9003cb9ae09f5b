package arch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/testutil"
)

func familyNamed(t testing.TB, name string) *Family {
	for _, f := range families {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no family %q", name)
	return nil
}

// fixtureConfig reads a fixture's config.json as a metadata map.
func fixtureConfig(t testing.TB, family string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+family+"/config.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFamilyConfigsHF reads each fixture's config.json and checks the
// fields that distinguish the family (values from the fixture README).
func TestFamilyConfigsHF(t *testing.T) {
	for _, c := range []struct {
		family string
		check  func(c Config) bool
	}{
		{"qwen2", func(c Config) bool { return c.QKVBias && c.RopeStyle == graph.RopeHalf && c.HeadDim == 24 && !c.Tied }},
		{"qwen3", func(c Config) bool { return c.QKNorm && !c.QKVBias && c.HeadDim == 32 && c.Hidden == 64 }},
		{"smollm3", func(c Config) bool { return slices.Equal(c.NoRopeLayers, []int{3}) && c.Tied }},
		{"granite", func(c Config) bool {
			return c.EmbedScale == 12 && c.AttnScale == 0.0625 && c.ResidualScale == 0.22 && c.LogitScale == 8 && c.HeadDim == 16
		}},
	} {
		f := familyNamed(t, c.family)
		cfg, err := f.configHF(fixtureConfig(t, c.family))
		if err != nil {
			t.Fatalf("%s: %v", c.family, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", c.family, err)
		}
		if !c.check(cfg) {
			t.Errorf("%s: config %+v", c.family, cfg)
		}
	}
}

// TestFamilyConfigsRefused checks config.json values a family cannot
// build from are refused with an error naming them.
func TestFamilyConfigsRefused(t *testing.T) {
	for _, c := range []struct {
		family, want string
		mut          func(m map[string]any)
	}{
		{"qwen3", "attention_bias", func(m map[string]any) { m["attention_bias"] = true }},
		{"smollm3", "no_rope_layers", func(m map[string]any) { m["no_rope_layers"] = []any{1.0, 1.0} }},
		{"smollm3", "no_rope_layers[1]", func(m map[string]any) { m["no_rope_layers"] = []any{1.0, 2.0, 1.0, 0.0} }},
		{"smollm3", "no_rope_layer_interval", func(m map[string]any) {
			delete(m, "no_rope_layers")
			m["no_rope_layer_interval"] = 0.0
		}},
		{"granite", "residual scale", func(m map[string]any) { m["residual_multiplier"] = -1.0 }},
		{"granite", "attention scale", func(m map[string]any) { m["attention_multiplier"] = 1e300 }},
		{"qwen2", "hidden_size", func(m map[string]any) { m["hidden_size"] = "wide" }},
	} {
		m := fixtureConfig(t, c.family)
		c.mut(m)
		cfg, err := familyNamed(t, c.family).configHF(m)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", c.family, err, c.want)
		}
	}
}

func TestSmolLM3DefaultInterval(t *testing.T) {
	m := fixtureConfig(t, "smollm3")
	delete(m, "no_rope_layers")
	m["num_hidden_layers"] = 9.0
	c, err := smollm3ConfigHF(m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.NoRopeLayers, []int{3, 7}) {
		t.Fatalf("layers without rope %v, want [3 7]", c.NoRopeLayers)
	}
}

func TestDecoderTensorNames(t *testing.T) {
	for hf, want := range map[string]string{
		"model.layers.2.self_attn.q_norm.weight": "blk.2.attn_q_norm.weight",
		"model.layers.0.self_attn.k_norm.weight": "blk.0.attn_k_norm.weight",
		"model.layers.1.self_attn.v_proj.bias":   "blk.1.attn_v.bias",
		"model.norm.weight":                      "output_norm.weight",
	} {
		if got, ok := decoderTensorName("gguf", hf); !ok || got != want {
			t.Errorf("%s -> %q, want %q", hf, got, want)
		}
	}
	if _, ok := decoderTensorName("llama2c", "model.norm.weight"); ok {
		t.Error("llama2c names mapped for a family llama2.c cannot hold")
	}
}

// TestDecoderGraphVariants checks the nodes each config variation adds.
func TestDecoderGraphVariants(t *testing.T) {
	count := func(g *graph.Graph, want op.Op) int {
		n := 0
		for _, nd := range g.Nodes {
			if nd.Op == want {
				n++
			}
		}
		return n
	}
	c := goodConfig()
	c.QKNorm, c.QKVBias, c.NoRopeLayers = true, true, []int{1}
	g, err := Build(&c, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if count(g, op.HeadRMSNorm) != 4 || count(g, op.RoPE) != 2 {
		t.Errorf("head norms %d, ropes %d; want 4 and 2", count(g, op.HeadRMSNorm), count(g, op.RoPE))
	}
	if s := g.Weights["model.layers.1.self_attn.k_norm.weight"]; !slices.Equal(s, []int{16}) {
		t.Errorf("k_norm shape %v", s)
	}
	if s := g.Weights["model.layers.0.self_attn.q_proj.bias"]; !slices.Equal(s, []int{64}) {
		t.Errorf("q bias shape %v", s)
	}
	c = goodConfig()
	c.EmbedScale, c.ResidualScale, c.LogitScale, c.AttnScale = 12, 0.22, 8, 0.0625
	g, _ = Build(&c, BuildOptions{})
	if n := count(g, op.Scale); n != 2+2*c.Layers {
		t.Errorf("%d scale nodes, want %d", n, 2+2*c.Layers)
	}
	if out := g.Nodes[g.Output]; out.Op != op.Scale || out.Scale != 0.125 {
		t.Errorf("output node %v scale %v, want logits / 8", out.Op, out.Scale)
	}
	for _, nd := range g.Nodes {
		if nd.Op == op.Attention && nd.Attn.Scale != 0.0625 {
			t.Errorf("attention scale %v", nd.Attn.Scale)
		}
	}
}

// FuzzConfigHF feeds config.json documents to every family's reader; a
// config that reads and validates must build without panicking.
func FuzzConfigHF(f *testing.F) {
	for _, fam := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "qwen35"} {
		f.Add(testutil.ReadFile(f, "arch/"+fam+"/config.json"))
	}
	f.Add([]byte(`{"hidden_size":64,"intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":2,"head_dim":0}`))
	f.Add([]byte(`{"hidden_size":64,"intermediate_size":1,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":2,"no_rope_layers":[0,9]}`))
	f.Add([]byte(`{"hidden_size":1e30,"num_hidden_layers":-1,"attention_multiplier":-0.0,"logits_scaling":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		for _, fam := range families {
			c, err := fam.configHF(m)
			if err != nil || c.Validate() != nil {
				continue
			}
			if c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 {
				continue // valid but too large to build cheaply
			}
			_, _ = fam.build(&c, BuildOptions{})
		}
	})
}
