package arch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGraniteHybridFixture checks the granitehybrid fixture (Mamba2 and
// attention layers, NoPE, Granite multipliers) against llama.cpp from both
// sources within the README's 1e-3.
func TestGraniteHybridFixture(t *testing.T) {
	for _, gguf := range []bool{false, true} {
		d := fixtureDiff(t, "granitehybrid", gguf, nil)
		t.Logf("gguf=%v: max |logit diff| %.3g", gguf, d)
		if d > 1e-3 {
			t.Errorf("gguf=%v: logits differ from llama.cpp by %.3g (tolerance 1e-3)", gguf, d)
		}
	}
}

// TestGraniteHybridSplitPrefill feeds the reference tokens to the
// interpreter in chunks (split_prefill's k, then 1 and 7) and checks
// every row against llama.cpp's one-call logits; the second part alone
// must miss the last row (README: by 0.021), so the Mamba2 state is what
// carries it.
func TestGraniteHybridSplitPrefill(t *testing.T) {
	var ref struct {
		Tokens []int       `json:"tokens"`
		Logits [][]float32 `json:"logits"`
		Split  struct {
			K    int       `json:"k"`
			Last []float32 `json:"logits_after_split"`
		} `json:"split_prefill"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/granitehybrid/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"arch/granitehybrid", "arch/granitehybrid/model.gguf"} {
		ck, err := detect.Open(testutil.Path(t, src))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		m, err := Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Build(&m.Config, BuildOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		in, err := graph.NewInterpreter(g, m.Weights, 2)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Config.Vocab
		for _, chunk := range []int{ref.Split.K, 1, 7} {
			st := in.NewState(len(ref.Tokens))
			var d float64
			for lo := 0; lo < len(ref.Tokens); {
				hi := min(lo+chunk, len(ref.Tokens))
				if chunk == ref.Split.K {
					hi = len(ref.Tokens)
					if lo == 0 {
						hi = ref.Split.K
					}
				}
				out, rows, err := in.Run(st, ref.Tokens[lo:hi])
				if err != nil {
					t.Fatal(err)
				}
				for r := range rows {
					for j, want := range ref.Logits[lo+r] {
						d = math.Max(d, math.Abs(float64(out[r*V+j]-want)))
					}
				}
				if hi == len(ref.Tokens) {
					for j, want := range ref.Split.Last {
						d = math.Max(d, math.Abs(float64(out[(rows-1)*V+j]-want)))
					}
				}
				lo = hi
			}
			t.Logf("%s, chunks of %d: max |logit diff| %.3g", src, chunk, d)
			if d > 1e-3 {
				t.Errorf("%s, chunks of %d: logits differ from llama.cpp by %.3g", src, chunk, d)
			}
		}
		out, rows, err := in.Run(in.NewState(len(ref.Tokens)), ref.Tokens[ref.Split.K:])
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for j, want := range ref.Split.Last {
			d = math.Max(d, math.Abs(float64(out[(rows-1)*V+j]-want)))
		}
		if d < 5e-3 {
			t.Errorf("%s: the second part alone gives the last logits within %.3g: the state is not what carries them", src, d)
		}
	}
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
	ck, err := detect.Open(testutil.Path(t, "arch/granitehybrid/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	gc, _, err := ConfigOf(ck)
	if err != nil {
		t.Fatal(err)
	}
	check("gguf", gc)

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
	for _, r := range []struct {
		want string
		mut  func(m map[string]any)
	}{
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
	} {
		m := fixtureConfig(t, "granitehybrid")
		r.mut(m)
		c, err := f.configHF(m)
		if err == nil {
			err = f.check(&c)
		}
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("got %v, want an error naming %s", err, r.want)
		}
	}
}

// TestGraniteHybridConfigGGUFRefused checks that GGUF metadata a
// granitehybrid graph cannot be built from is refused with an error
// naming the key.
func TestGraniteHybridConfigGGUFRefused(t *testing.T) {
	ck, err := detect.Open(testutil.Path(t, "arch/granitehybrid/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	const a = "granitehybrid."
	for _, c := range []struct {
		want string
		mut  func(m map[string]any)
	}{
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
	} {
		m := map[string]any{}
		for k, v := range ck.Metadata() {
			m[k] = v
		}
		c.mut(m)
		cfg, err := graniteHybridConfigGGUF(m, "granitehybrid")
		if err == nil {
			cfg.Vocab = 384 // ConfigOf takes it from token_embd.weight
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error naming %s", err, c.want)
		}
	}
}

// FuzzGraniteHybridConfig feeds config.json documents to the
// granitehybrid reader; a config that reads and validates must build
// without panicking.
func FuzzGraniteHybridConfig(f *testing.F) {
	f.Add(testutil.ReadFile(f, "arch/granitehybrid/config.json"))
	f.Add([]byte(`{"hidden_size":64,"intermediate_size":8,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":2,"layer_types":["mamba","mamba"],"mamba_n_heads":4,"mamba_d_state":2,"mamba_d_conv":2,"mamba_conv_bias":false}`))
	f.Add([]byte(`{"hidden_size":8,"shared_intermediate_size":4,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":3,"layer_types":["attention"],"position_embedding_type":"rope","mamba_n_heads":2,"mamba_d_head":"auto","mamba_expand":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		c, err := graniteHybridConfigHF(m)
		if err != nil || c.Validate() != nil {
			return
		}
		mc := c.Mamba
		if c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 || c.FFN*c.Hidden > 1<<20 ||
			mc.convCols()*(c.Hidden+mc.Kernel) > 1<<20 || mc.inner()*mc.State > 1<<20 {
			return // valid but too large to build cheaply
		}
		if _, err := Build(&c, BuildOptions{}); err != nil {
			t.Fatalf("a valid config does not build: %v", err)
		}
	})
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
