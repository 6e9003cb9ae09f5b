package model

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
)

// Session is one sequence; it implements decoding.Session. It runs through
// the graph interpreter, or through the engine for a compiled artifact.
type Session struct {
	m     *Model
	state *graph.State    // interpreter
	es    *engine.Session // artifact
}

// NewSession returns a session with a cache of ctx positions (0: the
// model's trained context; an artifact's context is fixed when compiled).
func (m *Model) NewSession(ctx int) (*Session, error) {
	if m.eng != nil {
		if ctx > m.Config.Context {
			return nil, fmt.Errorf("context %d exceeds the artifact's %d (set at compile time with --ctx)", ctx, m.Config.Context)
		}
		es, err := m.eng.NewSession(engine.SessionOptions{Mode: m.mode, Threads: m.threads})
		if err != nil {
			return nil, err
		}
		return &Session{m: m, es: es}, nil
	}
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
	if s.es != nil {
		return s.es.Prefill(ids)
	}
	out, _, err := s.m.last.Run(s.state, ids)
	return out, err
}

// Decode feeds one id and returns the logits after it.
func (s *Session) Decode(id int) ([]float32, error) {
	if s.es != nil {
		return s.es.Decode(id)
	}
	out, _, err := s.m.last.Run(s.state, []int{id})
	return out, err
}

// Logits feeds ids and returns the logits of every position, one row each.
// On a compiled artifact, whose plans compute one row, the positions go
// through the AR-1 plan one at a time.
func (s *Session) Logits(ids []int) ([][]float32, error) {
	if s.es != nil {
		return s.artifactLogits(ids)
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

// Pos is the number of positions filled.
func (s *Session) Pos() int {
	if s.es != nil {
		return s.es.Pos()
	}
	return s.state.Pos
}

// Context is the capacity of the cache.
func (s *Session) Context() int {
	if s.es != nil {
		return s.es.Context()
	}
	return s.state.Ctx
}

// Reset empties the session.
func (s *Session) Reset() {
	if s.es != nil {
		s.es.Reset()
		return
	}
	s.state.Reset()
}

func (s *Session) artifactLogits(ids []int) ([][]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("no tokens")
	}
	if s.es.Pos()+len(ids) > s.es.Context() {
		return nil, fmt.Errorf("%w: %d positions used, %d more requested, context is %d",
			engine.ErrContextFull, s.es.Pos(), len(ids), s.es.Context())
	}
	rows := make([][]float32, len(ids))
	for i, id := range ids {
		var out []float32
		var err error
		if s.es.Pos() == 0 {
			out, err = s.es.Prefill([]int{id})
		} else {
			out, err = s.es.Decode(id)
		}
		if err != nil {
			return nil, err
		}
		rows[i] = append([]float32(nil), out...)
	}
	return rows, nil
}
