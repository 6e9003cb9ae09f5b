package vlm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/engine"
)

// ImageSequence is an engine session that places image embedding rows:
// each prompt row holding the image token id takes the next queued
// embedding row instead of the token's own embedding. It implements the
// runtime's Sequence.
type ImageSequence struct {
	s       *engine.Session
	imageID int
	width   int
	queue   []float32 // embedding rows not placed yet
	ids     []int
	emb     []float32
	sel     [1]int
	all     []int
}

// NewImageSequence wraps s; width is the text model's embedding width.
func NewImageSequence(s *engine.Session, imageID, width int) *ImageSequence {
	return &ImageSequence{s: s, imageID: imageID, width: width}
}

// Queue appends embedding rows (whole rows of the width) to place at the
// next image-token rows.
func (q *ImageSequence) Queue(rows []float32) error {
	if len(rows)%q.width != 0 {
		return fmt.Errorf("image rows of %d values are not rows of %d", len(rows), q.width)
	}
	q.queue = append(q.queue, rows...)
	return nil
}

// Pending is the number of queued rows not placed yet.
func (q *ImageSequence) Pending() int { return len(q.queue) / q.width }

// PrefillContext feeds ids in passes of the session's largest plan,
// commits them, and returns the logits after the last one.
func (q *ImageSequence) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("vlm: no tokens")
	}
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
		images := false
		for _, id := range chunk {
			row := make([]float32, q.width)
			if id == q.imageID {
				copy(row, q.queue[:q.width])
				q.queue = q.queue[q.width:]
				id, images = -1, true
			}
			q.ids = append(q.ids, id)
			q.emb = append(q.emb, row...)
		}
		p := &engine.Pass{IDs: q.ids, Logits: []int{}}
		if images {
			p.Embeds = q.emb
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
