package vlm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/graph"
)

// InterpSequence is the text model run by the graph interpreter with
// image rows placed as ImageSequence places them: each prompt row holding
// the image token id takes the next queued embedding row. It implements
// the runtime's Sequence (the path of a model that is not compiled).
type InterpSequence struct {
	m       *Model
	st      *graph.State
	imageID int
	queue   []float32
}

// NewSequence returns an interpreter sequence of ctx positions whose
// imageID rows read queued embedding rows.
func (m *Model) NewSequence(ctx, imageID int) *InterpSequence {
	return &InterpSequence{m: m, st: m.text.NewState(ctx), imageID: imageID}
}

// Queue appends embedding rows (whole rows of the text width) to place at
// the next image-token rows.
func (q *InterpSequence) Queue(rows []float32) error {
	w := q.m.TextConfig().Hidden
	if len(rows)%w != 0 {
		return fmt.Errorf("image rows of %d values are not rows of %d", len(rows), w)
	}
	q.queue = append(q.queue, rows...)
	return nil
}

// PrefillContext feeds ids in one pass, commits them and returns the
// logits after the last one.
func (q *InterpSequence) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("vlm: no tokens")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := q.m.TextConfig().Hidden
	in := graph.Input{IDs: append([]int(nil), ids...)}
	used := 0
	for i, id := range ids {
		if id != q.imageID {
			continue
		}
		if (used+1)*w > len(q.queue) {
			return nil, fmt.Errorf("vlm: the prompt has more image positions than the %d embedding rows queued", len(q.queue)/w)
		}
		if in.Embeds == nil {
			in.Embeds = make([]float32, len(ids)*w)
		}
		copy(in.Embeds[i*w:(i+1)*w], q.queue[used*w:(used+1)*w])
		in.IDs[i] = -1
		used++
	}
	out, rows, err := q.m.text.RunInput(q.st, in)
	if err != nil {
		return nil, err
	}
	q.queue = q.queue[used*w:]
	V := len(out) / rows
	return out[(rows-1)*V:], nil
}

// Decode feeds one id and returns the logits after it.
func (q *InterpSequence) Decode(id int) ([]float32, error) {
	return q.PrefillContext(context.Background(), []int{id})
}

// Rewind drops the positions from pos on.
func (q *InterpSequence) Rewind(pos int) error {
	if pos < 0 || pos > q.st.Pos {
		return fmt.Errorf("vlm: rewind to %d: %d positions are committed", pos, q.st.Pos)
	}
	q.st.Pos = pos
	return nil
}

// Pos is the number of committed positions.
func (q *InterpSequence) Pos() int { return q.st.Pos }

// Context is the capacity of the sequence.
func (q *InterpSequence) Context() int { return q.st.Ctx }

// Close releases nothing: the state is garbage collected.
func (q *InterpSequence) Close() {}
