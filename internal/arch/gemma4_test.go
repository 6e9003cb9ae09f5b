package arch

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// gemma4Tol is the README's tolerance for the gemma families (llama.cpp's
// GELU goes through an fp16 table).
const gemma4Tol = 2e-2

// TestGemma4Fixture checks the gemma4 fixture against llama.cpp from both
// sources, and that the traps matter: with the soft cap, the partial
// rotation, the window or the sliding layers' base wrong the logits miss
// by far more.
func TestGemma4Fixture(t *testing.T) {
	checkArchFixture(t, "gemma4", gemma4Tol)
	for _, m := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"no soft cap", func(c *Config) { c.Gemma4.FinalSoftcap = 0 }},
		{"every rotary pair turning", func(c *Config) { c.Gemma4.GlobalRotaryPairs = c.Gemma4.GlobalHeadDim / 2 }},
		{"no sliding window", func(c *Config) { c.SlidingWindow = 1 << 20 }},
		{"sliding layers at the full base", func(c *Config) { c.LocalRopeTheta = c.RopeTheta }},
	} {
		t.Run(m.name, func(t *testing.T) {
			if d := fixtureDiff(t, "gemma4", false, m.mut); d < 0.1 {
				t.Errorf("logits within %.3g of llama.cpp: the trap is not exercised", d)
			}
		})
	}
}

// TestGemma4SplitPrefill feeds the reference tokens in two calls (k from
// split_prefill), then in chunks of 1 and 5, and checks every row; the
// second part alone, on a fresh state, must miss the last row.
func TestGemma4SplitPrefill(t *testing.T) {
	checkArchSplitPrefill(t, archSplitCase{family: "gemma4", sources: []string{"arch/gemma4", "arch/gemma4/model.gguf"},
		chunks: []int{1, 5}, tol: gemma4Tol, alone: 0.5, carrier: "cache"})
}

// TestGemma4Config checks the fields read from config.json and from the
// GGUF metadata, which must describe the same model, and refusals.
func TestGemma4Config(t *testing.T) {
	f := familyNamed(t, "gemma4")
	hf, err := f.configHF(fixtureConfig(t, "gemma4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.Validate(); err != nil {
		t.Fatal(err)
	}
	g := hf.Gemma4
	if hf.HeadDim != 16 || g.GlobalHeadDim != 32 || g.GlobalRotaryPairs != 4 || g.PerLayerDim != 16 ||
		g.SharedKVLayers != 4 || g.FinalSoftcap != 30 || !slices.Equal(hf.SlidingLayers, []int{0, 1, 2, 4, 5, 6}) ||
		!slices.Equal(g.LayerFFN, []int{96, 96, 96, 96, 192, 192, 192, 192}) || hf.RopeTheta != 1e6 ||
		hf.LocalRopeTheta != 1e4 || hf.EmbedScale != 8 || hf.NormOffset != 0 || !hf.Tied || hf.SlidingWindow != 8 {
		t.Errorf("config %+v (gemma4 %+v)", hf, g)
	}
	for l, want := range []int{0, 1, 2, 3, 2, 2, 2, 3} {
		if got := gemma4KVSource(&hf, l); got != want {
			t.Errorf("layer %d attends over layer %d's cache, want %d", l, got, want)
		}
	}
	gg := ggufFixtureConfig(t, "gemma4")
	if err := gg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gemma4GlobalRope(&hf).InvFreq[:4], gemma4GlobalRope(&gg).InvFreq[:4]) ||
		gg.HeadDim != hf.HeadDim || gg.Gemma4.GlobalHeadDim != g.GlobalHeadDim ||
		!slices.Equal(gg.SlidingLayers, hf.SlidingLayers) || !slices.Equal(gg.Gemma4.LayerFFN, g.LayerFFN) ||
		gg.Gemma4.SharedKVLayers != g.SharedKVLayers || gg.Gemma4.FinalSoftcap != g.FinalSoftcap ||
		gg.LocalRopeTheta != hf.LocalRopeTheta || gg.RopeTheta != hf.RopeTheta {
		t.Errorf("gguf config %+v (gemma4 %+v) differs from the HF one", gg, gg.Gemma4)
	}
	for _, r := range gemma4GlobalRope(&gg).InvFreq[4:] {
		if r > 1e-20 {
			t.Errorf("gguf: a pair past the fourth turns at %v", r)
		}
	}
	m := fixtureConfig(t, "gemma4")
	delete(m, "rope_parameters")
	m["rope_theta"], m["rope_local_base_freq"] = 5e5, 2e4
	if c, err := f.configHF(m); err != nil || c.RopeTheta != 5e5 || c.LocalRopeTheta != 2e4 || c.Gemma4.GlobalRotaryPairs != 16 {
		t.Errorf("without rope_parameters: theta %v, local %v, %d pairs, %v; want 5e5, 2e4, 16", c.RopeTheta, c.LocalRopeTheta, c.Gemma4.GlobalRotaryPairs, err)
	}
	for _, bad := range []struct {
		key  string
		v    any
		want string
	}{
		{"attention_k_eq_v", true, "attention_k_eq_v"},
		{"enable_moe_block", true, "enable_moe_block"},
		{"attn_logit_softcapping", 50.0, "attn_logit_softcapping"},
		{"num_global_key_value_heads", 2.0, "num_global_key_value_heads"},
		{"hidden_activation", "silu", "hidden_activation"},
		{"intermediate_size", []any{96.0, 96.0}, "intermediate_size"},
		{"hidden_size_per_layer_input", "16", "hidden_size_per_layer_input"},
		{"rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "yarn"}}, "rope_type"},
		{"rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "proportional", "partial_rotary_factor": 2.0}}, "partial_rotary_factor"},
		{"layer_types", []any{"sliding_attention"}, "layer_types"},
		{"rope_scaling", map[string]any{"rope_type": "linear", "factor": 8.0}, "rope_scaling"},
	} {
		m := fixtureConfig(t, "gemma4")
		m[bad.key] = bad.v
		_, err := f.configHF(m)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s = %v: error %v, want one naming %s", bad.key, bad.v, err, bad.want)
		}
	}
	for _, bad := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"all layers shared", func(c *Config) { c.Gemma4.SharedKVLayers = c.Layers }},
		{"no full layer before the shared ones", func(c *Config) { c.SlidingLayers = []int{0, 1, 2, 3, 4, 5, 6} }},
		{"odd full head", func(c *Config) { c.Gemma4.GlobalHeadDim = 31 }},
		{"no per-layer inputs", func(c *Config) { c.Gemma4.PerLayerDim = 0 }},
		{"short width list", func(c *Config) { c.Gemma4.LayerFFN = c.Gemma4.LayerFFN[:3] }},
		{"bad soft cap", func(c *Config) { c.Gemma4.FinalSoftcap = math.NaN() }},
		{"too many pairs", func(c *Config) { c.Gemma4.GlobalRotaryPairs = 17 }},
		{"fused q/k/v", func(c *Config) { c.FusedQKV = true }},
		{"missing sizes", func(c *Config) { c.Gemma4 = nil }},
	} {
		c := hf
		g := *hf.Gemma4
		c.Gemma4 = &g
		bad.mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: validated", bad.name)
		}
	}
}

// FuzzGemma4Config reads arbitrary config.json maps as Gemma 4: a config
// that reads and validates must build without panicking.
func FuzzGemma4Config(f *testing.F) {
	fuzzArchConfig(f, "gemma4", gemma4ConfigHF, func(c *Config) bool {
		big := c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 || c.Gemma4.PerLayerVocab*c.Layers*c.Gemma4.PerLayerDim > 1<<20
		for _, f := range c.Gemma4.LayerFFN {
			big = big || f*c.Hidden > 1<<20
		}
		return big
	},
		`{"hidden_size":8,"intermediate_size":[4,8],"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":2,"global_head_dim":4,"vocab_size":3,"hidden_size_per_layer_input":2,"num_kv_shared_layers":1,"use_double_wide_mlp":true,"layer_types":["full_attention","full_attention"]}`,
		`{"hidden_size":8,"intermediate_size":4,"num_hidden_layers":3,"num_attention_heads":2,"head_dim":2,"vocab_size":3,"hidden_size_per_layer_input":1,"num_kv_shared_layers":2,"layer_types":["sliding_attention","full_attention","sliding_attention"],"rope_parameters":{"full_attention":{"rope_type":"proportional","partial_rotary_factor":0.5}}}`)
}

// TestGemma4GGUFMetadata checks the GGUF reader on the fixture's metadata:
// a per-layer key/value head count that agrees is read, and metadata the
// graph cannot honour is refused naming the key.
func TestGemma4GGUFMetadata(t *testing.T) {
	f := familyNamed(t, "gemma4")
	meta := ggufFixtureMetadata(t, "gemma4")
	m := meta()
	m["gemma4.attention.head_count_kv"] = []any{1, 1, 1, 1, 1, 1, 1, 1}
	c, err := f.configGGUF(m, "gemma4")
	if err != nil || c.KVHeads != 1 {
		t.Errorf("per-layer key/value heads all 1: %d heads, %v", c.KVHeads, err)
	}
	for _, bad := range []struct {
		key  string
		v    any // nil: deleted
		want string
	}{
		{"gemma4.attention.head_count_kv", []any{1, 1, 1, 2, 1, 1, 1, 2}, "head_count_kv[3]"},
		{"gemma4.attention.sliding_window_pattern", nil, "sliding_window_pattern"},
		{"gemma4.attention.sliding_window_pattern", []any{true, false}, "sliding_window_pattern"},
		{"gemma4.attention.key_length_swa", nil, "key_length_swa"},
		{"gemma4.embedding_length_per_layer_input", nil, "embedding_length_per_layer_input"},
		{"gemma4.feed_forward_length", []any{96, 96}, "feed_forward_length"},
		{"gemma4.rope.dimension_count", 16, "rope.dimension_count"},
	} {
		m := meta()
		if bad.v == nil {
			delete(m, bad.key)
		} else {
			m[bad.key] = bad.v
		}
		_, err := f.configGGUF(m, "gemma4")
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s = %v: error %v, want one naming %s", bad.key, bad.v, err, bad.want)
		}
	}
}

// TestGemma4SharingMatters runs the fixture with the shared layers using
// their own k/v tensors (present in the checkpoint, unused by the model)
// instead of their source layers' cache: the logits must then miss
// llama.cpp's by far more than the tolerance, so the fixture exercises
// the sharing.
func TestGemma4SharingMatters(t *testing.T) {
	d := fixtureDiff(t, "gemma4", false, func(c *Config) {
		g4 := *c.Gemma4
		g4.SharedKVLayers = 0 // LayerFFN keeps the double-wide layers
		c.Gemma4 = &g4
	})
	t.Logf("shared layers with their own keys and values: max |logit diff| %.3g", d)
	if d < 0.5 {
		t.Errorf("with their own keys and values the shared layers give logits within %.3g of llama.cpp's", d)
	}
}
