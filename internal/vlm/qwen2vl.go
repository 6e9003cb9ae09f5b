package vlm

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
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

// qwen2vl is the Qwen2-VL part of a Model.
type qwen2vl struct {
	m    *arch.Qwen2VL
	proc vision.Qwen2VL
}

// newQwen2VL makes interpreters for a loaded Qwen2-VL model.
func newQwen2VL(q *arch.Qwen2VL, threads int) (*Model, error) {
	vg, err := arch.BuildQwen2VLVision(&q.Vision)
	if err != nil {
		return nil, err
	}
	enc, err := graph.NewInterpreter(vg, q.VisionWeights, threads)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	tg, err := arch.Build(&q.Text.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	text, err := graph.NewInterpreter(tg, q.Text.Weights, threads)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	return &Model{enc: enc, text: text,
		qwen: &qwen2vl{m: q, proc: vision.NewQwen2VL(q.Vision.PatchSize, q.Vision.Merge)}}, nil
}

// encode resizes, normalizes and encodes img: one chunk of Rows x Cols
// merged-patch embedding rows.
func (q *qwen2vl) encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error) {
	p, err := q.proc.Preprocess(img)
	if err != nil {
		return nil, err
	}
	vc := &q.m.Vision
	rows, pos, gr, gc, err := vc.Patches(vision.Normalize(p, vc.Mean, vc.Std), p.W, p.H)
	if err != nil {
		return nil, err
	}
	T := len(pos) / 2
	ids := make([]int, T)
	for i := range ids {
		ids[i] = i
	}
	out, _, err := enc.RunInput(enc.NewState(T), graph.Input{IDs: ids, Rows: rows, Positions: pos})
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return &Image{Rows: gr, Cols: gc, Embeds: out}, nil
}

// place lays img out as mtmd does for Qwen2-VL: <|vision_start|>, the
// Rows*Cols embedding rows, <|vision_end|>. The image rows sit at M-RoPE
// positions (p0, p0+row, p0+col) and the text after them at
// p0+max(Rows, Cols).
func (q *qwen2vl) place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error) {
	if img.Embeds == nil || len(img.Embeds) != img.Rows*img.Cols*width {
		return nil, fmt.Errorf("vlm: a Qwen2-VL image of %dx%d tokens holds %d values of width %d", img.Rows, img.Cols, len(img.Embeds), width)
	}
	ids := make([]int, 0, img.Rows*img.Cols+2)
	var err error
	mark := func(s string) {
		id, ok := piece(s)
		if !ok && err == nil {
			err = fmt.Errorf("the vocabulary has no token %q for image markers", s)
		}
		ids = append(ids, id)
	}
	p := &Placed{}
	mark(VisionStart)
	p.Text = append(p.Text, ids...)
	ids = ids[:0]
	mark(VisionEnd)
	if err != nil {
		return nil, err
	}
	p.After = ids
	p.Rows = img.Embeds
	for r := 0; r < img.Rows; r++ {
		for c := 0; c < img.Cols; c++ {
			p.Pos = append(p.Pos, 0, r, c)
		}
	}
	p.Span = max(img.Rows, img.Cols)
	return p, nil
}

// isQwen2VLProjector reports whether an mmproj file holds a Qwen2-VL
// vision encoder.
func isQwen2VLProjector(mm format.Checkpoint) bool {
	p, _ := format.MetaString(mm.Metadata(), "clip.projector_type")
	return p == "qwen2vl_merger"
}
