package arch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// openFixture resolves a fixture checkpoint (HF folder or model.gguf).
func openFixture(t *testing.T, rel string) format.Checkpoint {
	t.Helper()
	ck, err := detect.Open(testutil.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// TestGemmaConfigs reads the gemma and gemma3 fixtures from config.json
// and from llama.cpp's GGUF and checks the values the README lists: gain
// offset 1 for HF weights and 0 for GGUF ones (the converter adds the 1),
// embeddings * sqrt(64) = 8, head_dim 32, tied; for gemma3 local layers
// 0-4 and 6 with window 8, local base 1e4, linear factor 8 on the global
// layer, and scale 24^-0.5 from HF but 1/sqrt(32) from the GGUF (whose q
// norms were rescaled to match).
func TestGemmaConfigs(t *testing.T) {
	for _, c := range []struct {
		rel        string
		offset     float64
		attnScale  float64
		wantFamily string
	}{
		{"arch/gemma", 1, 0, "gemma"},
		{"arch/gemma/model.gguf", 0, 0, "gemma"},
		{"arch/gemma3", 1, 1 / math.Sqrt(24), "gemma3"},
		{"arch/gemma3/model.gguf", 0, 0, "gemma3"},
	} {
		cfg, f, err := ConfigOf(openFixture(t, c.rel))
		if err != nil {
			t.Fatalf("%s: %v", c.rel, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", c.rel, err)
		}
		if f.Name != c.wantFamily || cfg.NormOffset != c.offset || !cfg.GELU || cfg.EmbedScale != 8 ||
			cfg.HeadDim != 32 || !cfg.Tied || cfg.RopeStyle != graph.RopeHalf || cfg.AttnScale != c.attnScale {
			t.Errorf("%s: family %s config %+v", c.rel, f.Name, cfg)
		}
		if f.Name != "gemma3" {
			if cfg.QKNorm || cfg.SandwichNorms || len(cfg.SlidingLayers) != 0 {
				t.Errorf("%s: gemma with gemma3 features %+v", c.rel, cfg)
			}
			continue
		}
		if !cfg.QKNorm || !cfg.SandwichNorms || cfg.SlidingWindow != 8 || cfg.LocalRopeTheta != 1e4 ||
			cfg.RopeTheta != 1e6 || cfg.RopeScaling.Type != "linear" || cfg.RopeScaling.Factor != 8 ||
			!slices.Equal(cfg.SlidingLayers, []int{0, 1, 2, 3, 4, 6}) {
			t.Errorf("%s: config %+v", c.rel, cfg)
		}
	}
}

// TestGemmaEmbedScaleRounding checks HF's rounding of sqrt(hidden) to the
// checkpoint dtype: sqrt(2048) = 45.2548... is 45.25 in bfloat16 and
// float16 (8 and 11 significant bits), and stays unrounded in float32.
func TestGemmaEmbedScaleRounding(t *testing.T) {
	v := math.Sqrt(2048)
	for dtype, want := range map[string]float64{"bfloat16": 45.25, "float16": 45.25, "float32": float64(float32(v))} {
		if got := roundToDType(v, dtype); got != want {
			t.Errorf("%s: %v, want %v", dtype, got, want)
		}
	}
	if got := roundToDType(math.Sqrt(3072), "bfloat16"); got != 55.5 {
		t.Errorf("bfloat16 sqrt(3072) = %v, want 55.5", got)
	}
}

// TestGemmaConfigsRefused checks config values the gemma graphs cannot
// honour are refused with an error naming them.
func TestGemmaConfigsRefused(t *testing.T) {
	for _, c := range []struct {
		family, want string
		mut          func(m map[string]any)
	}{
		{"gemma", "hidden_activation", func(m map[string]any) { m["hidden_activation"] = "gelu" }},
		{"gemma", "attention_bias", func(m map[string]any) { m["attention_bias"] = true }},
		{"gemma3", "final_logit_softcapping", func(m map[string]any) { m["final_logit_softcapping"] = 30.0 }},
		{"gemma3", "attn_logit_softcapping", func(m map[string]any) { m["attn_logit_softcapping"] = 50.0 }},
		{"gemma3", "layer_types has 2", func(m map[string]any) { m["layer_types"] = []any{"full_attention", "full_attention"} }},
		{"gemma3", "layer_types[0]", func(m map[string]any) {
			m["layer_types"] = []any{"global", "full_attention", "full_attention", "full_attention",
				"full_attention", "full_attention", "full_attention"}
		}},
		{"gemma3", "sliding_window_pattern", func(m map[string]any) {
			delete(m, "layer_types")
			m["sliding_window_pattern"] = 0.0
		}},
		{"gemma3", "query_pre_attn_scalar", func(m map[string]any) { m["query_pre_attn_scalar"] = -24.0 }},
		{"gemma3", "sliding window", func(m map[string]any) { m["sliding_window"] = 0.0 }},
		{"gemma3", "local rope theta", func(m map[string]any) { m["rope_local_base_freq"] = -1.0 }},
		{"gemma3", "rope_scaling type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "ntk-by-parts"} }},
		{"gemma3", "yarn", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0, "beta_fast": -1.0}
		}},
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

// FuzzGemmaConfig feeds config.json documents to the gemma readers and
// the same keys as GGUF metadata; whatever reads and validates must build.
func FuzzGemmaConfig(f *testing.F) {
	for _, fam := range []string{"gemma", "gemma3"} {
		f.Add(testutil.ReadFile(f, "arch/"+fam+"/config.json"))
	}
	f.Add([]byte(`{"hidden_size":64,"intermediate_size":8,"num_hidden_layers":3,"num_attention_heads":2,"vocab_size":4,"layer_types":["sliding_attention",null,7]}`))
	f.Add([]byte(`{"hidden_size":64,"intermediate_size":8,"num_hidden_layers":2,"num_attention_heads":2,"vocab_size":4,"sliding_window":-3,"query_pre_attn_scalar":1e308}`))
	f.Add([]byte(`{"gemma3.embedding_length":64,"gemma3.feed_forward_length":8,"gemma3.block_count":62,"gemma3.attention.head_count":0,"gemma3.attention.sliding_window":-1,"gemma3.rope.freq_base_swa":-5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		for _, name := range []string{"gemma", "gemma3"} {
			fam := familyNamed(t, name)
			hf, err1 := fam.configHF(m)
			gg, err2 := fam.configGGUF(m, name)
			for _, c := range []struct {
				c   Config
				err error
			}{{hf, err1}, {gg, err2}} {
				if c.err != nil || c.c.Validate() != nil {
					continue
				}
				if c.c.Layers*c.c.Hidden > 1<<16 || c.c.Vocab*c.c.Hidden > 1<<20 || c.c.FFN*c.c.Hidden > 1<<20 {
					continue // valid but too large to build cheaply
				}
				_, _ = fam.build(&c.c, BuildOptions{})
			}
		}
	})
}
