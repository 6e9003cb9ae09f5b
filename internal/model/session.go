package model

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/graph"
)

// Session is one sequence run through the interpreter; it implements
// decoding.Session.
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

// Decode feeds one id and returns the logits after it.
func (s *Session) Decode(id int) ([]float32, error) {
	out, _, err := s.m.last.Run(s.state, []int{id})
	return out, err
}

// Logits feeds ids and returns the logits of every position, one row each.
func (s *Session) Logits(ids []int) ([][]float32, error) {
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

// Pos is the number of positions filled.
func (s *Session) Pos() int { return s.state.Pos }

// Context is the capacity of the cache.
func (s *Session) Context() int { return s.state.Ctx }

// Reset empties the session.
func (s *Session) Reset() { s.state.Reset() }
