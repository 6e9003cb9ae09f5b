package arch

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestInternVLLoaders: the Hugging Face folder and llama.cpp's GGUF pair
// of the tiny InternVL3 fixture give the same text config (Qwen2 from
// llm_config) and vision config, and equal vision weights once the
// mmproj file's split q/k/v are joined; the position table holds each
// position row plus the patch bias, then plus the class embedding, and
// ls1 scales the attention output projection's rows.
func TestInternVLLoaders(t *testing.T) {
	dir := testutil.Path(t, "vlm/internvl3")
	ck := openCk(t, dir)
	hf, err := LoadInternVL(ck, map[string]any{"image_mean": []any{0.485, 0.456, 0.406}, "image_std": []any{0.229, 0.224, 0.225}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := LoadInternVLPair(openCk(t, filepath.Join(dir, "text.gguf")), openCk(t, filepath.Join(dir, "mmproj.gguf")))
	if err != nil {
		t.Fatal(err)
	}
	tc := hf.Text.Config
	if tc.Family != "internvl" || !tc.QKVBias || tc.RopeStyle != graph.RopeHalf || tc.Tied || tc.Hidden != 64 || tc.RopeTheta != 1e6 {
		t.Errorf("text config %+v", tc)
	}
	pv := pair.Vision
	if float32(pv.NormEps) == float32(hf.Vision.NormEps) {
		pv.NormEps = hf.Vision.NormEps // stored as float32 in the GGUF
	}
	if pv != hf.Vision {
		t.Errorf("vision configs differ:\nhf   %+v\ngguf %+v", hf.Vision, pair.Vision)
	}
	v := hf.Vision
	if v.ScaleFactor != 2 || v.MinTiles != 1 || v.MaxTiles != 6 || !v.Thumbnail || v.TokensPerTile() != 16 || v.ProjNormEps != 1e-5 {
		t.Errorf("vision config %+v", v)
	}
	for name, w := range hf.VisionWeights {
		p := pair.VisionWeights[name]
		if len(p) != len(w) {
			t.Fatalf("%s: %d values from the folder, %d from the pair", name, len(w), len(p))
		}
		for i := range w {
			if w[i] != p[i] {
				t.Fatalf("%s[%d]: %v from the folder, %v from the pair", name, i, w[i], p[i])
			}
		}
	}
	read := func(name string) []float32 {
		x, err := ck.ReadFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	H, N := v.Hidden, v.Grid()*v.Grid()
	pos, cls, bias := read("vision_model.embeddings.position_embedding"), read("vision_model.embeddings.class_embedding"), read("vision_model.embeddings.patch_embedding.bias")
	table := hf.VisionWeights[internvlPosTable]
	for r := 0; r <= N; r++ {
		for c := 0; c < H; c++ {
			if table[r*H+c] != pos[r*H+c]+bias[c] || table[(N+1+r)*H+c] != pos[r*H+c]+cls[c] {
				t.Fatalf("position table row %d column %d", r, c)
			}
		}
	}
	proj, ls1 := read("vision_model.encoder.layers.0.attn.proj.weight"), read("vision_model.encoder.layers.0.ls1")
	if got := hf.VisionWeights["vision_model.encoder.layers.0.attn.proj_ls1.weight"]; got[H+3] != proj[H+3]*ls1[1] {
		t.Errorf("attn.proj row 1 is not scaled by ls1[1]")
	}
}

// TestInternVLPositions: Hugging Face's order gives the class token
// position row 0 and patch k row k+1; llama.cpp's gives patch k row k and
// the class token row N; either way the class token reads its rows of
// the table's second half and the patches come in 2x2 blocks, dy outer.
func TestInternVLPositions(t *testing.T) {
	v := InternVLVision{ImageSize: 32, PatchSize: 8, ScaleFactor: 2}
	N := 16
	hf := v.InternVLPositions()
	v.LlamaCpp = true
	cpp := v.InternVLPositions()
	order := []int{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}
	if hf[0] != N+1 || cpp[0] != N+1+N {
		t.Errorf("class token ids %d (hf), %d (llama.cpp); want %d, %d", hf[0], cpp[0], N+1, 2*N+1)
	}
	for i, k := range order {
		if hf[i+1] != k+1 || cpp[i+1] != k {
			t.Fatalf("row %d (patch %d): ids %d (hf), %d (llama.cpp); want %d, %d", i+1, k, hf[i+1], cpp[i+1], k+1, k)
		}
	}
}

// TestInternVLLlamaCppRounding: with llama.cpp's choices the patch
// convolution's weight and the tile's pixels are rounded to binary16 (a
// copy of the weights; the loaded ones keep float32), without them both
// pass unchanged.
func TestInternVLLlamaCppRounding(t *testing.T) {
	v := InternVLVision{ImageSize: 16, PatchSize: 8, Channels: 3, ScaleFactor: 2}
	patch := []float32{1.0001, -0.33333334, 65504, 1e-8}
	w := graph.Weights{internvlPatch: patch, "other": {1.0001}}
	pix := make([]float32, 3*16*16)
	for i := range pix {
		pix[i] = 0.1 + float32(i)*1e-4
	}
	if got := v.EncoderWeights(w); &got[internvlPatch][0] != &patch[0] {
		t.Error("Hugging Face's choices changed the weights")
	}
	rows, _, err := v.Rows(pix)
	if err != nil {
		t.Fatal(err)
	}
	if rows[v.PatchCols()] != pix[0] {
		t.Errorf("Hugging Face's choices changed pixel %v to %v", pix[0], rows[v.PatchCols()])
	}
	v.LlamaCpp = true
	got := v.EncoderWeights(w)
	want := []float32{1, -0.33325195, 65504, 0}
	for i := range want {
		if got[internvlPatch][i] != want[i] {
			t.Errorf("patch weight %v rounded to %v, want %v", patch[i], got[internvlPatch][i], want[i])
		}
	}
	if patch[0] != 1.0001 || got["other"][0] != 1.0001 {
		t.Error("the rounding touched the loaded weights or another tensor")
	}
	rows, _, err = v.Rows(pix)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[v.PatchCols()]; r == pix[0] || math.Abs(float64(r-pix[0])) > 1e-4 {
		t.Errorf("pixel %v read as %v, want its binary16 rounding", pix[0], r)
	}
}
