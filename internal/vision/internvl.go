package vision

import (
	"fmt"
	"math"
)

// InternVL is the dynamic tiling of InternVL models: the image is cut
// into a grid of Tile x Tile tiles, between MinTiles and MaxTiles of
// them, and (with Thumbnail) the whole image resized to one more tile.
//
// By default it follows Hugging Face's InternVL (dynamic_preprocess): the
// grid is the one whose aspect ratio is closest to the image's (on a tie,
// the later, larger grid when the image covers more than half of it), the
// image is stretched to the grid with Pillow's bicubic resampling and
// cut, and the thumbnail (the image stretched to one tile) is added only
// when there is more than one tile.
//
// With LlamaCpp it follows llama.cpp's mtmd (projector "internvl")
// exactly: an image no larger than a tile is only resized to one tile
// (the overview); a larger one takes the grid LLaVA-NeXT's
// select_best_resolution picks among the candidate grids (the largest
// effective resolution, then the least waste), is resized into it
// keeping its aspect ratio (bicubic, black letterbox), cut, and followed
// by the overview, a bilinear stretch of the image to one tile.
type InternVL struct {
	Tile               int
	MinTiles, MaxTiles int
	Thumbnail          bool
	LlamaCpp           bool
}

// InternVLImage is a preprocessed image: its Rows x Cols tiles in
// row-major order, then the overview (thumbnail) or nil.
type InternVLImage struct {
	Rows, Cols int
	Tiles      []*RGB
	Overview   *RGB
}

// Chunks is the number of encoder runs the image takes.
func (t *InternVLImage) Chunks() int {
	n := len(t.Tiles)
	if t.Overview != nil {
		n++
	}
	return n
}

func (p InternVL) check(img *RGB) error {
	if p.Tile <= 0 || p.MinTiles < 1 || p.MaxTiles < p.MinTiles {
		return fmt.Errorf("internvl preprocessing: tile %d, %d to %d tiles do not fit", p.Tile, p.MinTiles, p.MaxTiles)
	}
	if img.W <= 0 || img.H <= 0 {
		return fmt.Errorf("internvl preprocessing: empty image %dx%d", img.W, img.H)
	}
	return nil
}

// Grid returns the grid (cols, rows) an image of w x h is cut into; 0, 0
// when it is not cut (LlamaCpp, an image no larger than a tile).
func (p InternVL) Grid(w, h int) (cols, rows int) {
	if p.LlamaCpp {
		return p.bestResolution(w, h)
	}
	return p.closestAspect(w, h)
}

// closestAspect is Hugging Face's find_closest_aspect_ratio over the
// grids of MinTiles to MaxTiles tiles, by tile count.
func (p InternVL) closestAspect(w, h int) (cols, rows int) {
	aspect := float64(w) / float64(h)
	area := float64(w) * float64(h)
	best, bc, br := math.Inf(1), 1, 1
	for n := p.MinTiles; n <= p.MaxTiles; n++ {
		for i := 1; i <= n; i++ {
			if n%i != 0 {
				continue
			}
			j := n / i
			d := math.Abs(aspect - float64(i)/float64(j))
			switch {
			case d < best:
				best, bc, br = d, i, j
			case d == best && area > 0.5*float64(p.Tile*p.Tile*i*j):
				bc, br = i, j
			}
		}
	}
	return bc, br
}

// bestResolution is mtmd's llava_uhd slicing with pinpoints: no grid for
// an image within a tile, else select_best_resolution over the
// candidates (a*Tile, b*Tile) in mtmd's order.
func (p InternVL) bestResolution(w, h int) (cols, rows int) {
	if w <= p.Tile && h <= p.Tile {
		return 0, 0
	}
	bestEff, bestWaste := 0, math.MaxInt
	for a := p.MinTiles; a <= p.MaxTiles; a++ {
		for b := max((p.MinTiles+a-1)/a, p.MinTiles); b <= min(p.MaxTiles/a, p.MaxTiles); b++ {
			cw, ch := a*p.Tile, b*p.Tile
			scale := min(float32(cw)/float32(w), float32(ch)/float32(h))
			fw, fh := int(float32(w)*scale), int(float32(h)*scale)
			eff := min(fw*fh, w*h)
			waste := cw*ch - eff
			if eff > bestEff || (eff == bestEff && waste < bestWaste) {
				bestEff, bestWaste, cols, rows = eff, waste, a, b
			}
		}
	}
	return cols, rows
}

// Preprocess cuts img into its tiles and overview.
func (p InternVL) Preprocess(img *RGB) (*InternVLImage, error) {
	if err := p.check(img); err != nil {
		return nil, err
	}
	cols, rows := p.Grid(img.W, img.H)
	out := &InternVLImage{Rows: rows, Cols: cols}
	S := p.Tile
	if p.LlamaCpp {
		out.Overview = resizeBilinear(img, S, S)
		if cols == 0 {
			return out, nil
		}
		refined := padResize(img, cols*S, rows*S, resizeBicubic)
		out.Tiles = cutTiles(refined, cols, rows, S)
		return out, nil
	}
	out.Tiles = cutTiles(resizePillowBicubic(img, cols*S, rows*S), cols, rows, S)
	if p.Thumbnail && len(out.Tiles) > 1 {
		out.Overview = resizePillowBicubic(img, S, S)
	}
	return out, nil
}

// cutTiles cuts img (cols*S x rows*S) into its tiles, row by row.
func cutTiles(img *RGB, cols, rows, S int) []*RGB {
	var tiles []*RGB
	for y := 0; y < rows; y++ {
		for x := 0; x < cols; x++ {
			tiles = append(tiles, crop(img, x*S, y*S, S, S))
		}
	}
	return tiles
}

// Pillow's fixed-point precision of its 8-bit resampling.
const pillowPrecision = 32 - 8 - 2

// resizePillowBicubic resizes img to w x h as Pillow's Image.resize does
// with its BICUBIC filter (a = -0.5, the support widened by the scale when
// shrinking, coefficients normalized and rounded to 22-bit fixed point,
// a horizontal pass then a vertical one, each rounded and clamped to u8),
// the resampling Hugging Face's InternVL preprocessing runs.
func resizePillowBicubic(img *RGB, w, h int) *RGB {
	if img.W == w && img.H == h {
		return &RGB{W: w, H: h, Pix: append([]uint8(nil), img.Pix...)}
	}
	src := img
	if w != img.W {
		k, bounds, n := pillowCoeffs(img.W, w)
		tmp := NewRGB(w, img.H)
		for y := 0; y < img.H; y++ {
			row := img.Pix[3*y*img.W : 3*(y+1)*img.W]
			for x := 0; x < w; x++ {
				lo, cnt := bounds[2*x], bounds[2*x+1]
				kk := k[x*n : x*n+cnt]
				for c := 0; c < 3; c++ {
					ss := int64(1) << (pillowPrecision - 1)
					for i, kv := range kk {
						ss += int64(row[3*(lo+i)+c]) * int64(kv)
					}
					tmp.Pix[3*(y*w+x)+c] = pillowClip(ss)
				}
			}
		}
		src = tmp
	}
	if h == src.H {
		return src
	}
	k, bounds, n := pillowCoeffs(src.H, h)
	dst := NewRGB(w, h)
	for y := 0; y < h; y++ {
		lo, cnt := bounds[2*y], bounds[2*y+1]
		kk := k[y*n : y*n+cnt]
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				ss := int64(1) << (pillowPrecision - 1)
				for i, kv := range kk {
					ss += int64(src.Pix[3*((lo+i)*w+x)+c]) * int64(kv)
				}
				dst.Pix[3*(y*w+x)+c] = pillowClip(ss)
			}
		}
	}
	return dst
}

// pillowClip is Pillow's clip8: the fixed-point sum to u8.
func pillowClip(ss int64) uint8 {
	switch v := ss >> pillowPrecision; {
	case v < 0:
		return 0
	case v > 255:
		return 255
	default:
		return uint8(v)
	}
}

// pillowCubic is Pillow's bicubic filter (a = -0.5).
func pillowCubic(x float64) float64 {
	const a = -0.5
	x = math.Abs(x)
	switch {
	case x < 1:
		return ((a+2)*x-(a+3))*x*x + 1
	case x < 2:
		return (((x-5)*x+8)*x - 4) * a
	}
	return 0
}

// pillowCoeffs returns Pillow's fixed-point coefficients of a resize of
// in samples to out (n a sample, zero-padded) and each output sample's
// first source sample and count.
func pillowCoeffs(in, out int) (k []int32, bounds []int, n int) {
	scale := float64(in) / float64(out)
	fs := max(scale, 1)
	support := 2 * fs
	n = int(math.Ceil(support))*2 + 1
	k = make([]int32, out*n)
	bounds = make([]int, 2*out)
	w := make([]float64, n)
	for xx := 0; xx < out; xx++ {
		center := (float64(xx) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in) - lo
		var ww float64
		ss := 1 / fs
		for x := 0; x < hi; x++ {
			w[x] = pillowCubic((float64(x+lo) - center + 0.5) * ss)
			ww += w[x]
		}
		for x := 0; x < hi; x++ {
			v := w[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[xx*n+x] = int32(-0.5 + v*(1<<pillowPrecision))
			} else {
				k[xx*n+x] = int32(0.5 + v*(1<<pillowPrecision))
			}
		}
		bounds[2*xx], bounds[2*xx+1] = lo, hi
	}
	return k, bounds, n
}
