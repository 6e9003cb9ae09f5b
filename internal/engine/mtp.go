package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aotlm/aotlm/internal/plan"
)

// A multi-token-prediction draft head (plan.MTP) runs as an engine of its
// own: its plans over the artifact's weights, worker pool and pass mutex,
// with sessions of their own (a float32 cache of the head's layers). A
// pass of the head gives each row a token id and a row of the target's
// hidden state (Pass.Rows, read by the plan's rows step).

// loadMTP decodes, validates and resolves the manifest's draft head plans
// into e.mtp.
func (e *Engine) loadMTP(blob func(name string) ([]byte, error)) error {
	t := e.manifest.MTP
	if t == nil {
		return nil
	}
	for _, p := range e.plans {
		if p.hidden < 0 {
			return fmt.Errorf("manifest.mtp: the model's plan for AR length %d keeps no hidden rows for the draft head", p.p.Rows)
		}
	}
	m := e.manifest
	m.Plans, m.MTP, m.Vision, m.KVCache = t.Plans, nil, nil, nil
	h := &Engine{manifest: m, tensor: e.tensor, weights: e.weights, qweights: e.qweights, vocab: -1,
		passMu: e.passMu, head: true}
	hidden := e.plans[0].p.Buffers[e.plans[0].hidden].Cols
	for _, ref := range t.Plans {
		b, err := blob(ref.Blob)
		if err != nil {
			return err
		}
		p, err := plan.Decode(b)
		if err != nil {
			return fmt.Errorf("%s: %w", ref.Blob, err)
		}
		if p.Rows != ref.ARLen || p.KV.Ctx != e.manifest.Ctx {
			return fmt.Errorf("%s: plan of %d rows and context %d, manifest says %d and %d",
				ref.Blob, p.Rows, p.KV.Ctx, ref.ARLen, e.manifest.Ctx)
		}
		if len(h.plans) > 0 && p.KV != h.plans[0].p.KV {
			return fmt.Errorf("%s: cache layout %+v differs from %+v", ref.Blob, p.KV, h.plans[0].p.KV)
		}
		if len(p.State) != 0 {
			return fmt.Errorf("%s: a draft head with recurrent state", ref.Blob)
		}
		prog, err := h.resolve(p)
		if err != nil {
			return fmt.Errorf("%s: %w", ref.Blob, err)
		}
		if prog.rowsIn != hidden || prog.hidden < 0 {
			return fmt.Errorf("%s: the draft head reads rows of %d values and keeps hidden rows %v; the model's hidden rows have %d",
				ref.Blob, prog.rowsIn, prog.hidden >= 0, hidden)
		}
		if h.vocab != e.vocab {
			return fmt.Errorf("%s: the draft head's vocabulary is %d, the model's %d", ref.Blob, h.vocab, e.vocab)
		}
		h.plans = append(h.plans, prog)
		h.arena = max(h.arena, p.Arena)
	}
	slices.SortFunc(h.plans, func(a, b *program) int { return a.p.Rows - b.p.Rows })
	e.mtp = h
	return nil
}

// MTP returns the artifact's multi-token-prediction draft head as an
// engine whose sessions run it (each pass giving Pass.Rows, rows of this
// engine's hidden state as Session.Hidden returns them), or nil when the
// artifact has none. It shares this engine's workers and closes with it.
func (e *Engine) MTP() *Engine { return e.mtp }

// Encoder reports whether the artifact is a text encoder (bidirectional
// attention): its sessions give hidden rows only (PrefillHidden).
func (e *Engine) Encoder() bool { return e.encoder }

// HiddenWidth is the width of a hidden row (Session.Hidden), 0 when the
// plans keep none.
func (e *Engine) HiddenWidth() int {
	if p := e.plans[0]; p.hidden >= 0 {
		return p.p.Buffers[p.hidden].Cols
	}
	return 0
}

// Hidden returns the rows the classifier read (after the final norm) at
// position pos, when the session's last pass computed that position and
// its plan keeps them (Engine.HiddenWidth > 0); nil otherwise. The row is
// valid until the session's next pass.
func (s *Session) Hidden(pos int) []float32 {
	if s.closed || s.hidProg == nil || s.hidProg.hidden < 0 {
		return nil
	}
	r := pos - s.hidPos
	if r < 0 || r >= s.hidRows {
		return nil
	}
	b := s.hidProg.p.Buffers[s.hidProg.hidden]
	return s.arena[b.Offset+r*b.Cols : b.Offset+(r+1)*b.Cols]
}

// NewDraftHead makes a session of the artifact's draft head (Engine.MTP)
// with this session's context and threads.
func (s *Session) NewDraftHead() (*Session, error) {
	if s.e.mtp == nil {
		return nil, errors.New("engine: the artifact has no multi-token-prediction head")
	}
	return s.e.mtp.NewSession(SessionOptions{Mode: ModeHybrid, Threads: s.threads, Context: s.ctx})
}
