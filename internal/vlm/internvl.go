package vlm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/vision"
)

// Marker pieces of the InternVL prompt layout.
const (
	ImgStart   = "<img>"
	ImgEnd     = "</img>"
	ImgContext = "<IMG_CONTEXT>"
)

func init() {
	Register(&Family{
		Name: arch.InternVLVisionFamily,
		OpenHF: func(ck format.Checkpoint, pre map[string]any) (FamilyModel, error) {
			m, err := arch.LoadInternVL(ck, pre)
			if err != nil {
				return nil, err
			}
			return &internvl{m: m}, nil
		},
		OpenPair: func(text, mmproj format.Checkpoint) (FamilyModel, error) {
			m, err := arch.LoadInternVLPair(text, mmproj)
			if err != nil {
				return nil, err
			}
			return &internvl{m: m}, nil
		},
		OpenCompiled: func(e *engine.Engine, threads int) (CompiledEncoder, error) { return OpenCompiledInternVL(e, threads) },
	})
}

// internvl is an InternVL model: images cut into tiles and a thumbnail,
// each encoded alone, laid out between <img> and </img>.
type internvl struct {
	m *arch.InternVL
}

// setLlamaCpp sets the vision config's switch (Options.LlamaCpp).
func (f *internvl) setLlamaCpp(on bool) { f.m.Vision.LlamaCpp = on }

func (f *internvl) Encoder() (*graph.Graph, graph.Weights, error) {
	g, err := arch.BuildInternVLVision(&f.m.Vision)
	return g, f.m.Vision.EncoderWeights(f.m.VisionWeights), err
}

func (f *internvl) ImageToken() (int, string) { return f.m.Vision.ImageTokenID, ImgContext }

func (f *internvl) TextModel() *arch.Model { return f.m.Text }

// internvlProc is the tiling of the encoder vc.
func internvlProc(vc *arch.InternVLVision) vision.InternVL {
	return vision.InternVL{Tile: vc.ImageSize, MinTiles: vc.MinTiles, MaxTiles: vc.MaxTiles, Thumbnail: vc.Thumbnail, LlamaCpp: vc.LlamaCpp}
}

// Encode cuts img into tiles and encodes each.
func (f *internvl) Encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error) {
	vc := &f.m.Vision
	return encodeInternVL(vc, img, func(rows []float32, ids []int) ([]float32, error) {
		out, _, err := enc.RunInput(enc.NewPassState(len(ids)), graph.Input{IDs: ids, Rows: rows})
		return out, err
	})
}

func (f *internvl) Preprocess(img *vision.RGB) (int, error) {
	t, err := internvlProc(&f.m.Vision).Preprocess(img)
	if err != nil {
		return 0, err
	}
	return t.Chunks(), nil
}

func (f *internvl) Place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	return placeInternVL(img, width, piece)
}

// encodeInternVL preprocesses img for vc and runs each tile, then the
// overview, through run (the encoder over one tile's rows and ids).
func encodeInternVL(vc *arch.InternVLVision, img *vision.RGB, run func(rows []float32, ids []int) ([]float32, error)) (*Image, error) {
	t, err := internvlProc(vc).Preprocess(img)
	if err != nil {
		return nil, err
	}
	tile := func(p *vision.RGB) ([]float32, error) {
		if p.W != vc.ImageSize || p.H != vc.ImageSize {
			return nil, fmt.Errorf("vision: tile of %dx%d, the encoder reads %dx%d", p.W, p.H, vc.ImageSize, vc.ImageSize)
		}
		rows, ids, err := vc.Rows(vision.Normalize(p, vc.Mean, vc.Std))
		if err != nil {
			return nil, err
		}
		out, err := run(rows, ids)
		if err != nil {
			return nil, fmt.Errorf("vision encoder: %w", err)
		}
		if len(out) != vc.TokensPerTile()*vc.TextHidden {
			return nil, fmt.Errorf("vision encoder: %d values for a tile, want %dx%d", len(out), vc.TokensPerTile(), vc.TextHidden)
		}
		return append([]float32(nil), out...), nil
	}
	out := &Image{Rows: t.Rows, Cols: t.Cols}
	for _, s := range t.Tiles {
		e, err := tile(s)
		if err != nil {
			return nil, err
		}
		out.Slices = append(out.Slices, e)
	}
	if t.Overview != nil {
		if out.Overview, err = tile(t.Overview); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// placeInternVL lays an encoded image out as InternVL's prompt (and
// mtmd) does: <img>, the rows of every tile, then of the overview, at
// consecutive positions, </img>.
func placeInternVL(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	start, ok := piece(ImgStart)
	end, ok2 := piece(ImgEnd)
	if !ok || !ok2 {
		return nil, fmt.Errorf("the vocabulary has no %s / %s tokens for image markers", ImgStart, ImgEnd)
	}
	var rows []float32
	for _, s := range img.Slices {
		rows = append(rows, s...)
	}
	rows = append(rows, img.Overview...)
	n := len(rows) / max(width, 1)
	if n == 0 || n*width != len(rows) {
		return nil, fmt.Errorf("vlm: an InternVL image of %d values is not rows of %d", len(rows), width)
	}
	return &Placed{IDs: oneRun(start, n, end), Rows: rows, Span: n}, nil
}

// CompiledInternVL is the image half of an InternVL artifact: the vision
// plan of its one tile size run by the engine, with the tiling and the
// prompt markers its manifest carries.
type CompiledInternVL struct {
	Vision  arch.InternVLVision
	Markers map[string]int
	enc     *engine.Encoder
}

// OpenCompiledInternVL prepares the vision plan of e's artifact (an
// InternVL encoder) to run with up to threads workers.
func OpenCompiledInternVL(e *engine.Engine, threads int) (*CompiledInternVL, error) {
	mv := e.Manifest().Vision
	if mv == nil || mv.Family != arch.InternVLVisionFamily {
		return nil, errors.New("vlm: the artifact has no InternVL vision encoder")
	}
	var vc arch.InternVLVision
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
	n := vc.Grid()*vc.Grid() + 1
	if r, c := enc.Output(); enc.Rows() != n || enc.InputCols() != vc.PatchCols() || r != vc.TokensPerTile() || c != vc.TextHidden {
		enc.Close()
		return nil, fmt.Errorf("vlm: the vision plan reads %d rows of %d and writes %dx%d; its config needs %d of %d and %dx%d",
			enc.Rows(), enc.InputCols(), r, c, n, vc.PatchCols(), vc.TokensPerTile(), vc.TextHidden)
	}
	return &CompiledInternVL{Vision: vc, Markers: mv.Markers, enc: enc}, nil
}

// Encode preprocesses and encodes an image.
func (c *CompiledInternVL) Encode(img *vision.RGB) (*Image, error) {
	return encodeInternVL(&c.Vision, img, c.enc.Encode)
}

// Preprocess cuts img into tiles: one encoder run each.
func (c *CompiledInternVL) Preprocess(img *vision.RGB) (int, error) {
	t, err := internvlProc(&c.Vision).Preprocess(img)
	if err != nil {
		return 0, err
	}
	return t.Chunks(), nil
}

// TextWidth is the width of the embedding rows.
func (c *CompiledInternVL) TextWidth() int { return c.Vision.TextHidden }

// Place lays img out as InternVL does (<img>, the rows, </img>): markers
// the artifact recorded, else looked up with look.
func (c *CompiledInternVL) Place(img *Image, look func(string) (int, bool)) (*Placed, error) {
	return placeInternVL(img, c.Vision.TextHidden, c.piece(look))
}

// ImageTokenID is <IMG_CONTEXT>'s id: the artifact's, else looked up.
func (c *CompiledInternVL) ImageTokenID(look func(string) (int, bool)) (int, error) {
	if c.Vision.ImageTokenID >= 0 {
		return c.Vision.ImageTokenID, nil
	}
	if id, ok := c.piece(look)(ImgContext); ok {
		return id, nil
	}
	return 0, fmt.Errorf("the vocabulary has no %s token", ImgContext)
}

// SetFallback does nothing: tiles hold every image.
func (c *CompiledInternVL) SetFallback(Encoder) {}

// piece looks a marker up in the artifact's markers, then with look.
func (c *CompiledInternVL) piece(look func(string) (int, bool)) func(string) (int, bool) {
	return func(s string) (int, bool) {
		if id, ok := c.Markers[s]; ok {
			return id, true
		}
		if look == nil {
			return 0, false
		}
		return look(s)
	}
}

// Close releases the encoder.
func (c *CompiledInternVL) Close() { c.enc.Close() }
