package vlm

import (
	"errors"
	"fmt"
)

// Placed is an image laid out for a prompt: its ids (-1 at each embedding
// row, marker tokens around them), the embedding rows in order, and where
// the rows sit in rotary positions.
type Placed struct {
	IDs  []int
	Rows []float32
	// Pos holds the rotary position of each embedding row relative to
	// the first one, PosComponents values a row (Qwen2-VL: (0, row,
	// col)); nil means consecutive positions like text (markers between
	// the rows included). With Pos, Span is how many positions the rows
	// take: the text after them continues Span after the first row.
	Pos  []int
	Span int
}

// oneRun returns the ids of marker start, n embedding rows, marker end.
func oneRun(start, n, end int) []int {
	ids := make([]int, 0, n+2)
	ids = append(ids, start)
	for range n {
		ids = append(ids, -1)
	}
	return append(ids, end)
}

// queued is an image's rows waiting for their places in a sequence.
type queued struct {
	rows []float32
	pos  []int
	span int
}

// placer assigns rotary positions to the rows of a sequence as they are
// fed: a text row at the next position (every component), an image's
// rows with relative positions at the position of its first row plus
// those, the text after such an image Span after its first row; rows
// without relative positions at consecutive positions like text. This is how llama.cpp's
// mtmd places Qwen2-VL images (M-RoPE), and plain consecutive positions
// otherwise.
type placer struct {
	P, width int
	next     int // the next text position
	queue    []queued
	k        int // rows of queue[0] placed
	base     int // position of queue[0]'s first row
}

// add queues an image's rows.
func (pl *placer) add(rows []float32, pos []int, span int) error {
	n := len(rows) / pl.width
	if len(rows)%pl.width != 0 || n == 0 {
		return fmt.Errorf("image rows of %d values are not rows of %d", len(rows), pl.width)
	}
	if pos != nil && len(pos) != n*pl.P {
		return fmt.Errorf("%d position values for %d image rows of %d components", len(pos), n, pl.P)
	}
	if pos == nil {
		span = n
	}
	if span < 0 {
		return errors.New("vlm: an image spans a negative number of positions")
	}
	pl.queue = append(pl.queue, queued{rows: rows, pos: pos, span: span})
	return nil
}

// pending is the number of queued rows not placed yet.
func (pl *placer) pending() int {
	n := 0
	for _, q := range pl.queue {
		n += len(q.rows) / pl.width
	}
	return n - pl.k
}

// text sets pos (P values) to the next text position.
func (pl *placer) text(pos []int) {
	for j := range pos {
		pos[j] = pl.next
	}
	pl.next++
}

// image sets pos to the next image row's position and copies the row
// into row; it reports false when no row is queued.
func (pl *placer) image(pos []int, row []float32) bool {
	if len(pl.queue) == 0 {
		return false
	}
	q := &pl.queue[0]
	copy(row, q.rows[pl.k*pl.width:(pl.k+1)*pl.width])
	if q.pos == nil {
		// consecutive positions, text between the rows included
		pl.text(pos)
	} else {
		if pl.k == 0 {
			pl.base = pl.next
		}
		for j := range pos {
			pos[j] = pl.base + q.pos[pl.k*pl.P+j]
		}
	}
	pl.k++
	if pl.k == len(q.rows)/pl.width {
		if q.pos != nil {
			pl.next = pl.base + q.span
		}
		pl.queue, pl.k = pl.queue[1:], 0
	}
	return true
}

// Sequence is a prompt assembled for the interpreter: ids (-1 at image
// rows), a row of embeddings for every id (zero at text rows) and each
// row's rotary position.
type Sequence struct {
	IDs       []int
	Embeds    []float32
	Positions []int // PosComponents values a row
	pl        placer
}

// NewSequence starts an empty sequence for a text model of the given
// width whose rows carry P position components.
func NewSequence(width, P int) *Sequence {
	return &Sequence{pl: placer{P: max(P, 1), width: width}}
}

// Text appends token ids.
func (s *Sequence) Text(ids ...int) {
	for _, id := range ids {
		s.IDs = append(s.IDs, id)
		s.Embeds = append(s.Embeds, make([]float32, s.pl.width)...)
		s.Positions = append(s.Positions, make([]int, s.pl.P)...)
		s.pl.text(s.Positions[len(s.Positions)-s.pl.P:])
	}
}

// Image appends a placed image.
func (s *Sequence) Image(p *Placed) error {
	if err := s.pl.add(p.Rows, p.Pos, p.Span); err != nil {
		return err
	}
	for _, id := range p.IDs {
		if id != -1 {
			s.Text(id)
			continue
		}
		s.IDs = append(s.IDs, -1)
		s.Embeds = append(s.Embeds, make([]float32, s.pl.width)...)
		s.Positions = append(s.Positions, make([]int, s.pl.P)...)
		if !s.pl.image(s.Positions[len(s.Positions)-s.pl.P:], s.Embeds[len(s.Embeds)-s.pl.width:]) {
			return errors.New("vlm: the layout has more image rows than the image")
		}
	}
	if s.pl.pending() != 0 {
		return errors.New("vlm: the layout has fewer image rows than the image")
	}
	return nil
}
