package main

import (
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
)

// TestCodegenShape writes a small shape of the codegen layout and opens it
// as aotlm does: the codegen family with the shape's sizes, every weight
// the graph needs present with its shape.
func TestCodegenShape(t *testing.T) {
	s := shape{arch: "codegen", hidden: 64, layers: 2, ffn: 256, heads: 8, kvHeads: 8, headDm: 8, vocab: 300, rotary: 4}
	dir := t.TempDir()
	if err := writeCodegen(dir, s, 1); err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.Family != "codegen" || c.Hidden != 64 || c.Layers != 2 || c.FFN != 256 || c.Heads != 8 || c.RotaryDim != 4 || c.Vocab != 300 || c.Tied ||
		c.QKVShards != 4 {
		t.Errorf("config %+v", c)
	}
	if w := m.Weights["transformer.h.1.ln_1.weight"]; len(w) != 64 || w[0] != 1 {
		t.Errorf("ln_1 gain %v, want 64 ones", w[:min(len(w), 4)])
	}
	if b := m.Weights["lm_head.bias"]; len(b) != 300 || b[0] != 0 {
		t.Errorf("lm_head bias of %d values, want 300 zeros", len(b))
	}
}
