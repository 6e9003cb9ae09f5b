package safetensors

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestRealLlamaFixture opens the hand-written llama fixture folder and checks
// its tensors against config.json and against llama.cpp's GGUF conversion
// of the same weights (norms, embeddings and the un-permuted projections
// are stored unchanged there).
func TestRealLlamaFixture(t *testing.T) {
	dir := filepath.Dir(testutil.Path(t, "arch/llama/model.safetensors"))
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Format() != "safetensors" {
		t.Errorf("Format() = %q", c.Format())
	}
	m := c.Metadata()
	hidden, _ := format.MetaInt(m, "hidden_size")
	inter, _ := format.MetaInt(m, "intermediate_size")
	layers, _ := format.MetaInt(m, "num_hidden_layers")
	heads, _ := format.MetaInt(m, "num_attention_heads")
	kv, _ := format.MetaInt(m, "num_key_value_heads")
	vocab, _ := format.MetaInt(m, "vocab_size")
	hd, _ := format.MetaInt(m, "head_dim")
	if hidden != 64 || inter != 160 || layers != 3 || heads != 4 || kv != 2 || vocab != 384 || hd != 16 {
		t.Fatalf("config: hidden %d inter %d layers %d heads %d kv %d vocab %d head_dim %d", hidden, inter, layers, heads, kv, vocab, hd)
	}
	if tied, _ := m["tie_word_embeddings"].(bool); !tied {
		t.Errorf("tie_word_embeddings = %v, want true", m["tie_word_embeddings"])
	}
	stm, _ := m["safetensors.metadata"].(map[string]any)
	if stm["format"] != "pt" {
		t.Errorf("safetensors.metadata = %v, want format=pt", stm)
	}
	if n := len(c.Tensors()); n != int(2+9*layers) {
		t.Errorf("%d tensors, want %d", n, 2+9*layers)
	}
	want := map[string][]int64{
		"model.embed_tokens.weight":                      {vocab, hidden},
		"model.norm.weight":                              {hidden},
		"model.layers.2.self_attn.q_proj.weight":         {heads * hd, hidden},
		"model.layers.2.self_attn.k_proj.weight":         {kv * hd, hidden},
		"model.layers.1.self_attn.o_proj.weight":         {hidden, heads * hd},
		"model.layers.0.mlp.down_proj.weight":            {hidden, inter},
		"model.layers.0.mlp.gate_proj.weight":            {inter, hidden},
		"model.layers.0.post_attention_layernorm.weight": {hidden},
	}
	for name, shape := range want {
		ti, ok := format.Find(c, name)
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if !equalShape(ti.Shape, shape) || ti.DType != tensor.F32 {
			t.Errorf("%s: %v %v, want f32 %v", name, ti.DType, ti.Shape, shape)
		}
	}
	if _, ok := format.Find(c, "lm_head.weight"); ok {
		t.Error("tied model lists lm_head.weight")
	}
	var prevEnd int64
	for _, ti := range c.Tensors() {
		if ti.Offset < prevEnd {
			t.Errorf("%s: offset %d before previous end %d: not in file order", ti.Name, ti.Offset, prevEnd)
		}
		prevEnd = ti.Offset + ti.Size
	}

	gg, err := ggufF32(testutil.ReadFile(t, "arch/llama/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]string{
		"model.embed_tokens.weight":                      "token_embd.weight",
		"model.norm.weight":                              "output_norm.weight",
		"model.layers.0.input_layernorm.weight":          "blk.0.attn_norm.weight",
		"model.layers.2.post_attention_layernorm.weight": "blk.2.ffn_norm.weight",
		"model.layers.1.self_attn.v_proj.weight":         "blk.1.attn_v.weight",
		"model.layers.1.self_attn.o_proj.weight":         "blk.1.attn_output.weight",
		"model.layers.0.mlp.down_proj.weight":            "blk.0.ffn_down.weight",
		"model.layers.2.mlp.up_proj.weight":              "blk.2.ffn_up.weight",
	}
	for st, gname := range pairs {
		a, err := c.ReadFloat32(st)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := gg[gname]
		if !ok {
			t.Fatalf("gguf has no F32 %s", gname)
		}
		if !bitEqual(a, b) {
			t.Errorf("%s differs from GGUF %s", st, gname)
		}
	}
}

// TestMmapMatchesReaderAt reads every tensor of a real file through the
// memory-mapped path and through OpenReader on the same bytes.
func TestMmapMatchesReaderAt(t *testing.T) {
	path := testutil.Path(t, "arch/qwen2/model.safetensors")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenReader(bytes.NewReader(raw), int64(len(raw)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tensors()) != len(b.Tensors()) || len(a.Tensors()) == 0 {
		t.Fatalf("%d vs %d tensors", len(a.Tensors()), len(b.Tensors()))
	}
	for _, ti := range a.Tensors() {
		x, err1 := a.ReadFloat32(ti.Name)
		y, err2 := b.ReadFloat32(ti.Name)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bitEqual(x, y) || int64(len(x)) != ti.NumElements() {
			t.Errorf("%s: mmap and ReadAt differ", ti.Name)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadFloat32(a.Tensors()[0].Name); err == nil {
		t.Error("read after Close succeeded")
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func bitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
