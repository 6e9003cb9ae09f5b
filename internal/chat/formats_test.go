package chat

import (
	"errors"
	"strings"
	"testing"
)

// TestPublishedFormats checks renders against the prompt formats the model
// families publish, written out by hand (not produced by this package).
// Where ollama's template tests hold the same conversation
// (template/testdata/{chatml,phi-3,gemma-instruct}.gotmpl), the expected
// string is theirs, with the BOS token Hugging Face templates add in front.
func TestPublishedFormats(t *testing.T) {
	const chatmlSUAU = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
		"<|im_start|>user\nHello, how are you?<|im_end|>\n" +
		"<|im_start|>assistant\nI'm doing great. How can I help you today?<|im_end|>\n" +
		"<|im_start|>user\nI'd like to show off how chat templating works!<|im_end|>\n" +
		"<|im_start|>assistant\n"
	const phi3SUAU = "<|system|>\nYou are a helpful assistant.<|end|>\n" +
		"<|user|>\nHello, how are you?<|end|>\n" +
		"<|assistant|>\nI'm doing great. How can I help you today?<|end|>\n" +
		"<|user|>\nI'd like to show off how chat templating works!<|end|>\n" +
		"<|assistant|>\n"
	const gemmaUAU = "<start_of_turn>user\nHello, how are you?<end_of_turn>\n" +
		"<start_of_turn>model\nI'm doing great. How can I help you today?<end_of_turn>\n" +
		"<start_of_turn>user\nI'd like to show off how chat templating works!<end_of_turn>\n" +
		"<start_of_turn>model\n"
	llamaHeader := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
		"Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"

	tests := []struct {
		name, file string
		c          renderCase
		want       string
	}{
		{"qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json", caseUser,
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nHello, how are you?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json", caseSUAU, chatmlSUAU},
		{"qwen3", "tokenizers/qwen3/tokenizer_config.json", caseSUAU, chatmlSUAU},
		{"qwen3", "tokenizers/qwen3/tokenizer_config.json", caseNoThink,
			"<|im_start|>user\nHello, how are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"llama3.2", "tokenizers/llama3.2/tokenizer_config.json", caseUser, llamaHeader + "<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3.2", "tokenizers/llama3.2/tokenizer_config.json", caseSUAU, llamaHeader + "You are a helpful assistant.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nI'm doing great. How can I help you today?<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nI'd like to show off how chat templating works!<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"gemma2", "tokenizers/gemma2/tokenizer_config.json", caseUser,
			"<bos><start_of_turn>user\nHello, how are you?<end_of_turn>\n<start_of_turn>model\n"},
		{"gemma2", "tokenizers/gemma2/tokenizer_config.json", caseUAU, "<bos>" + gemmaUAU},
		{"gemma3", "tokenizers/gemma3/tokenizer_config.json", caseUAU, "<bos>" + gemmaUAU},
		// Gemma 3 folds the system text into the first user turn.
		{"gemma3", "tokenizers/gemma3/tokenizer_config.json", caseSUAU, "<bos><start_of_turn>user\nYou are a helpful assistant.\n\n" +
			strings.TrimPrefix(gemmaUAU, "<start_of_turn>user\n")},
		{"phi3.5", "tokenizers/phi3.5/tokenizer_config.json", caseSUAU, phi3SUAU},
		{"phi3.5", "tokenizers/phi3.5/tokenizer_config.json", caseMulti, "<|user|>\nHello, how are you?<|end|>\n" +
			"<|assistant|>\nI'm doing great. How can I help you today?<|end|>\n" +
			"<|user|>\nI'd like to show off how chat templating works!<|end|>\n" +
			"<|assistant|>\nSure: this is the second answer.<|end|>\n<|endoftext|>"},
		{"phi4-mini", "tokenizers/phi4-mini/tokenizer_config.json", caseSUAU,
			"<|system|>Your name is Phi, an AI math expert developed by Microsoft. You are a helpful assistant.<|end|>" +
				"<|user|>Hello, how are you?<|end|><|assistant|>I'm doing great. How can I help you today?<|end|>" +
				"<|user|>I'd like to show off how chat templating works!<|end|><|assistant|>"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.c.name, func(t *testing.T) {
			tpl, sp := loadTemplate(t, tt.file)
			if got := render(t, tpl, sp, tt.c); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestQwen38Reference renders the cases of ollama's
// model/renderers/qwen38_test.go that its authors verified against
// Hugging Face transformers (matchesTemplate: true); the expected strings
// are theirs.
func TestQwen38Reference(t *testing.T) {
	const xhigh = "Reasoning effort is set to xhigh. Please think carefully through the task, validate key assumptions, consider plausible alternatives, and prioritize correctness, consistency, and clarity in the final answer."
	const low = "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to the conclusion without unnecessary elaboration."
	tpl, _ := loadTemplate(t, "chat-templates/qwen3.8.chat_template.jinja")
	tests := []struct {
		name string
		msgs []Message
		vars map[string]any
		want string
	}{
		{"default xhigh", []Message{{Role: "user", Content: "Hello"}}, nil,
			"<|im_start|>system\n" + xhigh + "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"medium effort trims system", []Message{{Role: "system", Content: " Be concise. \n"}, {Role: "user", Content: "Hello"}},
			map[string]any{"enable_thinking": true, "reasoning_effort": "medium"},
			"<|im_start|>system\nBe concise.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"low effort", []Message{{Role: "user", Content: "Hello"}}, map[string]any{"reasoning_effort": "low"},
			"<|im_start|>system\n" + low + "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"thinking disabled", []Message{{Role: "user", Content: "Hello"}}, map[string]any{"enable_thinking": false},
			"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"reasoning content kept", []Message{{Role: "user", Content: "First"},
			{Role: "assistant", ReasoningContent: "Plan", Content: "<think>literal</think>\nAnswer"}, {Role: "user", Content: "Next"}}, nil,
			"<|im_start|>system\n" + xhigh + "<|im_end|>\n<|im_start|>user\nFirst<|im_end|>\n<|im_start|>assistant\n<think>\nPlan\n</think>\n\n" +
				"<think>literal</think>\nAnswer<|im_end|>\n<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"assistant last", []Message{{Role: "user", Content: "Complete this"}, {Role: "assistant", ReasoningContent: "Draft", Content: "Partial"}}, nil,
			"<|im_start|>system\n" + xhigh + "<|im_end|>\n<|im_start|>user\nComplete this<|im_end|>\n<|im_start|>assistant\n<think>\nDraft\n</think>\n\nPartial" +
				"<|im_end|>\n<|im_start|>assistant\n<think>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tpl.Render(tt.msgs, Options{AddGenerationPrompt: true, Vars: tt.vars})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestRaiseException checks that a template's own refusal reaches the caller
// as an *ExceptionError carrying the template's words.
func TestRaiseException(t *testing.T) {
	tests := []struct {
		file string
		msgs []Message
		want string
	}{
		{"tokenizers/gemma2/tokenizer_config.json", []Message{{Role: "system", Content: "x"}, {Role: "user", Content: "y"}}, "System role not supported"},
		{"tokenizers/gemma2/tokenizer_config.json", []Message{{Role: "user", Content: "x"}, {Role: "user", Content: "y"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"tokenizers/gemma3/tokenizer_config.json", []Message{{Role: "assistant", Content: "x"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"chat-templates/qwen3.8.chat_template.jinja", nil, "No messages provided."},
		{"chat-templates/qwen3.8.chat_template.jinja", []Message{{Role: "system", Content: "x"}}, "No user query found in messages."},
		{"chat-templates/qwen3.8.chat_template.jinja", []Message{{Role: "user", Content: "x"}, {Role: "system", Content: "y"}},
			"System message must be at the beginning."},
		{"chat-templates/qwen3.8.chat_template.jinja", []Message{{Role: "user", Content: "x"}},
			"Unexpected reasoning effort max. Supported types are xhigh (default), medium, and low."},
	}
	for _, tt := range tests {
		tpl, sp := loadTemplate(t, tt.file)
		opts := Options{AddGenerationPrompt: true, BOSToken: sp.BOS}
		if strings.Contains(tt.want, "reasoning effort") {
			opts.Vars = map[string]any{"reasoning_effort": "max"}
		}
		_, err := tpl.Render(tt.msgs, opts)
		var ex *ExceptionError
		if !errors.As(err, &ex) || !IsException(err) {
			t.Errorf("%s: err = %v, want an ExceptionError", tpl.Name(), err)
			continue
		}
		if ex.Message != tt.want || ex.Template != tpl.Name() {
			t.Errorf("%s: raised %q by %q, want %q by %q", tpl.Name(), ex.Message, ex.Template, tt.want, tpl.Name())
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tpl.Name()) {
			t.Errorf("error text %q does not name the template and its message", err)
		}
	}
}
