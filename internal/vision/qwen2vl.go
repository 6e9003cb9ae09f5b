package vision

import (
	"fmt"
	"math"
)

// Qwen2VL is the dynamic-resolution image processing of Qwen2-VL models as
// llama.cpp's mtmd library does it (projector "qwen2vl_merger"): the
// image keeps its own size, rounded to a multiple of Align (patch size
// times merge size) and kept between MinPixels and MaxPixels (Qwen's
// smart resize, with C++ rounding: halves away from zero), then it is
// resized bilinearly keeping its aspect ratio and letterboxed in black.
// Hugging Face's processor stretches with bicubic resampling, rounds
// halves to even and reads min/max pixels from preprocessor_config.json;
// llama.cpp fixes them at 8 and 4096 merged tokens, as here.
type Qwen2VL struct {
	Align     int // patch_size * merge_size
	MinPixels int // at least this many pixels after the resize
	MaxPixels int // at most this many pixels after the resize
}

// NewQwen2VL returns llama.cpp's processing for a patch size and merge
// size: 8 to 4096 merged tokens.
func NewQwen2VL(patch, merge int) Qwen2VL {
	a := patch * merge
	return Qwen2VL{Align: a, MinPixels: 8 * a * a, MaxPixels: 4096 * a * a}
}

// Size returns the size (w, h) an image of w x h is resized to: both
// multiples of Align.
func (p Qwen2VL) Size(w, h int) (int, int) {
	f := float32(p.Align)
	round := func(x float32) int { return int(math.Round(float64(x/f))) * p.Align }
	ceil := func(x float32) int { return int(math.Ceil(float64(x/f))) * p.Align }
	floor := func(x float32) int { return int(math.Floor(float64(x/f))) * p.Align }
	hb, wb := max(p.Align, round(float32(h))), max(p.Align, round(float32(w)))
	switch {
	case int64(hb)*int64(wb) > int64(p.MaxPixels):
		beta := float32(math.Sqrt(float64(float32(int64(h)*int64(w)) / float32(p.MaxPixels))))
		hb, wb = max(p.Align, floor(float32(h)/beta)), max(p.Align, floor(float32(w)/beta))
	case int64(hb)*int64(wb) < int64(p.MinPixels):
		beta := float32(math.Sqrt(float64(float32(p.MinPixels) / float32(int64(h)*int64(w)))))
		hb, wb = ceil(float32(h)*beta), ceil(float32(w)*beta)
	}
	return wb, hb
}

// Preprocess resizes img to Size, letterboxed: the returned image's sides
// are multiples of Align.
func (p Qwen2VL) Preprocess(img *RGB) (*RGB, error) {
	if p.Align <= 0 || p.MinPixels <= 0 || p.MaxPixels < p.MinPixels {
		return nil, fmt.Errorf("qwen2-vl preprocessing: align %d, min pixels %d, max pixels %d do not fit", p.Align, p.MinPixels, p.MaxPixels)
	}
	if img.W <= 0 || img.H <= 0 {
		return nil, fmt.Errorf("qwen2-vl preprocessing: empty image %dx%d", img.W, img.H)
	}
	w, h := p.Size(img.W, img.H)
	return padResize(img, w, h, resizeBilinear), nil
}

// padResize resizes img with resize to fit w x h keeping its aspect
// ratio, each side rounded up, centered on black (mtmd's PAD_CEIL).
func padResize(img *RGB, w, h int, resize func(*RGB, int, int) *RGB) *RGB {
	if img.W == w && img.H == h {
		return &RGB{W: w, H: h, Pix: append([]uint8(nil), img.Pix...)}
	}
	scale := min(float32(w)/float32(img.W), float32(h)/float32(img.H))
	nw := min(int(math.Ceil(float64(float32(img.W)*scale))), w)
	nh := min(int(math.Ceil(float64(float32(img.H)*scale))), h)
	inner := resize(img, nw, nh)
	dst := NewRGB(w, h)
	ox, oy := (w-nw)/2, (h-nh)/2
	for y := 0; y < nh; y++ {
		copy(dst.Pix[3*((y+oy)*w+ox):], inner.Pix[3*y*nw:3*(y+1)*nw])
	}
	return dst
}
