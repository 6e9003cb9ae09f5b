package vlm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/engine"
)

// ImageSequence is an engine session that places image embedding rows:
// each prompt row holding the image token id takes the next queued
// embedding row instead of the token's own embedding. When the text model
// reads multi-component rotary positions (Qwen2-VL's M-RoPE), a prefill
// pass carries them: an image's rows at their queued relative positions,
// text after an image continuing from the image's span; the session keeps
// that offset for the passes after it (engine.Session.NextPosition). It
// implements the runtime's Sequence.
type ImageSequence struct {
	s       *engine.Session
	imageID int
	width   int
	pl      placer
	mrope   bool // prefill passes carry Positions
	ids     []int
	emb     []float32
	pos     []int
	sel     [1]int
	all     []int
}

// NewImageSequence wraps s; width is the text model's embedding width.
func NewImageSequence(s *engine.Session, imageID, width int) *ImageSequence {
	P := s.PosComponents()
	return &ImageSequence{s: s, imageID: imageID, width: width, pl: placer{P: P, width: width}, mrope: P > 1}
}

// Queue appends embedding rows (whole rows of the width) to place at the
// next image-token rows, at consecutive positions.
func (q *ImageSequence) Queue(rows []float32) error {
	if len(rows) == 0 {
		return nil
	}
	return q.pl.add(rows, nil, 0)
}

// QueueImage appends one image's rows with their rotary positions
// relative to its first row (Placed.Pos, Placed.Span).
func (q *ImageSequence) QueueImage(rows []float32, pos []int, span int) error {
	return q.pl.add(rows, pos, span)
}

// Pending is the number of queued rows not placed yet.
func (q *ImageSequence) Pending() int { return q.pl.pending() }

// PrefillContext feeds ids in passes of the session's largest plan,
// commits them, and returns the logits after the last one.
func (q *ImageSequence) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("vlm: no tokens")
	}
	q.pl.next = q.s.NextPosition()
	n := q.s.MaxRows()
	need := 0
	for _, id := range ids {
		if id == q.imageID {
			need++
		}
	}
	if need > q.Pending() {
		return nil, fmt.Errorf("vlm: the prompt has %d image positions, %d embedding rows are queued", need, q.Pending())
	}
	var last []float32
	for lo := 0; lo < len(ids); lo += n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := ids[lo:min(lo+n, len(ids))]
		q.ids = q.ids[:0]
		q.emb = q.emb[:0]
		q.pos = q.pos[:0]
		images := false
		for _, id := range chunk {
			row := make([]float32, q.width)
			pos := make([]int, q.pl.P)
			if id == q.imageID {
				q.pl.image(pos, row)
				id, images = -1, true
			} else {
				q.pl.text(pos)
			}
			q.ids = append(q.ids, id)
			q.emb = append(q.emb, row...)
			q.pos = append(q.pos, pos...)
		}
		p := &engine.Pass{IDs: q.ids, Logits: []int{}}
		if images {
			p.Embeds = q.emb
		}
		if q.mrope {
			p.Positions = q.pos
		}
		if lo+n >= len(ids) {
			q.sel[0] = len(chunk) - 1
			p.Logits = q.sel[:]
		}
		out, err := q.s.Run(p)
		if err != nil {
			return nil, err
		}
		q.all = q.all[:0]
		for i := range chunk {
			q.all = append(q.all, i)
		}
		if err := q.s.Commit(q.all); err != nil {
			return nil, err
		}
		if out.Rows() > 0 {
			last = out.Row(0)
		}
	}
	return last, nil
}

// Decode feeds one generated id.
func (q *ImageSequence) Decode(id int) ([]float32, error) { return q.s.Decode(id) }

// Rewind drops committed positions from pos on.
func (q *ImageSequence) Rewind(pos int) error { return q.s.Rewind(pos) }

// Pos is the number of committed positions.
func (q *ImageSequence) Pos() int { return q.s.Pos() }

// Context is the session's capacity.
func (q *ImageSequence) Context() int { return q.s.Context() }

// Close releases the session.
func (q *ImageSequence) Close() { q.s.Close() }
