package aotlm

import (
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/chat"
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
	cm := make([]chat.Message, len(msgs))
	for i, msg := range msgs {
		cm[i] = chat.Message{Role: msg.Role, Content: msg.Content, ReasoningContent: msg.ReasoningContent,
			ToolCallID: msg.ToolCallID, Name: msg.Name}
		for _, c := range msg.ToolCalls {
			cm[i].ToolCalls = append(cm[i].ToolCalls, chat.ToolCall(c))
		}
	}
	text, err := m.template.Render(cm, chat.Options{AddGenerationPrompt: true, BOSToken: m.specials.BOS,
		EOSToken: m.specials.EOS, Vars: opts.Vars, Now: opts.Now})
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return text, nil
}
