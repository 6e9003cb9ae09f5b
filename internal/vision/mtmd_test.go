package vision

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/mtmd holds five images and what llama.cpp's mtmd library makes
// of them, to check Decode and Idefics3 against it:
//
//   - wide_300x200.png (8-bit RGB), tall_200x300_rgba.png (8-bit RGBA,
//     alpha varying), banner_512x128.jpg (baseline, 4:2:0, quality 90),
//     small_57x91.gif (216-color palette), square_129x129_16bit.png
//     (16-bit RGB): written by a small Go program from a deterministic
//     pattern (gradients, a disc, a rectangle, 3-pixel stripes and
//     concentric rings, so that resampling differences show).
//   - reference.json: for llama.cpp upstream commit 82bb48500a9a (the
//     commit of the testdata/vlm fixtures: built from the unslothai fork
//     at d32676d77, identical in tools/mtmd and ggml; CPU
//     Release build of libmtmd.so, -O3 with no -march, so no fused
//     multiply-adds in mtmd), a C++ driver linked against libmtmd loaded
//     each file with the stb_image (v2.30, in that tree) mtmd-helper uses
//     (stbi_load_from_memory, 3 channels, as
//     mtmd_helper_bitmap_init_from_buf does), built a clip_image_u8 from
//     it, ran mtmd's internal mtmd_image_preprocessor_idefics3 (from
//     tools/mtmd/mtmd-image.h, the class mtmd_tokenize uses for the
//     idefics3 projector) on a clip_init context (use_gpu false, warmup
//     off) and wrote each chunk's float32 tensor (mtmd's layout: RGB
//     interleaved, row-major) in mtmd's order, slices row by row then the
//     overview. Stored per chunk: width, height, SHA-256 of the
//     little-endian float32 bytes, sum and sum of squares; per file the
//     SHA-256 of stb_image's RGB bytes. Three mmproj files: the SmolVLM
//     fixture's (testdata/vlm/smolvlm/mmproj.gguf: image_size 128,
//     preproc_image_size 128, so every image is a 1x1 grid), the same
//     file with clip.vision.preproc_image_size patched to 384 (grids of
//     up to 3x4 tiles of 128) and with image_size 512 and
//     preproc_image_size 2048, the sizes of the published SmolVLM-256M /
//     500M (grids of up to 4x4 tiles of 512). Only hyperparameters are
//     read by the preprocessor, so the patched files need no other change.
//   - banner_512x128.stb.png: stb_image's RGB pixels of the JPEG.
//
// Every value mtmd produced is exactly (u8/255 - 0.5)/0.5 of some u8.
type mtmdRef struct {
	Commit  string `json:"llama_cpp_commit"`
	Decoded []struct {
		File   string `json:"file"`
		SHA256 string `json:"rgb_sha256"`
	} `json:"stb_decoded"`
	Variants []struct {
		Name        string `json:"name"`
		Tile        int    `json:"image_size"`
		LongestEdge int    `json:"preproc_image_size"`
		Images      []struct {
			File   string `json:"file"`
			W, H   int
			Cols   int `json:"grid_cols"`
			Rows   int `json:"grid_rows"`
			Chunks []struct {
				W, H   int
				SHA256 string  `json:"f32_sha256"`
				Sum    float64 `json:"sum"`
			} `json:"chunks"`
		} `json:"images"`
	} `json:"variants"`
}

func readMtmdRef(t *testing.T) *mtmdRef {
	t.Helper()
	b, err := os.ReadFile("testdata/mtmd/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var r mtmdRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Decoded) != 5 || len(r.Variants) != 3 {
		t.Fatalf("reference.json: %d files, %d variants", len(r.Decoded), len(r.Variants))
	}
	return &r
}

func rgbSHA(m *RGB) string {
	h := sha256.Sum256(m.Pix)
	return hex.EncodeToString(h[:])
}

// mtmdTensor lays out Normalize's [3][H][W] planes the way mtmd stores a
// chunk (RGB interleaved) as little-endian float32 bytes.
func mtmdTensor(m *RGB) ([]byte, float64) {
	planes := Normalize(m, [3]float32{0.5, 0.5, 0.5}, [3]float32{0.5, 0.5, 0.5})
	n := m.W * m.H
	out := make([]byte, 4*3*n)
	var sum float64
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			v := planes[c*n+i]
			binary.LittleEndian.PutUint32(out[4*(3*i+c):], math.Float32bits(v))
			sum += float64(v)
		}
	}
	return out, sum
}

// stbPixels returns what stb_image decodes the file to: for PNG and GIF
// our own decoding, checked equal to it byte for byte; for the JPEG the
// stored stb_image pixels.
func stbPixels(t *testing.T, file, wantSHA string) *RGB {
	t.Helper()
	var m *RGB
	var err error
	if strings.HasSuffix(file, ".jpg") {
		m, err = DecodeFile(filepath.Join("testdata/mtmd", strings.TrimSuffix(file, ".jpg")+".stb.png"), DefaultLimits)
	} else {
		m, err = DecodeFile(filepath.Join("testdata/mtmd", file), DefaultLimits)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := rgbSHA(m); got != wantSHA {
		t.Fatalf("%s: decoded RGB has SHA-256 %s, stb_image's %s", file, got, wantSHA)
	}
	return m
}

// Decoding: PNG (8-bit RGB, RGBA with alpha, 16-bit) and GIF equal
// stb_image byte for byte. JPEG: Go's image/jpeg inverse DCT rounds
// differently from stb_image's, so after the stb-style chroma upsampling
// and color conversion of jpegToRGB a few percent of the values still
// differ, by at most 3 levels (measured on this file: 4470 of 196608
// values, max 3; on llama.cpp's tools/mtmd/test-1.jpeg photo 27868 of
// 936960, max 3). Tolerance: max 3, at most 5% of values.
func TestDecodeMatchesStbImage(t *testing.T) {
	r := readMtmdRef(t)
	for _, d := range r.Decoded {
		got, err := DecodeFile(filepath.Join("testdata/mtmd", d.File), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(d.File, ".jpg") {
			if rgbSHA(got) != d.SHA256 {
				t.Errorf("%s: decoded pixels differ from stb_image's", d.File)
			}
			continue
		}
		want := stbPixels(t, d.File, d.SHA256)
		n, maxd := u8Diff(t, got, want)
		t.Logf("%s: %d of %d values differ from stb_image, max %d", d.File, n, len(want.Pix), maxd)
		if maxd > 3 || n > len(want.Pix)/20 {
			t.Errorf("%s: %d values differ from stb_image, max %d (tolerance max 3, at most 5%%)", d.File, n, maxd)
		}
	}
}

func u8Diff(t *testing.T, a, b *RGB) (n, maxd int) {
	t.Helper()
	if a.W != b.W || a.H != b.H {
		t.Fatalf("size %dx%d vs %dx%d", a.W, a.H, b.W, b.H)
	}
	for i := range a.Pix {
		d := int(a.Pix[i]) - int(b.Pix[i])
		if d != 0 {
			n++
			maxd = max(maxd, d, -d)
		}
	}
	return n, maxd
}

// Preprocessing: from the pixels stb_image decodes, the grid, every
// chunk's size and its float32 tensor equal mtmd's bit for bit, for the
// five images under three (image size, longest edge) settings: 1x1 to
// 4x4 grids, multi-row grids, downscaling and upscaling, odd sizes.
// (57x91 with longest edge 384 is a 2x4 grid: in float32, 91*(384/91)
// is a little over 384, which rounds up to four rows of 128 where exact
// arithmetic gives three.)
func TestIdefics3MatchesMtmdGrids(t *testing.T) {
	r := readMtmdRef(t)
	stb := map[string]string{}
	for _, d := range r.Decoded {
		stb[d.File] = d.SHA256
	}
	for _, v := range r.Variants {
		if testing.Short() && v.Tile > 128 {
			// the same code paths as the 128 settings, on 20 times the
			// pixels: left to the full run (the short run is the one under
			// qemu for arm64, where fused multiply-adds would show)
			t.Logf("short: %s left to the full run", v.Name)
			continue
		}
		p := Idefics3{Tile: v.Tile, LongestEdge: v.LongestEdge}
		for _, im := range v.Images {
			name := fmt.Sprintf("%s %s", v.Name, im.File)
			src := stbPixels(t, im.File, stb[im.File])
			if src.W != im.W || src.H != im.H {
				t.Fatalf("%s: size %dx%d, mtmd %dx%d", name, src.W, src.H, im.W, im.H)
			}
			out, err := p.Preprocess(src)
			if err != nil {
				t.Fatal(err)
			}
			if out.Cols != im.Cols || out.Rows != im.Rows {
				t.Errorf("%s: grid %dx%d, mtmd %dx%d", name, out.Cols, out.Rows, im.Cols, im.Rows)
				continue
			}
			chunks := append(append([]*RGB{}, out.Slices...), out.Overview)
			if len(chunks) != len(im.Chunks) {
				t.Errorf("%s: %d chunks, mtmd %d", name, len(chunks), len(im.Chunks))
				continue
			}
			for i, c := range chunks {
				want := im.Chunks[i]
				if c.W != want.W || c.H != want.H {
					t.Errorf("%s chunk %d: %dx%d, mtmd %dx%d", name, i, c.W, c.H, want.W, want.H)
					continue
				}
				b, sum := mtmdTensor(c)
				h := sha256.Sum256(b)
				if hex.EncodeToString(h[:]) != want.SHA256 {
					t.Errorf("%s chunk %d: tensor differs from mtmd's (sum %.6f, mtmd %.6f)", name, i, sum, want.Sum)
				}
			}
		}
	}
}

// The JPEG end to end, from our own decoding: the chunks differ from
// mtmd's (checked equal above to the preprocessing of stb_image's pixels)
// by at most the decoders' difference, 3 levels of u8 (0.0235 after
// normalization); measured max 3 in every setting.
func TestIdefics3JPEGEndToEnd(t *testing.T) {
	r := readMtmdRef(t)
	const file = "banner_512x128.jpg"
	var sha string
	for _, d := range r.Decoded {
		if d.File == file {
			sha = d.SHA256
		}
	}
	ref := stbPixels(t, file, sha)
	got, err := DecodeFile(filepath.Join("testdata/mtmd", file), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range r.Variants {
		if testing.Short() && v.Tile > 128 {
			t.Logf("short: %s left to the full run", v.Name)
			continue
		}
		p := Idefics3{Tile: v.Tile, LongestEdge: v.LongestEdge}
		a, err := p.Preprocess(got)
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Preprocess(ref)
		if err != nil {
			t.Fatal(err)
		}
		if a.Cols != b.Cols || a.Rows != b.Rows {
			t.Fatalf("%s: grid %dx%d vs %dx%d", v.Name, a.Cols, a.Rows, b.Cols, b.Rows)
		}
		worst := 0
		for i := range a.Slices {
			_, m := u8Diff(t, a.Slices[i], b.Slices[i])
			worst = max(worst, m)
		}
		_, m := u8Diff(t, a.Overview, b.Overview)
		worst = max(worst, m)
		t.Logf("%s: max u8 difference %d", v.Name, worst)
		if worst > 3 {
			t.Errorf("%s: chunks differ from mtmd's by up to %d u8 levels (tolerance 3)", v.Name, worst)
		}
	}
}

// testdata/mtmd/jpeg: small JPEGs written by libjpeg-turbo 2.1.5's cjpeg
// (-quality 85, -sample 1x1 / 2x1 / 1x2 / 2x2 for 4:4:4 / 4:2:2 / 4:4:0 /
// 4:2:0, -progressive, -grayscale) from 61x37 and 2x9 pattern images (odd
// sizes, one-sample-wide chroma), each with stb_image's RGB pixels of it
// (<name>.stb.png, written by the same driver as reference.json). Tolerance
// as for the banner: max 3 levels, at most 6% of values (measured: max 3,
// at most 4.2%; Go's own YCbCr conversion was off by up to 125 levels
// there, and stb_image's 4:2:2 upsampling, which weighs the second-to-last
// output 3/4 on the sample before the last one, by up to 61 when read as
// libjpeg does it).
func TestJPEGSubsamplingMatchesStbImage(t *testing.T) {
	files, err := filepath.Glob("testdata/mtmd/jpeg/*.jpg")
	if err != nil || len(files) != 10 {
		t.Fatalf("%d test JPEGs (%v)", len(files), err)
	}
	for _, f := range files {
		got, err := DecodeFile(f, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeFile(strings.TrimSuffix(f, ".jpg")+".stb.png", DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		n, maxd := u8Diff(t, got, want)
		t.Logf("%s: %d of %d values differ from stb_image, max %d", filepath.Base(f), n, len(want.Pix), maxd)
		if maxd > 3 || n > len(want.Pix)*6/100 {
			t.Errorf("%s: %d values differ from stb_image, max %d (tolerance max 3, at most 6%%)", filepath.Base(f), n, maxd)
		}
	}
}
