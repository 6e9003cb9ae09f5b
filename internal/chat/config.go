package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aotlm/aotlm/internal/userfile"
)

// TemplateFile is the file name newer Hugging Face checkpoints use for the
// chat template, next to tokenizer_config.json.
const TemplateFile = "chat_template.jinja"

// Specials are the special tokens tokenizer_config.json declares; an absent
// or null token is "".
type Specials struct {
	BOS, EOS, PAD, UNK string
}

// tokenizerConfig is the part of tokenizer_config.json this package reads.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	PAD          json.RawMessage `json:"pad_token"`
	UNK          json.RawMessage `json:"unk_token"`
}

// FromTokenizerConfig reads the chat template and special tokens of a
// Hugging Face tokenizer_config.json. The template is, in order of
// preference: a chat_template.jinja file in the same folder (where newer
// transformers versions save it), the "chat_template" string, or the entry
// named "default" of a [{"name", "template"}] list. The template is named
// after the folder holding the file.
func FromTokenizerConfig(path string) (*Template, Specials, error) {
	name := filepath.Base(filepath.Dir(path))
	data, err := userfile.ReadFile(path, userfile.Config.Named("tokenizer config"))
	if err != nil {
		return nil, Specials{}, fmt.Errorf("chat: %w", err)
	}
	var cfg tokenizerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, Specials{}, &Error{Template: name, Msg: "tokenizer_config.json: " + err.Error(), Err: err}
	}
	var sp Specials
	for _, f := range []struct {
		field string
		raw   json.RawMessage
		dst   *string
	}{{"bos_token", cfg.BOS, &sp.BOS}, {"eos_token", cfg.EOS, &sp.EOS}, {"pad_token", cfg.PAD, &sp.PAD}, {"unk_token", cfg.UNK, &sp.UNK}} {
		if *f.dst, err = tokenString(f.raw); err != nil {
			return nil, Specials{}, &Error{Template: name, Msg: "tokenizer_config.json: " + f.field + ": " + err.Error()}
		}
	}

	src, err := userfile.ReadFile(filepath.Join(filepath.Dir(path), TemplateFile), userfile.Template)
	switch {
	case err == nil:
		t, err := ParseNamed(name, string(src))
		return t, sp, err
	case !errors.Is(err, fs.ErrNotExist):
		return nil, Specials{}, fmt.Errorf("chat: %w", err)
	}
	text, err := templateText(cfg.ChatTemplate)
	if err != nil {
		return nil, Specials{}, &Error{Template: name, Msg: "tokenizer_config.json: chat_template: " + err.Error(), Err: err}
	}
	t, err := ParseNamed(name, text)
	return t, sp, err
}

// ErrNoTemplate says a tokenizer_config.json holds no chat template.
var ErrNoTemplate = errors.New("no chat template")

// Load reads a chat template from a .jinja file, named after the file.
func Load(path string) (*Template, error) {
	src, err := userfile.ReadFile(path, userfile.Template)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return ParseNamed(strings.TrimSuffix(filepath.Base(path), ".jinja"), string(src))
}

// tokenString decodes a special token written as a string, as
// {"content": "..."} (an AddedToken) or as null.
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", errors.New(`want a string or {"content": string}`)
	}
	return *obj.Content, nil
}

// templateText decodes the chat_template field: a string or a list of
// {"name", "template"} of which "default" is used.
func templateText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("missing (and no %s next to the file): %w", TemplateFile, ErrNoTemplate)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", errors.New(`want a string or a list of {"name", "template"}`)
	}
	var names []string
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return "", fmt.Errorf("no template named \"default\" (have %q)", names)
}

// Messages reads a JSON file holding a list of {"role", "content"} objects
// (optionally "reasoning_content" and OpenAI's "tool_calls"); a null
// content reads as "".
func Messages(path string) ([]Message, error) {
	data, err := userfile.ReadFile(path, userfile.Text.Named("message list"))
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return ParseMessages(data)
}

// ParseMessages decodes a JSON list of {"role", "content"} objects.
func ParseMessages(data []byte) ([]Message, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("chat: messages: want a JSON list of {\"role\", \"content\"}: %w", err)
	}
	msgs := make([]Message, len(raw))
	for i, m := range raw {
		if m == nil {
			return nil, fmt.Errorf("chat: messages[%d]: not an object", i)
		}
		for _, f := range []struct {
			key      string
			dst      *string
			required bool
		}{{"role", &msgs[i].Role, true}, {"content", &msgs[i].Content, false}, {"reasoning_content", &msgs[i].ReasoningContent, false},
			{"tool_call_id", &msgs[i].ToolCallID, false}, {"name", &msgs[i].Name, false}} {
			v, ok := m[f.key]
			if !ok || string(v) == "null" {
				if f.required {
					return nil, fmt.Errorf("chat: messages[%d].%s: missing", i, f.key)
				}
				continue
			}
			if err := json.Unmarshal(v, f.dst); err != nil {
				return nil, fmt.Errorf("chat: messages[%d].%s: want a string", i, f.key)
			}
		}
		if v, ok := m["tool_calls"]; ok && string(v) != "null" {
			calls, err := parseToolCalls(v)
			if err != nil {
				return nil, fmt.Errorf("chat: messages[%d].tool_calls: %w", i, err)
			}
			msgs[i].ToolCalls = calls
		}
	}
	return msgs, nil
}

// parseToolCalls decodes OpenAI's list of {"id", "function": {"name",
// "arguments"}} calls; arguments may be JSON text or a JSON value.
func parseToolCalls(data []byte) ([]ToolCall, error) {
	var raw []struct {
		ID       string `json:"id"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("want a list of {\"id\", \"function\": {\"name\", \"arguments\"}}: %w", err)
	}
	calls := make([]ToolCall, len(raw))
	for k, r := range raw {
		if r.Function == nil || r.Function.Name == "" {
			return nil, fmt.Errorf("call %d has no function name", k)
		}
		calls[k] = ToolCall{ID: r.ID, Name: r.Function.Name}
		args := r.Function.Arguments
		if len(args) == 0 || string(args) == "null" {
			continue
		}
		if err := json.Unmarshal(args, &calls[k].Arguments); err != nil {
			calls[k].Arguments = string(args) // a JSON value, kept as its text
		}
	}
	return calls, nil
}
