package main

import (
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
)

// TestCodegenShape writes small shapes of the codegen layout and opens
// them as aotlm does: the codegen family with the shape's sizes, every
// weight the graph needs present with its shape, and the qkv_proj shards
// its head_dim implies (8 for CodeGen2-1B's 128).
func TestCodegenShape(t *testing.T) {
	for _, c := range []struct {
		s      shape
		shards int
	}{
		{shape{arch: "codegen", hidden: 64, layers: 2, ffn: 256, heads: 8, kvHeads: 8, headDm: 8, vocab: 300, rotary: 4}, 4},
		{shape{arch: "codegen", hidden: 1024, layers: 1, ffn: 64, heads: 8, kvHeads: 8, headDm: 128, vocab: 300, rotary: 64}, 8},
	} {
		s := c.s
		dir := t.TempDir()
		if err := writeCodegen(dir, s, 1); err != nil {
			t.Fatal(err)
		}
		ck, err := detect.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := arch.Load(ck)
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		cfg := m.Config
		if cfg.Family != "codegen" || cfg.Hidden != s.hidden || cfg.Layers != s.layers || cfg.FFN != s.ffn || cfg.Heads != s.heads ||
			cfg.RotaryDim != s.rotary || cfg.Vocab != s.vocab || cfg.Tied || cfg.QKVShards != c.shards {
			t.Errorf("config %+v, want %d shards", cfg, c.shards)
		}
		if w := m.Weights["transformer.h.0.ln_1.weight"]; len(w) != s.hidden || w[0] != 1 {
			t.Errorf("ln_1 gain %v, want %d ones", w[:min(len(w), 4)], s.hidden)
		}
		if b := m.Weights["lm_head.bias"]; len(b) != s.vocab || b[0] != 0 {
			t.Errorf("lm_head bias of %d values, want %d zeros", len(b), s.vocab)
		}
	}
}
