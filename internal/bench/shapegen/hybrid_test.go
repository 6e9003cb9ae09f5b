package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
)

// TestHybridShapes writes small shapes of the Qwen3.5, LFM2 and Gemma 4 layouts
// (the real shapes' structure, narrower) and loads them as aotlm loads
// llama.cpp's files of those families: the family, sizes and layer kinds
// come back (arch.Load refuses a file that lacks a tensor its layers need).
func TestHybridShapes(t *testing.T) {
	small := map[string]shape{
		"qwen35": {arch: "qwen35", hidden: 64, layers: 8, ffn: 96, heads: 4, kvHeads: 2, headDm: 32, vocab: 400, theta: 1e7, qkNorm: true,
			deltaNet: &deltaNetShape{attnEvery: 4, ropeDims: 8, keyHeads: 2, keyDim: 16, valueHeads: 4, valueDim: 16, convKernel: 4}},
		"lfm2": {arch: "lfm2", hidden: 64, layers: 6, ffn: 128, heads: 4, kvHeads: 2, headDm: 16, vocab: 400, theta: 1e6, qkNorm: true,
			attnLayers: []int{2, 4}, convCache: 3},
		"gemma4": {arch: "gemma4", hidden: 64, layers: 10, ffn: 96, heads: 4, kvHeads: 1, headDm: 16, vocab: 400, theta: 1e6, qkNorm: true,
			gemma4: &gemma4Shape{globalHeadDim: 32, perLayer: 16, fullEvery: 5, window: 8, kvShared: 4, swaTheta: 1e4, softcap: 30}},
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
		if g4 := c.Gemma4; family == "gemma4" {
			checkGemma4(t, c.SlidingLayers, g4.GlobalHeadDim, g4.PerLayerDim, g4.SharedKVLayers, g4.LayerFFN, g4.FinalSoftcap, s)
		}
	}
}

// checkGemma4 compares what aotlm read from a Gemma 4 shape's file with
// the shape: the full layers (every fifth), head and per-layer sizes, the
// shared layers and their doubled feed-forward, the logit cap.
func checkGemma4(t *testing.T, sliding []int, globalHead, perLayer, shared int, ffn []int, softcap float64, s shape) {
	t.Helper()
	g4 := s.gemma4
	if len(sliding) != s.layers-s.layers/g4.fullEvery || slices.Contains(sliding, g4.fullEvery-1) || !slices.Contains(sliding, 0) {
		t.Errorf("gemma4: sliding layers %v, want all but every %dth of %d", sliding, g4.fullEvery, s.layers)
	}
	if globalHead != g4.globalHeadDim || perLayer != g4.perLayer || shared != g4.kvShared || softcap != g4.softcap {
		t.Errorf("gemma4: global head %d, per-layer %d, shared %d, softcap %v; want %d, %d, %d, %v",
			globalHead, perLayer, shared, softcap, g4.globalHeadDim, g4.perLayer, g4.kvShared, g4.softcap)
	}
	for l, f := range ffn {
		want := s.ffn
		if l >= s.layers-g4.kvShared {
			want = 2 * s.ffn
		}
		if f != want {
			t.Errorf("gemma4: layer %d feed-forward %d, want %d", l, f, want)
		}
	}
}
