package vision

import (
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQwen2VLPreprocessFixture: the resized, letterboxed pixels equal the
// u8 pixels llama.cpp's mtmd fed its encoder for the Qwen2-VL fixture's
// two images (testdata vlm/README.md: 64x64 copied unchanged, 100x60 to
// 96x64 with a bilinear 96x58 inside at y offset 3) and the Qwen2.5-VL
// fixture's (the same processing in mtmd: 128x128 unchanged, 150x70 to
// 144x64).
func TestQwen2VLPreprocessFixture(t *testing.T) {
	checkQwenPreprocess(t, testutil.Path(t, "vlm/qwen2vl"), []qwenSize{{"image_square.png", 64, 64}, {"image_wide.png", 96, 64}})
	checkQwenPreprocess(t, "../vlm/testdata/qwen25vl", []qwenSize{{"image_square.png", 128, 128}, {"image_wide.png", 144, 64}})
}

type qwenSize struct {
	name string
	w, h int
}

func checkQwenPreprocess(t *testing.T, dir string, sizes []qwenSize) {
	p := NewQwen2VL(8, 2)
	for _, c := range sizes {
		src, err := DecodeFile(filepath.Join(dir, c.name), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeFile(filepath.Join(dir, "preprocessed", c.name), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Preprocess(src)
		if err != nil {
			t.Fatal(err)
		}
		if got.W != c.w || got.H != c.h || want.W != c.w || want.H != c.h {
			t.Fatalf("%s: got %dx%d, llama.cpp %dx%d, want %dx%d", c.name, got.W, got.H, want.W, want.H, c.w, c.h)
		}
		bad := 0
		for i := range got.Pix {
			if got.Pix[i] != want.Pix[i] {
				if bad < 5 {
					t.Errorf("%s: byte %d (pixel %d) = %d, llama.cpp %d", c.name, i, i/3, got.Pix[i], want.Pix[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("%s: %d of %d bytes differ", c.name, bad, len(got.Pix))
		}
	}
}

// TestQwen2VLSize checks the smart resize against values worked out by
// hand from mtmd's rule (align 16, 8..4096 tokens of 256 pixels).
func TestQwen2VLSize(t *testing.T) {
	p := NewQwen2VL(8, 2)
	for _, c := range []struct{ w, h, ww, wh int }{
		{64, 64, 64, 64},
		{100, 60, 96, 64},
		{40, 40, 48, 48},        // 2.5 rounds away from zero (Python's round gives 32)
		{5000, 100, 5008, 96},   // 312.5 -> 313
		{8, 8, 48, 48},          // under 8 tokens: scaled up by sqrt(2048/64), ceil'd
		{1, 1, 48, 48},          // the same from one pixel
		{4000, 3000, 1168, 880}, // over 4096 tokens: scaled down, floor'd
	} {
		w, h := p.Size(c.w, c.h)
		if w != c.ww || h != c.wh {
			t.Errorf("%dx%d -> %dx%d, want %dx%d", c.w, c.h, w, h, c.ww, c.wh)
		}
		if w*h > p.MaxPixels || w*h < p.MinPixels || w%16 != 0 || h%16 != 0 {
			t.Errorf("%dx%d -> %dx%d is out of bounds", c.w, c.h, w, h)
		}
	}
	if _, err := (Qwen2VL{}).Preprocess(NewRGB(4, 4)); err == nil {
		t.Error("zero config accepted")
	}
	if _, err := p.Preprocess(&RGB{}); err == nil {
		t.Error("empty image accepted")
	}
}

// TestQwen2VLLetterbox: a tall image is centered horizontally on black.
func TestQwen2VLLetterbox(t *testing.T) {
	src := NewRGB(30, 100)
	for i := range src.Pix {
		src.Pix[i] = 200
	}
	got, err := NewQwen2VL(8, 2).Preprocess(src)
	if err != nil {
		t.Fatal(err)
	}
	// 30x100 -> 32x96; scale min(32/30, 96/100) = 0.96: inner 29x96 at x 1
	if got.W != 32 || got.H != 96 {
		t.Fatalf("size %dx%d", got.W, got.H)
	}
	for y := 0; y < got.H; y++ {
		for x := 0; x < got.W; x++ {
			r, _, _ := got.At(x, y)
			inside := x >= 1 && x < 30
			if (r != 0) != inside {
				t.Fatalf("pixel (%d,%d) = %d, inside %v", x, y, r, inside)
			}
		}
	}
}
