package vision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// internvlRef is the part of reference.json of the InternVL3 fixture
// (testdata/vlm/internvl3, llama.cpp upstream 82bb48500a9a) about
// preprocessing: per image, mtmd's chunks as the exact u8 pixels it
// encoded (PNG files) with the sums of their normalized float32 tensors,
// and the grid Hugging Face's dynamic_preprocess would use.
type internvlRef struct {
	Cases []struct {
		Image string `json:"image"`
		Size  [2]int `json:"image_size_wh"`
		Tiles struct {
			Slices   int  `json:"n_slices"`
			Overview bool `json:"overview"`
		} `json:"mtmd_tiles"`
		HF struct {
			Grid   [2]int `json:"grid_cols_rows"`
			Tiles  int    `json:"n_tiles_incl_thumbnail"`
			Tokens int    `json:"n_image_tokens"`
		} `json:"hf_dynamic_preprocess_would_use"`
		Preprocessed map[string]struct {
			File  string  `json:"file"`
			Chunk int     `json:"chunk_index"`
			Sum   float64 `json:"pixel_tensor_sum_f64"`
			SumSq float64 `json:"pixel_tensor_sumsq_f64"`
		} `json:"preprocessed"`
	} `json:"cases"`
}

// The fixture's tiling: 64-pixel tiles, 1 to 6 of them, a thumbnail.
func fixtureTiling(llamaCpp bool) InternVL {
	return InternVL{Tile: 64, MinTiles: 1, MaxTiles: 6, Thumbnail: true, LlamaCpp: llamaCpp}
}

// TestInternVLTilesMatchMTMD: with llama.cpp's choices, every chunk of
// the fixture's images (the square one's overview alone; the wide one's
// 3x2 letterboxed bicubic tiles and bilinear overview) has exactly the u8
// pixels mtmd encoded, and normalizing them with ImageNet's mean and std
// gives the sums of mtmd's float32 tensors.
func TestInternVLTilesMatchMTMD(t *testing.T) {
	dir := testutil.Path(t, "vlm/internvl3")
	var ref internvlRef
	if err := json.Unmarshal(testutil.ReadFile(t, "vlm/internvl3/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	mean, std := [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}
	for _, c := range ref.Cases {
		img, err := DecodeFile(filepath.Join(dir, c.Image), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fixtureTiling(true).Preprocess(img)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tiles) != c.Tiles.Slices || (got.Overview != nil) != c.Tiles.Overview {
			t.Fatalf("%s: %d tiles, overview %v; mtmd has %d, %v", c.Image, len(got.Tiles), got.Overview != nil, c.Tiles.Slices, c.Tiles.Overview)
		}
		chunks := append(append([]*RGB(nil), got.Tiles...), got.Overview)
		if len(c.Preprocessed) != len(chunks) {
			t.Fatalf("%s: %d preprocessed files for %d chunks", c.Image, len(c.Preprocessed), len(chunks))
		}
		for name, p := range c.Preprocessed {
			want, err := DecodeFile(filepath.Join(dir, p.File), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			have := chunks[p.Chunk]
			if have.W != want.W || have.H != want.H {
				t.Fatalf("%s %s: %dx%d, mtmd's is %dx%d", c.Image, name, have.W, have.H, want.W, want.H)
			}
			diff := 0
			for i := range have.Pix {
				if have.Pix[i] != want.Pix[i] {
					diff++
				}
			}
			if diff > 0 {
				t.Errorf("%s %s: %d of %d values differ from mtmd's pixels", c.Image, name, diff, len(have.Pix))
			}
			var sum, sq float64
			for _, v := range Normalize(have, mean, std) {
				sum += float64(v)
				sq += float64(v) * float64(v)
			}
			if math.Abs(sum-p.Sum) > 1e-6*math.Max(1, math.Abs(p.Sum)) || math.Abs(sq-p.SumSq) > 1e-6*p.SumSq {
				t.Errorf("%s %s: normalized sums %.9g, %.9g; mtmd's %.9g, %.9g", c.Image, name, sum, sq, p.Sum, p.SumSq)
			}
		}
	}
}

// TestInternVLGridHF: by default the grid is Hugging Face's closest
// aspect ratio: the fixture's 160x90 image takes 2x1 tiles plus the
// thumbnail (the reference's hf_dynamic_preprocess_would_use), where
// mtmd's best resolution takes 3x2; an image within a tile is one tile
// without a thumbnail under Hugging Face's rule and the overview alone
// under mtmd's.
func TestInternVLGridHF(t *testing.T) {
	var ref internvlRef
	if err := json.Unmarshal(testutil.ReadFile(t, "vlm/internvl3/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	hf, cpp := fixtureTiling(false), fixtureTiling(true)
	for _, c := range []struct {
		w, h               int
		hfCols, hfRows     int
		cppCols, cppRows   int
		hfChunks, cppChunk int
	}{
		{160, 90, 2, 1, 3, 2, 3, 7},
		{64, 64, 1, 1, 0, 0, 1, 1},
		{50, 40, 1, 1, 0, 0, 1, 1},
		{90, 160, 1, 2, 2, 3, 3, 7},
		{200, 64, 3, 1, 4, 1, 4, 5},
		{130, 130, 2, 2, 2, 2, 5, 5},
	} {
		img := NewRGB(c.w, c.h)
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7)
		}
		if cols, rows := hf.Grid(c.w, c.h); cols != c.hfCols || rows != c.hfRows {
			t.Errorf("%dx%d: Hugging Face grid %dx%d, want %dx%d", c.w, c.h, cols, rows, c.hfCols, c.hfRows)
		}
		if cols, rows := cpp.Grid(c.w, c.h); cols != c.cppCols || rows != c.cppRows {
			t.Errorf("%dx%d: mtmd grid %dx%d, want %dx%d", c.w, c.h, cols, rows, c.cppCols, c.cppRows)
		}
		for _, p := range []struct {
			proc InternVL
			want int
		}{{hf, c.hfChunks}, {cpp, c.cppChunk}} {
			out, err := p.proc.Preprocess(img)
			if err != nil {
				t.Fatal(err)
			}
			if out.Chunks() != p.want {
				t.Errorf("%dx%d (llama.cpp %v): %d chunks, want %d", c.w, c.h, p.proc.LlamaCpp, out.Chunks(), p.want)
			}
			for _, tile := range append(append([]*RGB(nil), out.Tiles...), out.Overview) {
				if tile != nil && (tile.W != 64 || tile.H != 64) {
					t.Fatalf("%dx%d: a tile of %dx%d", c.w, c.h, tile.W, tile.H)
				}
			}
		}
	}
	for _, c := range ref.Cases {
		cols, rows := hf.Grid(c.Size[0], c.Size[1])
		n := cols * rows
		if n > 1 {
			n++
		}
		if [2]int{cols, rows} != c.HF.Grid || n != c.HF.Tiles || 16*n != c.HF.Tokens {
			t.Errorf("%s (%v): Hugging Face grid %dx%d, %d tiles, %d tokens; the reference says %v, %d, %d", c.Image, c.Size,
				cols, rows, n, 16*n, c.HF.Grid, c.HF.Tiles, c.HF.Tokens)
		}
	}
}

// TestResizePillowBicubic: resizePillowBicubic gives exactly the bytes of
// Pillow's Image.resize (default BICUBIC filter), the resampling of Hugging
// Face's InternVL preprocessing, shrinking and enlarging each axis. The
// digests are SHA-256 of the RGB bytes Pillow 9.4.0 (Debian bookworm's
// python3-pil) wrote for Image.open(file).convert("RGB").resize(size);
// src is the digest of the decoded image, so that a decoding difference
// shows as such.
func TestResizePillowBicubic(t *testing.T) {
	for _, c := range []struct {
		file   string
		w, h   int
		digest string
		src    string
	}{
		{"mtmd/wide_300x200.png", 192, 128, "273bbfd5e71b57c300c5b0648f6efa877fa43835a36961f1c948295dcf55bb54", "f053ba8f6a77c46c"},
		{"mtmd/wide_300x200.png", 64, 64, "1ec40bc39c266837c6b459fcb2494284a5ed6be23553f6c68379a99444514ce6", "f053ba8f6a77c46c"},
		{"mtmd/wide_300x200.png", 448, 448, "a95859a96042b03b677928839d6bc7db3f6128e96476edd7b8b4e9cdcd4be3ab", "f053ba8f6a77c46c"},
		{"mtmd/wide_300x200.png", 300, 57, "9c63d15b8abc3c9920770853c2f273cb090f5fe29fbeb714ab89ac74cb3c1324", "f053ba8f6a77c46c"},
		{"mtmd/wide_300x200.png", 160, 90, "28003b4dc6e8946936e50c36400456b7b29d4c71cfa8c302b9996a87927d0eed", "f053ba8f6a77c46c"},
		{"mtmd/wide_300x200.png", 896, 448, "28fd17e07d09601f74d24cbcd1d0d7a61af9e05031b82fd32d79a3867d6893a2", "f053ba8f6a77c46c"},
		{"mtmd/banner_512x128.stb.png", 128, 64, "50a0ceb7bd4f6e5346a154eadd48e616a01bb6e30bae7fc720a9cb7911fc25df", "11920b11b94c8bda"},
		{"mtmd/banner_512x128.stb.png", 448, 896, "c26f1783c4cdf14963b2de7abeb437bd7d03cf3ca7b9abd4ecdede7c8ac1151b", "11920b11b94c8bda"},
		{"mtmd/banner_512x128.stb.png", 1344, 448, "6ae752fcb1bdffc51b3de8fb17c6abdf356603b485ded010183bee1a0fd51265", "11920b11b94c8bda"},
	} {
		img, err := DecodeFile(filepath.Join("testdata", c.file), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(img.Pix); hex.EncodeToString(s[:8]) != c.src {
			t.Fatalf("%s: decoded pixels differ from Pillow's", c.file)
		}
		out := resizePillowBicubic(img, c.w, c.h)
		if s := sha256.Sum256(out.Pix); hex.EncodeToString(s[:]) != c.digest {
			t.Errorf("%s to %dx%d: pixels differ from Pillow's", c.file, c.w, c.h)
		}
	}
}
