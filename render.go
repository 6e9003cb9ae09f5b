package aotlm

import (
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// RenderOptions configures RenderChat.
type RenderOptions struct {
	// Vars are extra template variables (such as "tools" or
	// "enable_thinking").
	Vars map[string]any
	// Now fixes the date templates print (zero: the current time).
	Now time.Time
}

// RenderChat renders a whole conversation with the model's chat template,
// ending with the header that opens the assistant's reply; encode the
// text with Encode(text, true).
func (m *Model) RenderChat(msgs []Message, opts RenderOptions) (string, error) {
	if m.template == nil {
		return "", ErrNoChatTemplate
	}
	text, err := m.template.Render(msgs, chat.Options{AddGenerationPrompt: true, BOSToken: m.specials.BOS,
		EOSToken: m.specials.EOS, Vars: opts.Vars, Now: opts.Now})
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return text, nil
}

// EndOfTurnIDs returns the ids of the special tokens that end a chat turn
// in common templates (and the model's EOS), those the vocabulary holds as
// single tokens: pass them as Request.StopIDs for a chat reply.
func (m *Model) EndOfTurnIDs() []int {
	tok := m.cfg.Tokenizer
	if tok == nil {
		return nil
	}
	var ids []int
	for _, t := range append([]string{m.specials.EOS}, endOfTurn...) {
		if t == "" {
			continue
		}
		if e := tok.Encode(t, tokenizer.EncodeOptions{ParseSpecial: true}); len(e) == 1 && tok.Token(e[0]) == t && !contains(ids, e[0]) {
			ids = append(ids, e[0])
		}
	}
	return ids
}
