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
			px, py := float32(float32(x)*xr), float32(float32(y)*yr)
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
	// per output column: the offsets of the 4 source columns (clamped) and
	// the fraction; per output row the same for source rows
	type tap struct {
		off [4]int
		d   float32
	}
	taps := func(n, src int, step float32, stride int) []tap {
		t := make([]tap, n)
		for i := range t {
			s := float32(step * float32(i))
			x := int(s)
			t[i].d = s - float32(x)
			for k := range t[i].off {
				t[i].off[k] = max(0, min(x-1+k, src-1)) * stride
			}
		}
		return t
	}
	cols, rows := taps(w, img.W, tx, 3), taps(h, img.H, ty, 3*img.W)
	// The horizontal pass of a source row at an output column does not
	// depend on the output row, so each source row is interpolated once
	// (the same arithmetic as interpolating it for every output row) and
	// kept while the output rows need it: the 4 rows one output row reads
	// are consecutive before clamping, so they never share a slot.
	var hrow [4][]float32
	var tag [4]int
	for s := range hrow {
		hrow[s], tag[s] = make([]float32, 3*w), -1
	}
	horizontal := func(off int) []float32 {
		s := (off / (3 * img.W)) % 4
		if tag[s] == off {
			return hrow[s]
		}
		row, out := img.Pix[off:off+3*img.W], hrow[s]
		for j, c := range cols {
			for k := 0; k < 3; k++ {
				a0 := float32(row[c.off[1]+k])
				out[3*j+k] = bicubicTap(a0, float32(row[c.off[0]+k])-a0, float32(row[c.off[2]+k])-a0, float32(row[c.off[3]+k])-a0, c.d)
			}
		}
		tag[s] = off
		return out
	}
	for i, r := range rows {
		var C [4][]float32
		for jj := range C {
			C[jj] = horizontal(r.off[jj])
		}
		o := dst.Pix[3*i*w : 3*(i+1)*w]
		for q := range o {
			cc := bicubicTap(C[1][q], C[0][q]-C[1][q], C[2][q]-C[1][q], C[3][q]-C[1][q], r.d)
			o[q] = uint8(min(max(float32(math.Round(float64(cc))), 0), 255))
		}
	}
	return dst
}

// bicubicTap interpolates at t in [0,1) between a0 and the next sample
// from the differences d0, d2, d3 of the previous and the two next samples
// to a0. The coefficients are evaluated in double and stored in float, the
// polynomial in float, as mtmd does; every product is converted explicitly
// so that no platform fuses it into a multiply-add (mtmd's build has none).
func bicubicTap(a0, d0, d2, d3, t float32) float32 {
	a1 := float32(float64(-1.0/3*float64(d0)) + float64(d2) - float64(1.0/6*float64(d3)))
	a2 := float32(float64(1.0/2*float64(d0)) + float64(1.0/2*float64(d2)))
	a3 := float32(float64(-1.0/6*float64(d0)) - float64(1.0/2*float64(d2)) + float64(1.0/6*float64(d3)))
	return a0 + float32(a1*t) + float32(float32(a2*t)*t) + float32(float32(float32(a3*t)*t)*t)
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
