package vision

import (
	"fmt"
	"math"
)

// Idefics3 is the image processing of SmolVLM / Idefics3 models as
// llama.cpp's mtmd library does it (projector "idefics3"): the image is
// resized, keeping its aspect ratio, so its longest side is LongestEdge,
// each side rounded up to a multiple of Tile; that refined image (a
// bicubic resize letterboxed in black) is cut into Tile x Tile slices,
// row by row; the overview is a bilinear stretch of the whole image to
// Tile x Tile. Hugging Face's processor resizes with Lanczos and does not
// letterbox, so its pixels differ from these for images that are not
// already square tiles.
type Idefics3 struct {
	Tile        int // the encoder's image size (vision_config.image_size)
	LongestEdge int // preprocessor_config size.longest_edge
}

// Idefics3Image is a preprocessed image: its slices in row-major grid
// order, then the overview.
type Idefics3Image struct {
	Rows, Cols int    // grid of slices
	Slices     []*RGB // Rows*Cols slices of Tile x Tile
	Overview   *RGB   // Tile x Tile
}

// Preprocess slices img.
func (p Idefics3) Preprocess(img *RGB) (*Idefics3Image, error) {
	if p.Tile <= 0 || p.LongestEdge <= 0 {
		return nil, fmt.Errorf("idefics3 preprocessing: tile %d and longest edge %d must be positive", p.Tile, p.LongestEdge)
	}
	if img.W <= 0 || img.H <= 0 {
		return nil, fmt.Errorf("idefics3 preprocessing: empty image %dx%d", img.W, img.H)
	}
	// refined size: float32 arithmetic as mtmd's calc_size_preserved_ratio
	scale := min(float32(p.LongestEdge)/float32(img.W), float32(p.LongestEdge)/float32(img.H))
	ceilTo := func(x float32) int {
		return int(math.Ceil(float64(x/float32(p.Tile)))) * p.Tile
	}
	rw, rh := ceilTo(float32(img.W)*scale), ceilTo(float32(img.H)*scale)
	out := &Idefics3Image{Cols: rw / p.Tile, Rows: rh / p.Tile}
	out.Overview = resizeBilinear(img, p.Tile, p.Tile)
	refined := letterbox(img, rw, rh)
	for y := 0; y < rh; y += p.Tile {
		for x := 0; x < rw; x += p.Tile {
			out.Slices = append(out.Slices, crop(refined, x, y, p.Tile, p.Tile))
		}
	}
	return out, nil
}

// letterbox resizes img (bicubic) to fit w x h keeping its aspect ratio,
// each side rounded up, centered on black.
func letterbox(img *RGB, w, h int) *RGB { return padResize(img, w, h, resizeBicubic) }

func crop(img *RGB, x, y, w, h int) *RGB {
	dst := NewRGB(w, h)
	for r := 0; r < h; r++ {
		copy(dst.Pix[3*r*w:3*(r+1)*w], img.Pix[3*((y+r)*img.W+x):3*((y+r)*img.W+x+w)])
	}
	return dst
}

// resizeBilinear stretches img to w x h, sampling corner to corner
// (mtmd's bilinear: source step (W-1)/(w-1), truncating to u8).
func resizeBilinear(img *RGB, w, h int) *RGB {
	if img.W == w && img.H == h {
		return &RGB{W: w, H: h, Pix: append([]uint8(nil), img.Pix...)}
	}
	dst := NewRGB(w, h)
	var xr, yr float32
	if w > 1 {
		xr = float32(img.W-1) / float32(w-1)
	}
	if h > 1 {
		yr = float32(img.H-1) / float32(h-1)
	}
	lerp := func(s, e, t float32) float32 { return s + float32((e-s)*t) }
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			px, py := float32(x)*xr, float32(y)*yr
			x0, y0 := min(int(px), img.W-1), min(int(py), img.H-1)
			x1, y1 := min(x0+1, img.W-1), min(y0+1, img.H-1)
			xf, yf := px-float32(x0), py-float32(y0)
			for c := 0; c < 3; c++ {
				p00 := float32(img.Pix[3*(y0*img.W+x0)+c])
				p10 := float32(img.Pix[3*(y0*img.W+x1)+c])
				p01 := float32(img.Pix[3*(y1*img.W+x0)+c])
				p11 := float32(img.Pix[3*(y1*img.W+x1)+c])
				top, bottom := lerp(p00, p10, xf), lerp(p01, p11, xf)
				dst.Pix[3*(y*w+x)+c] = uint8(lerp(top, bottom, yf))
			}
		}
	}
	return dst
}

// resizeBicubic resizes img to w x h with the cubic convolution mtmd's
// resize_bicubic uses (4x4 neighbourhood from the top-left-aligned source
// point, clamped edges, rounded and clamped to u8).
func resizeBicubic(img *RGB, w, h int) *RGB {
	dst := NewRGB(w, h)
	tx, ty := float32(img.W)/float32(w), float32(img.H)/float32(h)
	clampi := func(v, hi int) int { return max(0, min(v, hi)) }
	px := func(x, y, c int) float32 {
		return float32(img.Pix[3*(clampi(y, img.H-1)*img.W+clampi(x, img.W-1))+c])
	}
	// the coefficient lines are evaluated in double and stored in float
	coef := func(d0, d2, d3 float32) (a1, a2, a3 float32) {
		a1 = float32(-1.0/3*float64(d0) + float64(d2) - 1.0/6*float64(d3))
		a2 = float32(1.0/2*float64(d0) + 1.0/2*float64(d2))
		a3 = float32(-1.0/6*float64(d0) - 1.0/2*float64(d2) + 1.0/6*float64(d3))
		return
	}
	cubic := func(a0, a1, a2, a3, t float32) float32 {
		return a0 + float32(a1*t) + float32(float32(a2*t)*t) + float32(float32(float32(a3*t)*t)*t)
	}
	var C [4]float32
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			x, y := int(tx*float32(j)), int(ty*float32(i))
			dx, dy := tx*float32(j)-float32(x), ty*float32(i)-float32(y)
			for k := 0; k < 3; k++ {
				for jj := 0; jj < 4; jj++ {
					yy := y - 1 + jj
					a0 := px(x, yy, k)
					a1, a2, a3 := coef(px(x-1, yy, k)-a0, px(x+1, yy, k)-a0, px(x+2, yy, k)-a0)
					C[jj] = cubic(a0, a1, a2, a3, dx)
				}
				a1, a2, a3 := coef(C[0]-C[1], C[2]-C[1], C[3]-C[1])
				cc := cubic(C[1], a1, a2, a3, dy)
				dst.Pix[3*(i*w+j)+k] = uint8(min(max(float32(math.Round(float64(cc))), 0), 255))
			}
		}
	}
	return dst
}

// Normalize returns the pixels of img as a [3][H][W] float32 tensor
// (channel planes), (u8/255 - mean[c]) / std[c].
func Normalize(img *RGB, mean, std [3]float32) []float32 {
	n := img.W * img.H
	out := make([]float32, 3*n)
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			out[c*n+i] = (float32(img.Pix[3*i+c])/255 - mean[c]) / std[c]
		}
	}
	return out
}
