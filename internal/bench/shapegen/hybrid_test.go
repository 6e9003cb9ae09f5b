package main

import (
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
)

// TestHybridShapes writes small shapes of the Qwen3.5 and LFM2 layouts
// (the real shapes' structure, narrower) and loads them as aotlm loads
// llama.cpp's files of those families: the family, sizes and layer kinds
// come back (arch.Load refuses a file that lacks a tensor its layers need).
func TestHybridShapes(t *testing.T) {
	small := map[string]shape{
		"qwen35": {arch: "qwen35", hidden: 64, layers: 8, ffn: 96, heads: 4, kvHeads: 2, headDm: 32, vocab: 400, theta: 1e7, qkNorm: true,
			deltaNet: &deltaNetShape{attnEvery: 4, ropeDims: 8, keyHeads: 2, keyDim: 16, valueHeads: 4, valueDim: 16, convKernel: 4}},
		"lfm2": {arch: "lfm2", hidden: 64, layers: 6, ffn: 128, heads: 4, kvHeads: 2, headDm: 16, vocab: 400, theta: 1e6, qkNorm: true,
			attnLayers: []int{2, 4}, convCache: 3},
	}
	for family, s := range small {
		path := filepath.Join(t.TempDir(), family+".gguf")
		if err := write(path, s, 1); err != nil {
			t.Fatal(err)
		}
		ck, err := detect.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := arch.Load(ck)
		ck.Close()
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		c := m.Config
		if c.Family != family || c.Hidden != s.hidden || c.Layers != s.layers || c.Vocab != s.vocab || c.Heads != s.heads {
			t.Errorf("%s: config %+v", family, c)
		}
		if len(m.Weights) == 0 {
			t.Errorf("%s: no weights", family)
		}
	}
}
