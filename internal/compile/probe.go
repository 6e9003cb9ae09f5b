package compile

import (
	"context"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// probeContext is the context of the session a probe opens.
const probeContext = 8

// probeArtifact proves the artifact at path runnable before it is renamed
// into place: the engine opens it (manifest, plans, every weight bound),
// its tokenizer rebuilds and encodes a word with its special tokens within
// the vocabulary, its chat template parses and
// renders a one-message conversation, and a decode pass of one token (the
// BOS, else id 0) runs. Unless allowNonFinite, every weight and the pass's
// logits must be finite.
func probeArtifact(path string, allowNonFinite bool) error {
	e, err := engine.OpenWith(path, engine.Options{Threads: 1})
	if err != nil {
		return fmt.Errorf("compile: the artifact does not open: %w", err)
	}
	defer e.Close()
	man := e.Manifest()
	var tok tokenizer.Tokenizer
	if man.Tokenizer != nil {
		data, err := e.Blob(man.Tokenizer.Blob)
		if err != nil {
			return fmt.Errorf("compile: the artifact's tokenizer: %w", err)
		}
		st := tokenizer.Stored{Kind: man.Tokenizer.Kind, Data: data}
		if tok, err = st.Build(man.Vocab); err != nil {
			return fmt.Errorf("compile: the artifact's tokenizer (%s) does not load: %w", st.Kind, err)
		}
		ids, err := tokenizer.EncodeChecked(tok, "Hello", tokenizer.EncodeOptions{AddSpecial: true})
		if err != nil {
			return fmt.Errorf("compile: the artifact's tokenizer (%s) cannot encode a word: %w", st.Kind, err)
		}
		for _, id := range ids {
			if id < 0 || id >= man.Vocab {
				return fmt.Errorf("compile: the artifact's tokenizer (%s) encodes a word as id %d, outside the vocabulary of %d", st.Kind, id, man.Vocab)
			}
		}
	}
	if man.ChatTemplate != "" {
		tpl, err := chat.ParseNamed("chat template", man.ChatTemplate)
		if err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		opts := chat.Options{AddGenerationPrompt: true}
		if tok != nil && man.BOS >= 0 && man.BOS < tok.VocabSize() {
			opts.BOSToken = tok.Token(man.BOS)
		}
		if tok != nil && len(man.EOS) > 0 && man.EOS[0] < tok.VocabSize() {
			opts.EOSToken = tok.Token(man.EOS[0])
		}
		if _, err := tpl.Render([]chat.Message{{Role: "user", Content: "Hello"}}, opts); err != nil {
			return fmt.Errorf("compile: the chat template cannot render a one-message conversation: %w", err)
		}
	}
	if !allowNonFinite {
		if err := e.CheckFinite(); err != nil {
			return fmt.Errorf("compile: %w (--allow-nonfinite keeps them)", err)
		}
	}
	s, err := e.NewSession(engine.SessionOptions{Threads: 1, Context: min(probeContext, man.Ctx)})
	if err != nil {
		return fmt.Errorf("compile: the artifact cannot open a session: %w", err)
	}
	defer s.Close()
	id := max(man.BOS, 0)
	if e.Encoder() {
		err := s.PrefillHidden(context.Background(), []int{id}, func(_ int, row []float32) error {
			for i, v := range row {
				if !allowNonFinite && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
					return fmt.Errorf("value %d of its hidden row is %v (--allow-nonfinite keeps the artifact)", i, v)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("compile: a pass on token %d fails: %w", id, err)
		}
		return nil
	}
	logits, err := s.Decode(id)
	if err != nil {
		return fmt.Errorf("compile: a pass on token %d fails: %w", id, err)
	}
	if !allowNonFinite {
		for i, v := range logits {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("compile: a pass on token %d makes logit %d %v (--allow-nonfinite keeps the artifact)", id, i, v)
			}
		}
	}
	return nil
}
