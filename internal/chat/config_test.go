package chat

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSpecials reads the special tokens of every tokenizer_config.json in
// the test data; the expected values are the files' own fields.
func TestSpecials(t *testing.T) {
	for _, tt := range []struct {
		name string
		want Specials
	}{
		{"qwen2.5", Specials{EOS: "<|im_end|>", PAD: "<|endoftext|>"}},
		{"llama3.2", Specials{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>"}},
		{"gemma2", Specials{BOS: "<bos>", EOS: "<eos>", PAD: "<pad>", UNK: "<unk>"}},
		{"phi3.5", Specials{BOS: "<s>", EOS: "<|endoftext|>", PAD: "<|endoftext|>", UNK: "<unk>"}},
	} {
		_, sp := loadTemplate(t, "tokenizers/"+tt.name+"/tokenizer_config.json")
		if sp != tt.want {
			t.Errorf("%s: specials %+v, want %+v", tt.name, sp, tt.want)
		}
	}
}

func TestFromTokenizerConfigForms(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "tokenizer_config.json", `{
		"bos_token": {"content": "<B>", "lstrip": false}, "eos_token": "<E>", "pad_token": null,
		"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D{{ eos_token }}"}]}`)
	tpl, sp, err := FromTokenizerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if sp != (Specials{BOS: "<B>", EOS: "<E>"}) {
		t.Errorf("specials %+v", sp)
	}
	if got, _ := tpl.Render(nil, Options{BOSToken: sp.BOS, EOSToken: sp.EOS}); got != "<B>D<E>" {
		t.Errorf("list form rendered %q, want the default entry", got)
	}
	if tpl.Name() != filepath.Base(dir) {
		t.Errorf("name %q, want the folder name", tpl.Name())
	}
	// a chat_template.jinja next to the config wins
	writeFile(t, dir, TemplateFile, "J{{ messages[0].content }}")
	tpl, _, err = FromTokenizerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tpl.Render([]Message{{Role: "user", Content: "x"}}, Options{}); got != "Jx" {
		t.Errorf("rendered %q, want chat_template.jinja's output", got)
	}
}

// TestFromTokenizerConfigHostile checks that malformed configs fail with an
// error naming the offending field.
func TestFromTokenizerConfigHostile(t *testing.T) {
	tests := []struct{ name, content, field string }{
		{"not json", `{"chat_template": "x"`, "tokenizer_config.json"},
		{"truncated", `{"chat_templ`, "tokenizer_config.json"},
		{"top level list", `["x"]`, "tokenizer_config.json"},
		{"missing template", `{"eos_token": "</s>"}`, "chat_template: missing"},
		{"template number", `{"chat_template": 7}`, "chat_template"},
		{"no default", `{"chat_template": [{"name": "rag", "template": "x"}]}`, `no template named "default"`},
		{"bos number", `{"bos_token": 5, "chat_template": "x"}`, "bos_token"},
		{"eos object without content", `{"eos_token": {"lstrip": true}, "chat_template": "x"}`, "eos_token"},
		{"bad template", `{"chat_template": "{% if %}"}`, "parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "tokenizer_config.json", tt.content)
			_, _, err := FromTokenizerConfig(p)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
		})
	}
	if _, _, err := FromTokenizerConfig(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestMessages(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "m.json", `[{"role": "system", "content": "S"}, {"role": "user", "content": "U", "extra": 1},
		{"role": "assistant", "content": null, "reasoning_content": "R"},
		{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
			{"function": {"name": "g", "arguments": {"b": [2]}}}, {"function": {"name": "h"}}]},
		{"role": "tool", "content": "r", "tool_call_id": "c1"}]`)
	msgs, err := Messages(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}, {Role: "assistant", ReasoningContent: "R"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}, {Name: "g", Arguments: `{"b": [2]}`}, {Name: "h"}}},
		{Role: "tool", Content: "r", ToolCallID: "c1"}}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d", len(msgs), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(msgs[i], want[i]) {
			t.Errorf("message %d = %+v, want %+v", i, msgs[i], want[i])
		}
	}
	for _, tt := range []struct{ content, field string }{
		{`{"role": "user"}`, "list"},
		{`[{"role": "user", "content": "x"}`, "list"},
		{`[3]`, "list"},
		{`[null]`, "messages[0]"},
		{`[{"content": "x"}]`, "messages[0].role"},
		{`[{"role": "user", "content": 5}]`, "messages[0].content"},
		{`[{"role": "user", "content": [{"type": "text"}]}]`, "messages[0].content"},
		{`[{"role": "user"}, {"role": 1}]`, "messages[1].role"},
		{`[{"role": "assistant", "tool_calls": {"id": "c1"}}]`, "messages[0].tool_calls"},
		{`[{"role": "assistant", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}]`, "messages[0].tool_calls: call 0 has no function name"},
	} {
		_, err := ParseMessages([]byte(tt.content))
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: err = %v, want it to name %q", tt.content, err, tt.field)
		}
	}
	if _, err := Messages(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestTemplateErrors checks that parse and render failures name the
// template, the construct and the line.
func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		src  string
		line int
		want string
	}{
		{"ok\n{% if %}", 0, "parse"},
		{"ok\n\n{{ (1 }}", 3, "parse"},
		{"a\nb\n{{ messages[0].content ", 0, "parse"},
		{"{% for m in messages %}\n{{ m.content }}", 0, "parse"},
		{"{% endif %}", 1, "parse"},
		{"line1\n{{ (1 if true else 2) }}\n{{ 'x' | nosuchfilter }}", 3, "nosuchfilter"},
		{"{{ nosuch() }}", 1, "render"},
		{"{% for m in 5 %}{% endfor %}\n{{ 'x'.nosuchmethod() }}", 0, "render"},
	}
	for _, tt := range tests {
		tpl, err := ParseNamed("t1", tt.src)
		if err == nil {
			_, err = tpl.Render(nil, Options{})
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: err = %v, want *Error", tt.src, err)
			continue
		}
		if e.Template != "t1" || !strings.Contains(err.Error(), `template "t1"`) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %q does not name the template and %q", tt.src, err, tt.want)
		}
		if tt.line != 0 && e.Line != tt.line {
			t.Errorf("%q: line %d, want %d (%v)", tt.src, e.Line, tt.line, err)
		}
		if strings.Contains(err.Error(), tt.src) && len(tt.src) > 20 {
			t.Errorf("%q: error repeats the whole source: %v", tt.src, err)
		}
	}
}

// TestNoFileAccess checks that a template cannot pull in local files.
func TestNoFileAccess(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret.txt", "SECRET")
	for _, src := range []string{
		`{% include "` + secret + `" %}`,
		`{% extends "` + secret + `" %}`,
		`{% import "` + secret + `" as s %}`,
		`{% from "` + secret + `" import x %}`,
	} {
		out := ""
		tpl, err := Parse(src)
		if err == nil {
			out, err = tpl.Render(nil, Options{})
		}
		if err == nil || strings.Contains(out, "SECRET") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: out %q err %v, want a refusal", src, out, err)
		}
	}
}
