package arch

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// TestGemma3Graph checks the local and global layers of the fixture's
// graph: windows, rope frequencies (local 1e4^(-2i/32) unscaled, global
// 1e6^(-2i/32)/8), four (1+w) norms per layer and GELU gates.
func TestGemma3Graph(t *testing.T) {
	c, err := gemma3ConfigHF(fixtureConfig(t, "gemma3"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(&c, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var windows []int
	var ropes []*graph.Rope
	norms, gelus := 0, 0
	for _, nd := range g.Nodes {
		switch nd.Op {
		case op.Attention:
			windows = append(windows, nd.Attn.Window)
			if math.Abs(float64(nd.Attn.Scale)-1/math.Sqrt(24)) > 1e-7 {
				t.Errorf("attention scale %v", nd.Attn.Scale)
			}
		case op.RoPE:
			ropes = append(ropes, nd.Rope)
		case op.RMSNorm, op.HeadRMSNorm:
			norms++
			if nd.Offset != 1 {
				t.Errorf("%s: gain offset %v", nd.Name, nd.Offset)
			}
		case op.GELUTanh:
			gelus++
		case op.SiLU:
			t.Error("SiLU in a gemma3 graph")
		}
	}
	if !slices.Equal(windows, []int{8, 8, 8, 8, 8, 0, 8}) {
		t.Errorf("windows %v", windows)
	}
	if want := 7*6 + 1; norms != want || gelus != 7 || len(ropes) != 14 {
		t.Errorf("%d norms (want %d), %d GELUs, %d ropes", norms, want, gelus, len(ropes))
	}
	for l := 0; l < 7; l++ {
		r := ropes[2*l]
		want0, want := 1.0, math.Pow(1e4, -2.0/32)
		if l == 5 {
			want0, want = 1.0/8, math.Pow(1e6, -2.0/32)/8
		}
		if math.Abs(r.InvFreq[1]-want) > 1e-12*want || r.InvFreq[0] != want0 {
			t.Errorf("layer %d: inv freq %v %v, want 1 (or 1/8) and %v", l, r.InvFreq[0], r.InvFreq[1], want)
		}
	}
	for _, name := range []string{"post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
		if s := g.Weights["model.layers.6."+name+".weight"]; !slices.Equal(s, []int{64}) {
			t.Errorf("%s shape %v", name, s)
		}
	}
}

func TestGemma3TensorNames(t *testing.T) {
	for hf, want := range map[string]string{
		"model.layers.5.post_attention_layernorm.weight":   "blk.5.post_attention_norm.weight",
		"model.layers.0.pre_feedforward_layernorm.weight":  "blk.0.ffn_norm.weight",
		"model.layers.6.post_feedforward_layernorm.weight": "blk.6.post_ffw_norm.weight",
		"model.layers.1.self_attn.q_norm.weight":           "blk.1.attn_q_norm.weight",
		"model.embed_tokens.weight":                        "token_embd.weight",
	} {
		if got, ok := gemma3TensorName("gguf", hf); !ok || got != want {
			t.Errorf("%s -> %q, want %q", hf, got, want)
		}
	}
	// gemma (1) keeps the Llama meaning of post_attention_layernorm
	if got, _ := decoderTensorName("gguf", "model.layers.0.post_attention_layernorm.weight"); got != "blk.0.ffn_norm.weight" {
		t.Errorf("gemma post_attention_layernorm -> %q", got)
	}
}

func TestGemma3DefaultPattern(t *testing.T) {
	m := fixtureConfig(t, "gemma3")
	delete(m, "layer_types")
	m["num_hidden_layers"] = 13.0
	c, err := gemma3ConfigHF(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12}; !slices.Equal(c.SlidingLayers, want) {
		t.Fatalf("sliding layers %v, want %v", c.SlidingLayers, want)
	}
}

// TestGemma3GGUFHostile checks GGUF metadata without the sliding window
// is refused naming the key, and llama.cpp's 62-layer scale rule.
func TestGemma3GGUFHostile(t *testing.T) {
	m := map[string]any{"gemma3.embedding_length": int64(64), "gemma3.feed_forward_length": int64(128),
		"gemma3.block_count": int64(62), "gemma3.attention.head_count": int64(4),
		"gemma3.attention.key_length": int64(32)}
	if _, err := gemma3ConfigGGUF(m, "gemma3"); err == nil || !strings.Contains(err.Error(), "gemma3.attention.sliding_window") {
		t.Fatalf("got %v, want an error naming gemma3.attention.sliding_window", err)
	}
	m["gemma3.attention.sliding_window"] = int64(16)
	c, err := gemma3ConfigGGUF(m, "gemma3")
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnScale != 0.25 || len(c.SlidingLayers) != 52 || c.LocalRopeTheta != 1e4 {
		t.Errorf("62 layers: scale %v (want 1/sqrt(64/4)), %d local layers, local theta %v", c.AttnScale, len(c.SlidingLayers), c.LocalRopeTheta)
	}
}

// missingTensor hides one tensor of a checkpoint.
type missingTensor struct {
	format.Checkpoint
	name string
}

func (m missingTensor) Tensors() []format.TensorInfo {
	return slices.DeleteFunc(m.Checkpoint.Tensors(), func(t format.TensorInfo) bool { return t.Name == m.name })
}

// TestGemma3MissingNorm checks a checkpoint without a sandwich norm is
// refused naming the tensor, from both sources.
func TestGemma3MissingNorm(t *testing.T) {
	for rel, name := range map[string]string{
		"arch/gemma3":            "model.layers.3.post_feedforward_layernorm.weight",
		"arch/gemma3/model.gguf": "blk.3.post_ffw_norm.weight",
	} {
		_, err := Load(missingTensor{openFixture(t, rel), name})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming %s", rel, err, name)
		}
	}
}
