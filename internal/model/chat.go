package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/qmodel"
)

// ErrNoChatTemplate is returned when a model carries no chat template.
var ErrNoChatTemplate = errors.New("no chat template")

// ChatTemplate finds the chat template of a model path: a folder's
// tokenizer_config.json (or chat_template.jinja), a tokenizer_config.json or
// .jinja file named directly, or a GGUF file's tokenizer.chat_template.
func ChatTemplate(path string) (*chat.Template, chat.Specials, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, chat.Specials{}, fmt.Errorf("chat template: %w", err)
	}
	dir := path
	if !st.IsDir() {
		switch {
		case strings.HasSuffix(path, ".jinja"):
			t, err := chat.Load(path)
			return t, chat.Specials{}, err
		case strings.HasSuffix(path, ".json"):
			return chat.FromTokenizerConfig(path)
		case strings.HasSuffix(path, ".gguf"):
			return ggufChatTemplate(path)
		case isArtifact(path):
			return artifactChatTemplate(path)
		}
		dir = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(dir, qmodel.TokenizerGGUF)); err == nil {
		return ggufChatTemplate(filepath.Join(dir, qmodel.TokenizerGGUF))
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if _, err := os.Stat(cfg); err == nil {
		return chat.FromTokenizerConfig(cfg)
	}
	if _, err := os.Stat(filepath.Join(dir, chat.TemplateFile)); err == nil {
		t, err := chat.Load(filepath.Join(dir, chat.TemplateFile))
		return t, chat.Specials{}, err
	}
	return nil, chat.Specials{}, fmt.Errorf("%s: %w (no tokenizer_config.json or %s)", path, ErrNoChatTemplate, chat.TemplateFile)
}

func ggufChatTemplate(path string) (*chat.Template, chat.Specials, error) {
	ck, err := detect.Open(path)
	if err != nil {
		return nil, chat.Specials{}, err
	}
	defer ck.Close()
	meta := ck.Metadata()
	src, ok := format.MetaString(meta, "tokenizer.chat_template")
	if !ok {
		return nil, chat.Specials{}, fmt.Errorf("%s: %w (no tokenizer.chat_template key)", path, ErrNoChatTemplate)
	}
	var sp chat.Specials
	tokens, _ := format.MetaStrings(meta, "tokenizer.ggml.tokens")
	token := func(key string) string {
		if id, ok := format.MetaInt(meta, key); ok && id >= 0 && id < int64(len(tokens)) {
			return tokens[id]
		}
		return ""
	}
	sp.BOS, sp.EOS = token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")
	t, err := chat.ParseNamed(filepath.Base(path), src)
	return t, sp, err
}

// artifactChatTemplate reads the template a compiled artifact stores, with
// the text of its BOS and EOS tokens.
func artifactChatTemplate(path string) (*chat.Template, chat.Specials, error) {
	m, err := Open(path, Options{})
	if err != nil {
		return nil, chat.Specials{}, err
	}
	defer m.Close()
	src := m.eng.Manifest().ChatTemplate
	if src == "" {
		return nil, chat.Specials{}, fmt.Errorf("%s: %w (the artifact stores none)", path, ErrNoChatTemplate)
	}
	var sp chat.Specials
	if m.Tokenizer != nil {
		if m.Config.BOS >= 0 {
			sp.BOS = m.Tokenizer.Token(m.Config.BOS)
		}
		if len(m.Config.EOS) > 0 {
			sp.EOS = m.Tokenizer.Token(m.Config.EOS[0])
		}
	}
	t, err := chat.ParseNamed(filepath.Base(path), src)
	return t, sp, err
}
