package arch

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// qwen25Fixture is the tiny random-weight Qwen2.5-VL of the vlm package's
// test data (how it was made: its README).
const qwen25Fixture = "../vlm/testdata/qwen25vl"

// TestQwen25VLLoaders: the Hugging Face folder and llama.cpp's GGUF pair
// of the tiny Qwen2.5-VL give the same configs (window of 112 pixels,
// full attention in blocks 1 and 3: from fullatt_block_indexes in the
// folder, from n_wa_pattern 2 in the mmproj file) and the same weights.
func TestQwen25VLLoaders(t *testing.T) {
	hf, err := LoadQwen2VL(openCk(t, qwen25Fixture), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := LoadQwen2VLPair(openCk(t, filepath.Join(qwen25Fixture, "text.gguf")), openCk(t, filepath.Join(qwen25Fixture, "mmproj.gguf")))
	if err != nil {
		t.Fatal(err)
	}
	hv := compareQwenLoaders(t, hf, pair)
	if hv.FFN != 64 || hv.Hidden != 32 || hv.Layers != 4 || hv.Heads != 2 || hv.PatchSize != 8 || hv.Merge != 2 || hv.TextHidden != 64 ||
		!hv.RMSNorm || !hv.GatedMLP || hv.WindowSize != 112 || !slices.Equal(hv.FullAttnBlocks, []int{1, 3}) {
		t.Errorf("folder vision config %+v", hv)
	}
	if hv.WindowPatches() != 14 {
		t.Errorf("window of %d patches, want 14 (7 merged tokens)", hv.WindowPatches())
	}
	// the graph: RMSNorm, gated MLP, attention within windows in blocks 0
	// and 2 only
	g, err := BuildQwen2VLVision(&hv)
	if err != nil {
		t.Fatal(err)
	}
	var tiles []int
	norms := map[op.Op]int{}
	for _, n := range g.Nodes {
		if n.Attn != nil {
			tiles = append(tiles, n.Attn.Tile)
		}
		if n.Op == op.RMSNorm || n.Op == op.LayerNorm {
			norms[n.Op]++
		}
	}
	if !slices.Equal(tiles, []int{14, 0, 14, 0}) || norms[op.RMSNorm] != 9 || norms[op.LayerNorm] != 0 {
		t.Errorf("attention tiles %v, norms %v", tiles, norms)
	}
	if _, ok := g.Weights["visual.blocks.3.mlp.gate_proj.bias"]; !ok {
		t.Error("no gate_proj bias in the graph")
	}
}

// TestQwen25VLConfigErrors: Qwen2.5-VL vision configs the family cannot
// run are refused naming the field.
func TestQwen25VLConfigErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"depth": 4.0, "hidden_size": 32.0, "intermediate_size": 64.0, "num_heads": 2.0,
			"out_hidden_size": 64.0, "hidden_act": "silu", "patch_size": 8.0, "spatial_merge_size": 2.0,
			"temporal_patch_size": 2.0, "window_size": 112.0, "fullatt_block_indexes": []any{1.0, 3.0}}
	}
	v, err := qwen25vlVisionHF(base(), 64)
	if err != nil || v.Validate() != nil {
		t.Fatalf("base config: %v, %v", err, v.Validate())
	}
	// without window_size, transformers' default of 112 pixels
	m := base()
	delete(m, "window_size")
	if v, err := qwen25vlVisionHF(m, 64); err != nil || v.WindowSize != 112 {
		t.Fatalf("no window_size: %d, %v", v.WindowSize, err)
	}
	for name, c := range map[string]struct {
		mut  func(m map[string]any)
		want string
	}{
		"no full blocks":  {func(m map[string]any) { delete(m, "fullatt_block_indexes") }, "fullatt_block_indexes"},
		"bad full block":  {func(m map[string]any) { m["fullatt_block_indexes"] = []any{1.0, 4.0} }, "full-attention block 4"},
		"gelu":            {func(m map[string]any) { m["hidden_act"] = "gelu" }, "hidden_act"},
		"other width":     {func(m map[string]any) { m["out_hidden_size"] = 48.0 }, "out_hidden_size"},
		"bad window":      {func(m map[string]any) { m["window_size"] = "wide" }, "window_size"},
		"window too thin": {func(m map[string]any) { m["window_size"] = 8.0 }, "window of 8 pixels"},
	} {
		m := base()
		c.mut(m)
		v, err := qwen25vlVisionHF(m, 64)
		if err == nil {
			err = v.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
	mm := map[string]any{"clip.use_silu": true}
	if err := qwen25vlVisionMMProj(mm, &Qwen2VLVision{Layers: 4}); err == nil || !strings.Contains(err.Error(), "n_wa_pattern") {
		t.Errorf("mmproj without n_wa_pattern: %v", err)
	}
}
