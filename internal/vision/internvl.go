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
// image is stretched to the grid and cut, and the thumbnail is added only
// when there is more than one tile. Hugging Face resizes with PIL's
// bicubic filter; this uses mtmd's bicubic, so its pixels differ slightly.
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
	stretched := img
	if img.W != cols*S || img.H != rows*S {
		stretched = resizeBicubic(img, cols*S, rows*S)
	}
	out.Tiles = cutTiles(stretched, cols, rows, S)
	if p.Thumbnail && len(out.Tiles) > 1 {
		if img.W == S && img.H == S {
			out.Overview = &RGB{W: S, H: S, Pix: append([]uint8(nil), img.Pix...)}
		} else {
			out.Overview = resizeBicubic(img, S, S)
		}
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
