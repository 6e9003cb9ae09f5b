package arch

import (
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
)

// TestLFM2Fixture checks the lfm2 fixture against llama.cpp from both
// sources within the README's 1e-3.
func TestLFM2Fixture(t *testing.T) {
	checkArchFixture(t, "lfm2", 1e-3)
}

// TestLFM2SplitPrefill feeds the reference tokens to the interpreter in
// two calls (k from reference.json's split_prefill, then chunks of 1 and
// 5) and checks each row against llama.cpp's one-call logits; the second
// part alone, on a fresh state, must miss them (README: by 8.6), which
// shows the convolution state carries across calls.
func TestLFM2SplitPrefill(t *testing.T) {
	checkArchSplitPrefill(t, archSplitCase{family: "lfm2", sources: []string{"arch/lfm2"}, chunks: []int{1, 5},
		tol: 1e-3, alone: 0.1, carrier: "state"})
}

// TestLFM2Config checks the fields read from config.json and from GGUF
// metadata, the feed-forward width rule, and refusals.
func TestLFM2Config(t *testing.T) {
	f := familyNamed(t, "lfm2")
	c, err := f.configHF(fixtureConfig(t, "lfm2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.FFN != 128 || !slices.Equal(c.ShortConv.Layers, []int{0, 1, 3, 5}) || c.ShortConv.Kernel != 3 ||
		!c.Tied || c.NormEps != 1e-5 || c.RopeTheta != 1e6 || !c.QKNorm || c.RopeStyle != graph.RopeHalf {
		t.Errorf("config %+v (short conv %+v)", c, c.ShortConv)
	}
	for _, w := range []struct {
		ff, mult int
		fmult    float64
		want     int
	}{{192, 32, 1, 128}, {192, 256, 1, 256}, {12288, 256, 1, 8192}, {6656, 256, 1, 4608}, {300, 64, 1.5, 320}, {200, 32, 1, 160}} {
		m := map[string]any{"block_multiple_of": float64(w.mult), "block_ffn_dim_multiplier": w.fmult}
		got, err := lfm2FFN(m, w.ff)
		if err != nil || got != w.want {
			t.Errorf("ff %d multiple %d multiplier %v: %d, %v; want %d", w.ff, w.mult, w.fmult, got, err, w.want)
		}
	}
	if got, _ := lfm2FFN(map[string]any{"block_auto_adjust_ff_dim": false}, 192); got != 192 {
		t.Errorf("without auto-adjust: width %d, want 192", got)
	}
	if got, _ := lfm2FFN(map[string]any{"block_ffn_dim_multiplier": nil, "block_multiple_of": 32.0}, 200); got != 133 {
		t.Errorf("with a null multiplier: width %d, want 133 (no rounding)", got)
	}
	if got, _ := lfm2FFN(map[string]any{"block_multiple_of": 32.0}, 200); got != 160 {
		t.Errorf("without a multiplier key: width %d, want 160 (multiplier 1, rounded)", got)
	}
	for _, r := range []struct {
		keys map[string]any
		want float64
	}{{map[string]any{}, 1e6}, {map[string]any{"theta": 5e5, "rope_theta": 7.0}, 5e5},
		{map[string]any{"rope_parameters": map[string]any{"rope_theta": 2e6, "rope_type": "default"}}, 2e6}} {
		if got, err := lfm2RopeTheta(r.keys); err != nil || got != r.want {
			t.Errorf("rope theta of %v: %v, %v; want %v", r.keys, got, err, r.want)
		}
	}
	m := fixtureConfig(t, "lfm2")
	m["tie_embedding"], m["tie_word_embeddings"] = false, true
	if c, err := f.configHF(m); err != nil || c.Tied {
		t.Errorf("tie_embedding false beside tie_word_embeddings true: tied %v, %v; want untied", c.Tied, err)
	}
	m = fixtureConfig(t, "lfm2")
	delete(m, "layer_types")
	c, err = f.configHF(m)
	if err != nil || !slices.Equal(c.ShortConv.Layers, []int{0, 1, 3, 5}) {
		t.Errorf("from full_attn_idxs: %v, %v", c.ShortConv, err)
	}
	delete(m, "full_attn_idxs")
	if c, err = f.configHF(m); err != nil || len(c.ShortConv.Layers) != 0 {
		t.Errorf("without layer kinds: %v, %v; want every layer attending (HF's default)", c.ShortConv, err)
	}
	checkArchHFRefusals(t, "lfm2", (*Config).Validate, []archKeyRefusal{
		{"conv_bias", func(m map[string]any) { m["conv_bias"] = true }},
		{"layer_types[2]", func(m map[string]any) { m["layer_types"].([]any)[2] = "sliding_attention" }},
		{"layer_types", func(m map[string]any) { m["layer_types"] = []any{"conv"} }},
		{"full_attn_idxs", func(m map[string]any) { delete(m, "layer_types"); m["full_attn_idxs"] = []any{9.0} }},
		{"block_multiple_of", func(m map[string]any) { m["block_multiple_of"] = 0.0 }},
		{"norm_eps", func(m map[string]any) { m["norm_eps"] = "small" }},
		{"kernel", func(m map[string]any) { m["conv_L_cache"] = 1.0 }},
		{"rope_type", func(m map[string]any) {
			delete(m, "rope_theta")
			m["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e6}
		}},
		{"theta", func(m map[string]any) { m["theta"] = "big" }},
	})

	g := ggufFixtureConfig(t, "lfm2")
	if g.FFN != c.FFN || g.KVHeads != 2 || !slices.Equal(g.ShortConv.Layers, []int{0, 1, 3, 5}) || g.ShortConv.Kernel != 3 || !g.Tied {
		t.Errorf("gguf config %+v (short conv %+v)", g, g.ShortConv)
	}
}

// TestLFM2ConfigGGUFRefused checks that GGUF metadata an lfm2 graph cannot
// be built from is refused with an error naming the key.
func TestLFM2ConfigGGUFRefused(t *testing.T) {
	checkArchGGUFRefusals(t, "lfm2", lfm2ConfigGGUF, []archKeyRefusal{
		{"head_count_kv", func(m map[string]any) {
			m["lfm2.attention.head_count_kv"] = []any{int64(0), int64(0), int64(2), int64(0), int64(1), int64(0)}
		}},
		{"head_count_kv[1]", func(m map[string]any) {
			m["lfm2.attention.head_count_kv"] = []any{int64(0), int64(-1), int64(2), int64(0), int64(2), int64(0)}
		}},
		{"6 layers", func(m map[string]any) { m["lfm2.attention.head_count_kv"] = []any{int64(0), int64(2)} }},
		{"l_cache", func(m map[string]any) { delete(m, "lfm2.shortconv.l_cache") }},
		{"kernel", func(m map[string]any) { m["lfm2.shortconv.l_cache"] = int64(1) }},
	})
}

// FuzzLFM2Config feeds config.json documents to the lfm2 reader; a config
// that reads and validates must build without panicking.
func FuzzLFM2Config(f *testing.F) {
	fuzzArchConfig(f, "lfm2", lfm2ConfigHF, func(c *Config) bool {
		return c.Layers*c.Hidden > 1<<16 || c.Vocab*c.Hidden > 1<<20 || c.FFN*c.Hidden > 1<<20 || c.ShortConv.Kernel*c.Hidden > 1<<16
	},
		`{"hidden_size":64,"block_ff_dim":9,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":2,"full_attn_idxs":[1],"conv_L_cache":2}`,
		`{"hidden_size":64,"intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":2,"layer_types":["conv"],"block_multiple_of":1e9}`)
}
