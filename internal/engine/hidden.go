package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoHidden is returned by PrefillHidden when the artifact's plans keep
// no hidden rows (Engine.HiddenWidth is 0).
var ErrNoHidden = errors.New("engine: the artifact keeps no hidden rows (compile it for embeddings)")

// PrefillHidden feeds ids at the current position in passes of the
// prefill plan, commits them, and calls fn with each position and its
// hidden row (after the final norm, as Hidden returns it; valid only
// during the call), in order. It checks ctx between passes; an error of
// fn stops the prefill and is returned. A text encoder's session takes
// the whole sequence in one pass of the smallest plan that holds it, at
// position 0.
func (s *Session) PrefillHidden(ctx context.Context, ids []int, fn func(pos int, row []float32) error) error {
	if s.closed {
		return ErrClosed
	}
	if s.e.HiddenWidth() == 0 {
		return ErrNoHidden
	}
	if len(ids) == 0 {
		return errors.New("engine: no tokens")
	}
	if s.decode.rowsIn > 0 {
		return errNeedsRows
	}
	if err := s.checkIDs(ids); err != nil {
		return err
	}
	prog := s.prefill
	if s.e.encoder {
		if s.pos != 0 {
			return fmt.Errorf("engine: an encoder's sequence starts at position 0, not %d", s.pos)
		}
		if prog = s.program(len(ids)); prog == nil {
			return fmt.Errorf("engine: a sequence of %d tokens: the encoder's passes hold at most %d", len(ids), s.MaxRows())
		}
	}
	n := prog.p.Rows
	for lo := 0; lo < len(ids); lo += n {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := ids[lo:min(lo+n, len(ids))]
		at := s.pos
		s.runChain(prog, chunk, []int{})
		for i := range chunk {
			row := s.Hidden(at + i)
			if row == nil {
				return errors.New("engine: a pass kept no hidden row")
			}
			if err := fn(at+i, row); err != nil {
				return err
			}
		}
	}
	return nil
}
