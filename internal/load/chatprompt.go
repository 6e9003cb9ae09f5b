package load

import (
	"fmt"

	"github.com/aotlm/aotlm"
)

// ChatPrompt renders the prompt as one user turn (after an optional system
// turn) with the model's chat template, and stops at the template's end
// of turn.
func ChatPrompt(req *aotlm.Request, system string, m *aotlm.Model) error {
	if !m.HasChatTemplate() {
		return fmt.Errorf("%w: pass --chat-template <file>", aotlm.ErrNoChatTemplate)
	}
	var msgs []aotlm.Message
	if system != "" {
		msgs = append(msgs, aotlm.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, aotlm.Message{Role: "user", Content: req.Prompt})
	text, err := m.RenderChat(msgs, aotlm.RenderOptions{})
	if err != nil {
		return err
	}
	req.Prompt, req.Raw = text, true
	req.StopIDs = append(req.StopIDs, m.EndOfTurnIDs()...)
	return nil
}
