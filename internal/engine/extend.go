package engine

import (
	"fmt"
	"slices"

	"github.com/aotlm/aotlm/internal/op"
)

// ContextError reports a context the artifact cannot serve: more
// positions than the model's trained context, or than the compiled
// context of an artifact that records no trained context.
type ContextError struct {
	Asked, Max int
	// Trained tells whether Max is the model's trained context (else
	// the artifact's compiled context).
	Trained bool
}

func (e *ContextError) Error() string {
	if e.Trained {
		return fmt.Sprintf("a context of %d positions exceeds the model's trained context of %d", e.Asked, e.Max)
	}
	return fmt.Sprintf("a context of %d positions: the artifact was compiled for at most %d and records no trained context to extend to (compile it again)", e.Asked, e.Max)
}

// extend sets the most positions a session may hold to n when n exceeds
// the compiled context (checked against the manifest's Extend.Max), and
// gives the rope steps of a context-dependent scaling their frequencies
// for n, in the text plans and the draft head's.
func (e *Engine) extend(n int) error {
	m := e.manifest
	e.ctx = m.Ctx
	if e.mtp != nil {
		e.mtp.ctx = m.Ctx
	}
	if n < 0 {
		return fmt.Errorf("engine: a context of %d positions", n)
	}
	if n <= m.Ctx {
		return nil
	}
	x := m.Extend
	if x == nil {
		return &ContextError{Asked: n, Max: m.Ctx}
	}
	if n > x.Max {
		return &ContextError{Asked: n, Max: x.Max, Trained: true}
	}
	e.ctx = n
	if e.mtp != nil {
		e.mtp.ctx = n
	}
	r := x.Rope
	if r == nil {
		return nil
	}
	f := r.Freqs(m.Ctx, n)
	progs := e.plans
	if e.mtp != nil {
		progs = append(slices.Clip(progs), e.mtp.plans...)
	}
	for _, p := range progs {
		for i := range p.steps {
			st := &p.steps[i]
			if st.Op == op.RoPE && slices.Equal(st.Rope.InvFreq, r.From) {
				st.Rope.InvFreq = slices.Clone(f)
			}
		}
	}
	return nil
}

// Context is the most positions a session may hold: the compiled
// context, or the one Options.Context extended it to.
func (e *Engine) Context() int { return e.ctx }

// MaxContext is the most positions Options.Context may ask for: the
// model's trained context, or the compiled one for an artifact that
// records none.
func (e *Engine) MaxContext() int {
	if x := e.manifest.Extend; x != nil {
		return x.Max
	}
	return e.manifest.Ctx
}
