package vlm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/vision"
)

// Compiled is the image half of a vision-language artifact: the vision
// plan run by the engine, with the preprocessing and the prompt markers
// its manifest carries, so that nothing but the artifact is needed.
type Compiled struct {
	Vision  arch.VisionConfig
	Proc    vision.Idefics3
	Markers map[string]int
	enc     *engine.Encoder
}

// OpenCompiled prepares the vision plan of e's artifact (an Idefics3
// encoder: one plan for its one tile size) with up to threads workers.
func OpenCompiled(e *engine.Engine, threads int) (*Compiled, error) {
	mv := e.Manifest().Vision
	if mv == nil {
		return nil, errors.New("vlm: the artifact has no vision encoder")
	}
	if mv.Family != arch.Idefics3VisionFamily {
		return nil, fmt.Errorf("vlm: the artifact's vision encoder is of family %q, not %s", mv.Family, arch.Idefics3VisionFamily)
	}
	var vc arch.VisionConfig
	if err := json.Unmarshal(mv.Config, &vc); err != nil {
		return nil, fmt.Errorf("vlm: the artifact's vision config: %w", err)
	}
	if err := vc.Validate(); err != nil {
		return nil, fmt.Errorf("vlm: the artifact's vision config: %w", err)
	}
	enc, err := e.NewEncoder(plan.VisionPlanName(vc.ImageSize, vc.ImageSize), threads)
	if err != nil {
		return nil, err
	}
	n := vc.Grid() * vc.Grid()
	if r, c := enc.Output(); enc.Rows() != n || enc.InputCols() != vc.Channels*vc.PatchSize*vc.PatchSize ||
		r != vc.TokensPerImage() || c != vc.TextHidden {
		enc.Close()
		return nil, fmt.Errorf("vlm: the vision plan reads %d rows of %d and writes %dx%d; its config needs %d of %d and %dx%d",
			enc.Rows(), enc.InputCols(), r, c, n, vc.Channels*vc.PatchSize*vc.PatchSize, vc.TokensPerImage(), vc.TextHidden)
	}
	return &Compiled{Vision: vc, Proc: vision.Idefics3{Tile: vc.ImageSize, LongestEdge: vc.LongestEdge},
		Markers: mv.Markers, enc: enc}, nil
}

// EncodeTile runs the compiled encoder on one ImageSize x ImageSize tile
// and returns TokensPerImage rows of the text width (a copy).
func (c *Compiled) EncodeTile(tile *vision.RGB) ([]float32, error) {
	vc := &c.Vision
	if tile.W != vc.ImageSize || tile.H != vc.ImageSize {
		return nil, fmt.Errorf("vision: tile of %dx%d, the encoder reads %dx%d", tile.W, tile.H, vc.ImageSize, vc.ImageSize)
	}
	rows, pos, err := vc.Patches(vision.Normalize(tile, vc.Mean, vc.Std))
	if err != nil {
		return nil, err
	}
	out, err := c.enc.Encode(rows, pos)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return append([]float32(nil), out...), nil
}

// Encode preprocesses and encodes an image.
func (c *Compiled) Encode(img *vision.RGB) (*Image, error) {
	return encodeTiles(c.Proc, img, c.EncodeTile)
}

// Preprocess cuts img into tiles: the slices and the overview, one
// encoder run each.
func (c *Compiled) Preprocess(img *vision.RGB) (int, error) { return preprocessTiles(c.Proc, img) }

// TextWidth is the width of the embedding rows.
func (c *Compiled) TextWidth() int { return c.Vision.TextHidden }

// Place lays img out as mtmd does for Idefics3 (Layout): markers the
// artifact recorded, else looked up with look.
func (c *Compiled) Place(img *Image, look func(string) (int, bool)) (*Placed, error) {
	return placeTiles(img, c.Vision.TextHidden, c.piece(look))
}

// ImageTokenID is <image>'s id: the artifact's, else looked up.
func (c *Compiled) ImageTokenID(look func(string) (int, bool)) (int, error) {
	if c.Vision.ImageTokenID >= 0 {
		return c.Vision.ImageTokenID, nil
	}
	if id, ok := c.piece(look)(ImageTok); ok {
		return id, nil
	}
	return 0, fmt.Errorf("the vocabulary has no %s token", ImageTok)
}

// SetFallback does nothing: tiles hold every image.
func (c *Compiled) SetFallback(Encoder) {}

// piece looks a marker up in the artifact's markers, then with look.
func (c *Compiled) piece(look func(string) (int, bool)) func(string) (int, bool) {
	return func(s string) (int, bool) {
		if id, ok := c.Piece(s); ok {
			return id, true
		}
		if look == nil {
			return 0, false
		}
		return look(s)
	}
}

// Piece returns the token id of a marker piece the artifact recorded.
func (c *Compiled) Piece(s string) (int, bool) {
	id, ok := c.Markers[s]
	return id, ok
}

// Close releases the encoder.
func (c *Compiled) Close() { c.enc.Close() }
