package load

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/hf"
	"github.com/aotlm/aotlm/internal/modelparts"
)

// ChatTemplate is a model's chat template with the special tokens it
// prints.
type ChatTemplate struct {
	tpl *chat.Template
	sp  chat.Specials
}

// OpenChatTemplate finds the chat template of a path: an artifact's
// stored one, or the files of a checkpoint, folder, tokenizer_config.json
// or .jinja file (package hf).
func OpenChatTemplate(path string) (*ChatTemplate, error) {
	if artifact.IsArtifact(path) {
		m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		defer m.Close()
		parts := modelparts.Of(m)
		if parts.Template == nil {
			return nil, fmt.Errorf("%s: %w (the artifact stores none)", path, aotlm.ErrNoChatTemplate)
		}
		return &ChatTemplate{parts.Template, parts.Specials}, nil
	}
	src, sp, err := hf.ChatTemplate(path)
	if err != nil {
		return nil, err
	}
	tpl, err := chat.ParseNamed(filepath.Base(path), src)
	if err != nil {
		return nil, err
	}
	return &ChatTemplate{tpl, sp}, nil
}

// ChatMessages reads a JSON file of messages: [{"role": "user",
// "content": "Hi"}, ...].
func ChatMessages(path string) ([]chat.Message, error) { return chat.Messages(path) }

// TemplateOptions says how a chat template renders.
type TemplateOptions struct {
	// GenerationPrompt appends the header that opens the assistant's turn.
	GenerationPrompt bool
	// Now is the date templates print; zero is the current time.
	Now time.Time
	// Vars are extra template variables, e.g. "enable_thinking": false.
	Vars map[string]any
}

// Render renders the messages with the template.
func (t *ChatTemplate) Render(msgs []chat.Message, o TemplateOptions) (string, error) {
	return t.tpl.Render(msgs, chat.Options{AddGenerationPrompt: o.GenerationPrompt, BOSToken: t.sp.BOS, EOSToken: t.sp.EOS,
		Now: o.Now, Vars: o.Vars})
}

// SetChatTemplate replaces m's chat template with the one at path (a
// .jinja file, tokenizer_config.json or GGUF).
func SetChatTemplate(m *aotlm.Model, path string) error {
	src, _, err := hf.ChatTemplate(path)
	if err != nil {
		return err
	}
	return m.SetChatTemplate(filepath.Base(path), src)
}
