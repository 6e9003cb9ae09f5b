package main

import (
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/gguf"
)

// TestInternVLShape writes a small InternVL shape (the real layout,
// narrower) and loads the pair as aotlm loads llama.cpp's text and mmproj
// GGUFs: the vision sizes come back, every weight the encoder reads is
// there (LoadInternVLPair refuses a missing one), and the text vocabulary
// holds the image markers as control tokens.
func TestInternVLShape(t *testing.T) {
	s := shape{arch: "qwen2", hidden: 64, layers: 2, ffn: 128, heads: 4, kvHeads: 2, headDm: 16, vocab: 400, theta: 1e6,
		qkvBias: true, untied: true,
		vision: &visionShape{hidden: 32, layers: 3, ffn: 64, heads: 2, image: 64, patch: 8, scale: 2, maxTiles: 6}}
	dir := filepath.Join(t.TempDir(), "internvl")
	if err := writeVisionPair(dir, s, 1); err != nil {
		t.Fatal(err)
	}
	text, err := detect.Open(filepath.Join(dir, "text.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	mm, err := detect.Open(filepath.Join(dir, "mmproj.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	m, err := arch.LoadInternVLPair(text, mm)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Vision
	if v.Hidden != 32 || v.Layers != 3 || v.FFN != 64 || v.Heads != 2 || v.ImageSize != 64 || v.PatchSize != 8 || v.TextHidden != 64 || v.MaxTiles != 6 {
		t.Errorf("vision %+v differs from the shape", v)
	}
	if c := m.Text.Config; c.Family != "qwen2" || c.Hidden != 64 || c.Vocab != 400 || c.Tied {
		t.Errorf("text config %+v", c)
	}
	f, err := gguf.Open(filepath.Join(dir, "text.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	toks, _ := f.Value("tokenizer.ggml.tokens")
	types, _ := f.Value("tokenizer.ggml.token_type")
	tl, tt := toks.([]string), types.([]int32)
	for _, piece := range visionMarkers {
		found := false
		for i, tok := range tl {
			if tok == piece {
				found = tt[i] == 3
			}
		}
		if !found {
			t.Errorf("the vocabulary lacks %q as a control token", piece)
		}
	}
}
