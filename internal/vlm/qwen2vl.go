package vlm

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/vision"
)

// Marker pieces of the Qwen2-VL prompt layout.
const (
	VisionStart = "<|vision_start|>"
	VisionEnd   = "<|vision_end|>"
	ImagePad    = "<|image_pad|>"
)

func init() {
	Register(&Family{
		Name: arch.Qwen2VLVisionFamily,
		OpenHF: func(ck format.Checkpoint, pre map[string]any) (FamilyModel, error) {
			q, err := arch.LoadQwen2VL(ck, pre)
			if err != nil {
				return nil, err
			}
			return &qwen2vl{m: q}, nil
		},
		OpenPair: func(text, mmproj format.Checkpoint) (FamilyModel, error) {
			q, err := arch.LoadQwen2VLPair(text, mmproj)
			if err != nil {
				return nil, err
			}
			return &qwen2vl{m: q}, nil
		},
		OpenCompiled: func(e *engine.Engine, threads int) (CompiledEncoder, error) { return OpenCompiledQwen2VL(e, threads) },
	})
}

// qwen2vl is a Qwen2-VL or Qwen2.5-VL model: an image resized to whole
// merge blocks and encoded in one run, its rows at M-RoPE positions.
type qwen2vl struct {
	m *arch.Qwen2VL
}

func (q *qwen2vl) Encoder() (*graph.Graph, graph.Weights, error) {
	g, err := arch.BuildQwen2VLVision(&q.m.Vision)
	return g, q.m.VisionWeights, err
}

func (q *qwen2vl) ImageToken() (int, string) { return q.m.Vision.ImageTokenID, ImagePad }

func (q *qwen2vl) TextModel() *arch.Model { return q.m.Text }

// Preprocess is timed inside Encode: one run.
func (q *qwen2vl) Preprocess(*vision.RGB) (int, error) { return 1, nil }

// Encode resizes, normalizes and encodes img: one chunk of Rows x Cols
// merged-patch embedding rows.
func (q *qwen2vl) Encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error) {
	vc := &q.m.Vision
	p, err := vision.NewQwen2VL(vc.PatchSize, vc.Merge).Preprocess(img)
	if err != nil {
		return nil, err
	}
	rows, pos, gr, gc, err := vc.Patches(vision.Normalize(p, vc.Mean, vc.Std), p.W, p.H)
	if err != nil {
		return nil, err
	}
	T := len(pos) / 2
	ids := make([]int, T)
	for i := range ids {
		ids[i] = i
	}
	out, _, err := enc.RunInput(enc.NewPassState(T), graph.Input{IDs: ids, Rows: rows, Positions: pos})
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return &Image{Rows: gr, Cols: gc, Embeds: out}, nil
}

// Place lays img out as mtmd does for Qwen2-VL: <|vision_start|>, the
// Rows*Cols embedding rows, <|vision_end|>. The image rows sit at M-RoPE
// positions (p0, p0+row, p0+col) and the text after them at
// p0+max(Rows, Cols).
func (q *qwen2vl) Place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	if img.Rows <= 0 || img.Cols <= 0 || len(img.Embeds) != img.Rows*img.Cols*width {
		return nil, fmt.Errorf("vlm: a Qwen2-VL image of %dx%d tokens holds %d values of width %d", img.Rows, img.Cols, len(img.Embeds), width)
	}
	start, ok := piece(VisionStart)
	end, ok2 := piece(VisionEnd)
	if !ok || !ok2 {
		return nil, fmt.Errorf("the vocabulary has no %s / %s tokens for image markers", VisionStart, VisionEnd)
	}
	p := &Placed{IDs: oneRun(start, img.Rows*img.Cols, end), Rows: img.Embeds, Span: max(img.Rows, img.Cols)}
	p.Pos = make([]int, 0, 3*img.Rows*img.Cols)
	for r := 0; r < img.Rows; r++ {
		for c := 0; c < img.Cols; c++ {
			p.Pos = append(p.Pos, 0, r, c)
		}
	}
	return p, nil
}
