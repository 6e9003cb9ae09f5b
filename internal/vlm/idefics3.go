package vlm

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/vision"
)

func init() {
	Register(&Family{
		Name: arch.Idefics3VisionFamily,
		OpenHF: func(ck format.Checkpoint, pre map[string]any) (FamilyModel, error) {
			v, err := arch.LoadVLM(ck, pre)
			if err != nil {
				return nil, err
			}
			return newIdefics3(v), nil
		},
		OpenPair: func(text, mmproj format.Checkpoint) (FamilyModel, error) {
			v, err := arch.LoadVLMPair(text, mmproj)
			if err != nil {
				return nil, err
			}
			return newIdefics3(v), nil
		},
		OpenCompiled: func(e *engine.Engine, threads int) (CompiledEncoder, error) { return OpenCompiled(e, threads) },
	})
}

// idefics3 is a SmolVLM / Idefics3 model: images cut into tiles and an
// overview, each encoded alone.
type idefics3 struct {
	v    *arch.VLM
	proc vision.Idefics3
}

func newIdefics3(v *arch.VLM) *idefics3 {
	return &idefics3{v: v, proc: vision.Idefics3{Tile: v.Vision.ImageSize, LongestEdge: v.Vision.LongestEdge}}
}

// New makes interpreters for a loaded SmolVLM / Idefics3 model.
func New(v *arch.VLM, threads int) (*Model, error) { return newModel(newIdefics3(v), threads) }

// EncodeTile runs the encoder and connector of a SmolVLM / Idefics3
// model on one ImageSize x ImageSize tile and returns TokensPerImage rows
// of the text width.
func (m *Model) EncodeTile(tile *vision.RGB) ([]float32, error) {
	return encodeTile(m.enc, &m.VLM.Vision, tile)
}

// fill sets Model.VLM.
func (f *idefics3) fill(m *Model) { m.VLM = f.v }

func (f *idefics3) Encoder() (*graph.Graph, graph.Weights, error) {
	g, err := arch.BuildVision(&f.v.Vision)
	return g, f.v.VisionWeights, err
}

func (f *idefics3) ImageToken() (int, string) { return f.v.Vision.ImageTokenID, ImageTok }

func (f *idefics3) TextModel() *arch.Model { return f.v.Text }

// Encode preprocesses img into tiles and encodes each.
func (f *idefics3) Encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error) {
	return encodeTiles(f.proc, img, func(tile *vision.RGB) ([]float32, error) { return encodeTile(enc, &f.v.Vision, tile) })
}

func (f *idefics3) Preprocess(img *vision.RGB) (int, error) { return preprocessTiles(f.proc, img) }

func (f *idefics3) Place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	return placeTiles(img, width, piece)
}

// encodeTile runs an interpreter of the encoder on one ImageSize x
// ImageSize tile and returns TokensPerImage rows of the text width.
func encodeTile(enc *graph.Interpreter, vc *arch.VisionConfig, tile *vision.RGB) ([]float32, error) {
	if tile.W != vc.ImageSize || tile.H != vc.ImageSize {
		return nil, fmt.Errorf("vision: tile of %dx%d, the encoder reads %dx%d", tile.W, tile.H, vc.ImageSize, vc.ImageSize)
	}
	rows, pos, err := vc.Patches(vision.Normalize(tile, vc.Mean, vc.Std))
	if err != nil {
		return nil, err
	}
	st := enc.NewState(len(pos))
	out, _, err := enc.RunInput(st, graph.Input{IDs: pos, Rows: rows})
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return out, nil
}

// encodeTiles preprocesses img with p and encodes its slices, then its
// overview, with tile.
func encodeTiles(p vision.Idefics3, img *vision.RGB, tile func(*vision.RGB) ([]float32, error)) (*Image, error) {
	t, err := p.Preprocess(img)
	if err != nil {
		return nil, err
	}
	out := &Image{Rows: t.Rows, Cols: t.Cols}
	for _, s := range t.Slices {
		e, err := tile(s)
		if err != nil {
			return nil, err
		}
		out.Slices = append(out.Slices, e)
	}
	if out.Overview, err = tile(t.Overview); err != nil {
		return nil, err
	}
	return out, nil
}

// preprocessTiles cuts img into tiles with p and returns how many
// encoder runs they take: the slices and the overview.
func preprocessTiles(p vision.Idefics3, img *vision.RGB) (int, error) {
	t, err := p.Preprocess(img)
	if err != nil {
		return 0, err
	}
	return len(t.Slices) + 1, nil
}

// placeTiles lays an encoded image out as mtmd does for Idefics3 (Layout),
// keeping the embedding rows only.
func placeTiles(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	ids, emb, err := Layout(img, width, piece)
	if err != nil {
		return nil, err
	}
	p := &Placed{IDs: ids}
	for i, id := range ids {
		if id == -1 {
			p.Rows = append(p.Rows, emb[i*width:(i+1)*width]...)
		}
	}
	p.Span = len(p.Rows) / width
	return p, nil
}
