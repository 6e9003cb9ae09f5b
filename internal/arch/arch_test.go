package arch

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
)

func goodConfig() Config {
	return Config{Family: "llama", Hidden: 64, FFN: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 100, Context: 64, NormEps: 1e-5, RopeTheta: 10000}
}

func TestValidate(t *testing.T) {
	if err := (&Config{}).Validate(); err == nil {
		t.Fatal("zero config accepted")
	}
	c := goodConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Config){
		"head count":       func(c *Config) { c.Heads = 0 },
		"multiple":         func(c *Config) { c.KVHeads = 3 },
		"rotary":           func(c *Config) { c.RotaryDim = 17 },
		"theta":            func(c *Config) { c.RopeTheta = 0 },
		"epsilon":          func(c *Config) { c.NormEps = 0 },
		"implausibly":      func(c *Config) { c.Vocab = 1 << 30 },
		"frequency factor": func(c *Config) { c.RopeFreqFactors = []float32{1} },
	}
	for want, mutate := range bad {
		c := goodConfig()
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

// TestLlama3Frequencies checks the three branches of Llama 3 scaling
// against the published rule on a hand-picked set of wavelengths.
func TestLlama3Frequencies(t *testing.T) {
	c := goodConfig()
	c.RopeTheta = 500000
	c.RopeScaling = RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPosition: 64}
	f, err := ropeFreqs(&c)
	if err != nil {
		t.Fatal(err)
	}
	branches := map[string]int{}
	for i, got := range f {
		base := math.Pow(500000, -float64(2*i)/16)
		wave := 2 * math.Pi / base
		var want float64
		switch {
		case wave < 16:
			want, branches["high"] = base, branches["high"]+1
		case wave > 64:
			want, branches["low"] = base/8, branches["low"]+1
		default:
			s := (64/wave - 1) / 3
			want, branches["mid"] = (1-s)*base/8+s*base, branches["mid"]+1
		}
		if math.Abs(got-want) > 1e-15*math.Max(1, want) {
			t.Errorf("freq %d: %v, want %v", i, got, want)
		}
	}
	if len(branches) != 3 {
		t.Errorf("test frequencies hit branches %v, want all three", branches)
	}
	c.RopeScaling.Type = "yarn-ish"
	if _, err := ropeFreqs(&c); err == nil {
		t.Error("unknown scaling accepted")
	}
}

func TestUnknownArchitecture(t *testing.T) {
	_, err := familyByHF([]string{"MambaForCausalLM"}, "mamba")
	var ue *UnknownArchitectureError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "MambaForCausalLM") || !strings.Contains(err.Error(), "llama") {
		t.Fatalf("got %v", err)
	}
	if _, err := familyByGGUF("bloom"); err == nil {
		t.Fatal("unknown gguf arch accepted")
	}
}

func TestTensorNames(t *testing.T) {
	cases := map[string][2]string{
		"model.layers.3.self_attn.q_proj.weight": {"blk.3.attn_q.weight", "layers.3.attention.wq.weight"},
		"model.layers.12.mlp.up_proj.weight":     {"blk.12.ffn_up.weight", "layers.12.feed_forward.w3.weight"},
		"model.embed_tokens.weight":              {"token_embd.weight", "tok_embeddings.weight"},
	}
	for hf, want := range cases {
		g, ok1 := llamaTensorName("gguf", hf)
		l, ok2 := llamaTensorName("llama2c", hf)
		if !ok1 || !ok2 || g != want[0] || l != want[1] {
			t.Errorf("%s -> %q %q", hf, g, l)
		}
	}
	if _, ok := llamaTensorName("gguf", "model.layers.x.mlp.up_proj.weight"); ok {
		t.Error("non-numeric layer mapped")
	}
}

func TestBuildGraphShapes(t *testing.T) {
	c := goodConfig()
	c.RopeStyle = graph.RopeHalf
	g, err := Build(&c, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Layers != 2 || g.KVCols != 32 {
		t.Fatalf("layers %d kv cols %d", g.Layers, g.KVCols)
	}
	if s := g.Weights["model.layers.1.self_attn.k_proj.weight"]; len(s) != 2 || s[0] != 32 || s[1] != 64 {
		t.Fatalf("k_proj shape %v", s)
	}
	if _, ok := g.Weights["lm_head.weight"]; !ok {
		t.Fatal("untied model without lm_head")
	}
	c.Tied = true
	g, _ = Build(&c, BuildOptions{})
	if _, ok := g.Weights["lm_head.weight"]; ok {
		t.Fatal("tied model declares lm_head")
	}
}
