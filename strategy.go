package aotlm

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/sample"
)

// startDecoder starts the request's strategy on the session (nil without
// one).
func (s *Session) startDecoder(st decoding.Strategy, smp *sample.Sampler) (decoding.Decoder, error) {
	if st == nil {
		return nil, nil
	}
	t, ok := s.seq.(decoding.Target)
	if !ok {
		return nil, fmt.Errorf("%s decoding needs a compiled artifact", st.Name())
	}
	dec, err := st.Start(t, s.hist, smp)
	if err != nil {
		return nil, fmt.Errorf("%s decoding: %w", st.Name(), err)
	}
	return dec, nil
}

// endDecoder records the decoder's statistics, closes it, and drops the
// tokens it committed past the ones generation kept.
func (s *Session) endDecoder(dec decoding.Decoder, res *Result) {
	if dec == nil {
		return
	}
	st := dec.Stats()
	res.Decoding = &st
	dec.Close()
	if s.seq.Pos() > len(s.hist) {
		if err := s.seq.Rewind(len(s.hist)); err != nil {
			// a sequence that cannot rewind there starts over
			s.hist = s.hist[:0]
			_ = s.seq.Rewind(0)
		}
	}
}

// ErrTokenizerMismatch is returned by CheckDraft when a draft model's
// tokenizer differs from the target's.
var ErrTokenizerMismatch = errors.New("the draft model's tokenizer differs from the target's")

// CheckDraft reports whether draft can draft tokens for m: the same
// vocabulary, token by token, and the same BOS.
func (m *Model) CheckDraft(draft *Model) error {
	a, b := m.cfg.Tokenizer, draft.cfg.Tokenizer
	switch {
	case m.cfg.Info.Vocab != draft.cfg.Info.Vocab:
		return fmt.Errorf("%w: %d tokens, the target has %d", ErrTokenizerMismatch, draft.cfg.Info.Vocab, m.cfg.Info.Vocab)
	case a == nil || b == nil:
		if a != b {
			return fmt.Errorf("%w: only one of them has a tokenizer", ErrTokenizerMismatch)
		}
		return nil
	case a.VocabSize() != b.VocabSize():
		return fmt.Errorf("%w: %d tokens, the target's has %d", ErrTokenizerMismatch, b.VocabSize(), a.VocabSize())
	case m.BOS() != draft.BOS():
		return fmt.Errorf("%w: BOS %d, the target's is %d", ErrTokenizerMismatch, draft.BOS(), m.BOS())
	}
	for id := range a.VocabSize() {
		if x, y := a.Token(id), b.Token(id); x != y {
			return fmt.Errorf("%w: token %d is %q, the target's is %q", ErrTokenizerMismatch, id, y, x)
		}
	}
	return nil
}

// DraftSequence returns a function making sessions' sequences of the
// model, for a decoding.Draft strategy (ctx positions, 0: the model's).
func (m *Model) DraftSequence(ctx int) func() (decoding.DraftSequence, error) {
	return func() (decoding.DraftSequence, error) {
		seq, err := m.cfg.NewSequence(ctx)
		if err != nil {
			return nil, err
		}
		return seq, nil
	}
}
