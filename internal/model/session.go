package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/graph"
)

// Session is one sequence on the interpreter; it implements
// aotlm.Sequence and decoding.Session.
type Session struct {
	m     *Model
	state *graph.State
}

// NewSession returns a session with a cache of ctx positions (0: the
// model's trained context).
func (m *Model) NewSession(ctx int) (*Session, error) {
	if ctx <= 0 {
		ctx = m.Config.Context
	}
	if ctx > m.Config.Context {
		return nil, fmt.Errorf("context %d exceeds the model's %d", ctx, m.Config.Context)
	}
	return &Session{m: m, state: m.last.NewState(ctx)}, nil
}

// Prefill feeds ids and returns the logits after the last one.
func (s *Session) Prefill(ids []int) ([]float32, error) {
	out, _, err := s.m.last.Run(s.state, ids)
	return out, err
}

// PrefillContext is Prefill after checking ctx (the interpreter runs the
// ids in one go).
func (s *Session) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Prefill(ids)
}

// Decode feeds one id and returns the logits after it.
func (s *Session) Decode(id int) ([]float32, error) {
	out, _, err := s.m.last.Run(s.state, []int{id})
	return out, err
}

// PrefillAll feeds ids and returns the logits of every position, one row
// each.
func (s *Session) PrefillAll(ctx context.Context, ids []int) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, rows, err := s.m.all.Run(s.state, ids)
	if err != nil {
		return nil, err
	}
	v := len(out) / rows
	res := make([][]float32, rows)
	for i := range res {
		res[i] = out[i*v : (i+1)*v]
	}
	return res, nil
}

// Logits is PrefillAll without a context.
func (s *Session) Logits(ids []int) ([][]float32, error) {
	return s.PrefillAll(context.Background(), ids)
}

// Rewind drops positions from pos on. A recurrent model rewinds only to 0.
func (s *Session) Rewind(pos int) error {
	if pos < 0 || pos > s.state.Pos {
		return fmt.Errorf("rewind to %d: %d positions are filled", pos, s.state.Pos)
	}
	if pos == 0 {
		s.state.Reset()
		return nil
	}
	if len(s.state.Rec) > 0 && pos != s.state.Pos {
		return errors.New("a recurrent model's state cannot be rewound (only to 0)")
	}
	s.state.Pos = pos
	return nil
}

// Pos is the number of positions filled.
func (s *Session) Pos() int { return s.state.Pos }

// Context is the capacity of the cache.
func (s *Session) Context() int { return s.state.Ctx }

// Reset empties the session.
func (s *Session) Reset() { s.state.Reset() }

// Close releases nothing: the interpreter's memory is the garbage
// collector's.
func (s *Session) Close() {}
