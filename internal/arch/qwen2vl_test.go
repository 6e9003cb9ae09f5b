package arch

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/testutil"
)

func openCk(t *testing.T, path string) format.Checkpoint {
	t.Helper()
	ck, err := detect.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// TestQwen2VLLoaders: the Hugging Face folder and llama.cpp's GGUF pair of
// the tiny Qwen2-VL fixture give the same configs and the same weights,
// every vision tensor equal value for value once the mmproj file's split
// q/k/v and per-frame patch weights are joined back (README: the
// converter writes the FFN width as 64, the tensors hold 128).
func TestQwen2VLLoaders(t *testing.T) {
	dir := testutil.Path(t, "vlm/qwen2vl")
	hf, err := LoadQwen2VL(openCk(t, dir), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := LoadQwen2VLPair(openCk(t, filepath.Join(dir, "text.gguf")), openCk(t, filepath.Join(dir, "mmproj.gguf")))
	if err != nil {
		t.Fatal(err)
	}
	hv := compareQwenLoaders(t, hf, pair)
	if hv.FFN != 128 || hv.Hidden != 32 || hv.Layers != 3 || hv.Heads != 2 || hv.PatchSize != 8 || hv.Merge != 2 || hv.TextHidden != 64 {
		t.Errorf("folder vision config %+v", hv)
	}
}

// compareQwenLoaders checks that a Qwen2-VL / Qwen2.5-VL model loaded from
// its folder and from its GGUF pair agree: text configs, vision configs
// (up to the float32 mean and std, the image token the pair lacks) and
// every weight value for value. It returns the folder's vision config.
func compareQwenLoaders(t *testing.T, hf, pair *Qwen2VL) Qwen2VLVision {
	t.Helper()
	for _, m := range []*Qwen2VL{hf, pair} {
		c := m.Text.Config
		if c.Family != "qwen2vl" || !slices.Equal(c.RopeSections, []int{2, 3, 3}) || !c.QKVBias || c.RopeStyle.String() != "half" {
			t.Fatalf("%s text config: family %s, sections %v, qkv bias %v, rope %v", c.Source, c.Family, c.RopeSections, c.QKVBias, c.RopeStyle)
		}
	}
	hv, pv := hf.Vision, pair.Vision
	if hv.ImageTokenID != 265 || pv.ImageTokenID != -1 {
		t.Errorf("image token ids %d (folder), %d (pair)", hv.ImageTokenID, pv.ImageTokenID)
	}
	pv.ImageTokenID = hv.ImageTokenID
	for c := range 3 {
		// the GGUF stores the mean and std as float32
		if d := hv.Mean[c] - pv.Mean[c]; d > 1e-7 || d < -1e-7 {
			t.Errorf("mean %v vs %v", hv.Mean, pv.Mean)
		}
	}
	pv.Mean, pv.Std, pv.NormEps = hv.Mean, hv.Std, hv.NormEps
	if !reflect.DeepEqual(hv, pv) {
		t.Errorf("vision configs differ: folder %+v, pair %+v", hv, pv)
	}
	if len(hf.VisionWeights) != len(pair.VisionWeights) {
		t.Fatalf("%d vision tensors from the folder, %d from the pair", len(hf.VisionWeights), len(pair.VisionWeights))
	}
	for name, a := range hf.VisionWeights {
		if !slices.Equal(a, pair.VisionWeights[name]) {
			t.Errorf("%s differs between the folder and the pair", name)
		}
	}
	for name, a := range hf.Text.Weights {
		if !slices.Equal(a, pair.Text.Weights[name]) {
			t.Errorf("text %s differs between the folder and the pair", name)
		}
	}
	return hv
}

// TestQwen2VLPatches: patches come in 2x2 merge-block order with their
// (row, col), each the patch's pixels once per frame.
func TestQwen2VLPatches(t *testing.T) {
	v := Qwen2VLVision{PatchSize: 2, TemporalPatch: 2, Merge: 2, Channels: 3}
	const w, h = 8, 4 // a 2x4 patch grid: merged grid 1x2
	pix := make([]float32, 3*w*h)
	for i := range pix {
		pix[i] = float32(i)
	}
	rows, pos, gr, gc, err := v.Patches(pix, w, h)
	if err != nil {
		t.Fatal(err)
	}
	if gr != 1 || gc != 2 {
		t.Fatalf("merged grid %dx%d, want 1x2", gr, gc)
	}
	wantPos := []int{0, 0, 0, 1, 1, 0, 1, 1, 0, 2, 0, 3, 1, 2, 1, 3}
	if !slices.Equal(pos, wantPos) {
		t.Fatalf("positions %v, want %v", pos, wantPos)
	}
	K := v.PatchCols()
	for r := 0; r < len(pos)/2; r++ {
		py, px := pos[2*r], pos[2*r+1]
		for c := 0; c < 3; c++ {
			for f := 0; f < 2; f++ {
				for ky := 0; ky < 2; ky++ {
					for kx := 0; kx < 2; kx++ {
						got := rows[r*K+((c*2+f)*2+ky)*2+kx]
						want := pix[c*w*h+(py*2+ky)*w+px*2+kx]
						if got != want {
							t.Fatalf("patch %d channel %d frame %d (%d,%d) = %v, want %v", r, c, f, ky, kx, got, want)
						}
					}
				}
			}
		}
	}
	if _, _, _, _, err := v.Patches(pix[:10], w, h); err == nil {
		t.Error("short pixels accepted")
	}
	if _, _, _, _, err := v.Patches(make([]float32, 3*6*4), 6, 4); err == nil {
		t.Error("a width out of merge blocks accepted")
	}
}

// TestQwen2VLConfigErrors: configs the family cannot run are refused
// naming the field.
func TestQwen2VLConfigErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"hidden_size": 64.0, "intermediate_size": 128.0, "num_hidden_layers": 2.0,
			"num_attention_heads": 4.0, "num_key_value_heads": 2.0, "vocab_size": 100.0,
			"rope_scaling": map[string]any{"type": "mrope", "mrope_section": []any{2.0, 3.0, 3.0}}}
	}
	c, err := qwen2vlConfigHF(base())
	if err != nil || c.Validate() != nil || !slices.Equal(c.RopeSections, []int{2, 3, 3}) {
		t.Fatalf("base config: %v, %v, sections %v", err, c.Validate(), c.RopeSections)
	}
	nested := map[string]any{"text_config": base()}
	if c, err := qwen2vlConfigHF(nested); err != nil || !slices.Equal(c.RopeSections, []int{2, 3, 3}) {
		t.Fatalf("text_config: %v, sections %v", err, c.RopeSections)
	}
	for name, c := range map[string]struct {
		mut  func(m map[string]any)
		want string
	}{
		"no sections": {func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "mrope"} }, "mrope_section"},
		"yarn":        {func(m map[string]any) { m["rope_scaling"].(map[string]any)["type"] = "yarn" }, "yarn"},
		"bad section": {func(m map[string]any) { m["rope_scaling"].(map[string]any)["mrope_section"] = []any{"x"} }, "mrope_section"},
		"wrong sum":   {func(m map[string]any) { m["rope_scaling"].(map[string]any)["mrope_section"] = []any{2.0, 3.0, 4.0} }, "add up to 9, want 8"},
	} {
		m := base()
		c.mut(m)
		cfg, err := qwen2vlConfigHF(m)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}

// TestQwen2VLPairMismatch: a SmolVLM projector or text model is refused
// with a clear error.
func TestQwen2VLPairMismatch(t *testing.T) {
	q := testutil.Path(t, "vlm/qwen2vl")
	s := testutil.Path(t, "vlm/smolvlm")
	if _, err := LoadQwen2VLPair(openCk(t, filepath.Join(q, "text.gguf")), openCk(t, filepath.Join(s, "mmproj.gguf"))); err == nil ||
		!strings.Contains(err.Error(), "idefics3") {
		t.Errorf("smolvlm projector: %v", err)
	}
	if _, err := LoadQwen2VLPair(openCk(t, filepath.Join(s, "text.gguf")), openCk(t, filepath.Join(q, "mmproj.gguf"))); err == nil ||
		!strings.Contains(err.Error(), "qwen2vl text model") {
		t.Errorf("llama text model: %v", err)
	}
	if _, err := LoadQwen2VL(openCk(t, s), nil); err == nil || !strings.Contains(err.Error(), "not a Qwen2-VL") {
		t.Errorf("smolvlm folder: %v", err)
	}
}
