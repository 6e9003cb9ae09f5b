package serve

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/chat"
)

// vendorTemplate reads a template of internal/chat/testdata/templates
// (the vendors' own, see its README).
func vendorTemplate(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "chat", "testdata", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// templateReply renders a question and then an assistant turn making
// calls with the template, and returns the text the template writes for
// that turn after the generation prompt (what the model is taught to
// answer), without the stop mark that ends it.
func templateReply(t *testing.T, tpl *chat.Template, calls []chat.ToolCall) string {
	t.Helper()
	opts := chat.Options{BOSToken: "<s>", EOSToken: "</s>", Now: time.Date(2025, 6, 20, 0, 0, 0, 0, time.UTC)}
	user := []chat.Message{{Role: "user", Content: "Weather in Lima?"}}
	opts.AddGenerationPrompt = true
	prompt, err := tpl.Render(user, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.AddGenerationPrompt = false
	whole, err := tpl.Render(append(user, chat.Message{Role: "assistant", ToolCalls: calls}), opts)
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := strings.CutPrefix(whole, prompt)
	if !ok {
		t.Fatalf("the conversation %q does not start with the prompt %q", whole, prompt)
	}
	for _, stop := range []string{"</s>", "<|call|>"} {
		reply = strings.TrimSuffix(reply, stop)
	}
	return reply
}

// TestToolFormatsVendorTemplates: the tool-call format is derived from
// the vendors' templates of Mistral Nemo and Mistral Small 3.2 (Mistral's
// [TOOL_CALLS]) and gpt-oss (harmony); the calls each template writes for
// an assistant turn, one and two of them (gpt-oss writes one a turn), are
// what a model trained on it answers, and they parse into the calls, with
// an id (Mistral's: the model's, else nine letters and digits, which the
// template takes back with the results), and no markup in the streamed text, cut at random (1 to 8 bytes,
// 300 cuttings each, and one byte at a time). gpt-oss's other ways of
// addressing a call (the recipient in the channel header, a constrain
// mark, an analysis message before) parse too.
func TestToolFormatsVendorTemplates(t *testing.T) {
	one := []chat.ToolCall{{ID: "abc123XYZ", Name: "get_weather", Arguments: `{"city": "Lima", "days": 2}`}}
	two := append(one, chat.ToolCall{ID: "def456UVW", Name: "add", Arguments: `{"a": 1, "b": 2}`})
	wantOne := []string{`get_weather {"city":"Lima","days":2}`}
	wantTwo := append(wantOne, `add {"a":1,"b":2}`)
	rng := rand.New(rand.NewPCG(2407, 2506))
	for _, c := range []struct {
		file     string
		format   toolFormat
		parallel bool
		extra    []string // more replies of the format, each the one call
	}{
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", formatMistral, true, []string{
			`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima", "days": 2}}]`}},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", formatMistral, true, []string{
			`[TOOL_CALLS]get_weather[ARGS]{"city": "Lima", "days": 2}`}},
		{"openai-gpt-oss-120b.jinja", formatHarmony, false, []string{
			`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Lima", "days": 2}`,
			` to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Lima", "days": 2}`,
			`<|channel|>analysis<|message|>The user wants Lima's weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Lima", "days": 2}`,
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			src := vendorTemplate(t, c.file)
			if got := toolFormatOf(src); got != c.format {
				t.Fatalf("format %q, want %q", got, c.format)
			}
			tpl, err := chat.ParseNamed(c.file, src)
			if err != nil {
				t.Fatal(err)
			}
			examples := []toolExample{{format: c.format, text: templateReply(t, tpl, one), calls: wantOne}}
			if c.parallel {
				examples = append(examples, toolExample{format: c.format, text: templateReply(t, tpl, two), calls: wantTwo})
			}
			for _, x := range c.extra {
				examples = append(examples, toolExample{format: c.format, text: x, calls: wantOne})
			}
			p := exampleParser(c.format)
			for _, ex := range examples {
				content, calls := p.parse(ex.text)
				if got := callStrings(calls); content != "" || strings.Join(got, "\n") != strings.Join(ex.calls, "\n") {
					t.Fatalf("%q: content %q, calls %q; want %q", ex.text, content, got, ex.calls)
				}
				for _, call := range calls {
					if call.ID == "" || call.Type != "function" {
						t.Errorf("%q: call %+v", ex.text, call)
					}
				}
				if c.format == formatMistral {
					checkMistralIDs(t, tpl, ex.text, calls)
				}
				s, cont, cs := streamChunks(p, ex.text, func(int) int { return 1 })
				checkStream(t, ex, s, cont, cs)
				for range 300 {
					s, cont, cs := streamChunks(p, ex.text, func(rest int) int { return 1 + rng.IntN(min(rest, 8)) })
					checkStream(t, ex, s, cont, cs)
				}
			}
		})
	}
}

// checkMistralIDs: the calls read from a Mistral reply keep the ids the
// model wrote (nine letters and digits), or get nine random ones, and
// the conversation that comes back with them and their results renders
// through the template, which refuses any other id.
func checkMistralIDs(t *testing.T, tpl *chat.Template, text string, calls []toolCall) {
	t.Helper()
	msgs := []chat.Message{{Role: "user", Content: "Weather in Lima?"}, {Role: "assistant"}}
	for i, c := range calls {
		if len(c.ID) != 9 || strings.Trim(c.ID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
			t.Fatalf("%q: call id %q", text, c.ID)
		}
		if want := []string{"abc123XYZ", "def456UVW"}[i]; strings.Contains(text, want) && c.ID != want {
			t.Errorf("%q: call id %q, the model wrote %q", text, c.ID, want)
		}
		msgs[1].ToolCalls = append(msgs[1].ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	for _, c := range calls {
		msgs = append(msgs, chat.Message{Role: "tool", Content: "19 C", ToolCallID: c.ID})
	}
	if _, err := tpl.Render(msgs, chat.Options{AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>"}); err != nil {
		t.Errorf("%q: the conversation with its calls and results: %v", text, err)
	}
}

// TestMistralForcedCall: a call forced by tool_choice is written as each
// vendor template writes calls (Small 3.2: NAME[CALL_ID]ID[ARGS]{…};
// Nemo: the JSON list), and what is forced, with arguments, parses into
// the call.
func TestMistralForcedCall(t *testing.T) {
	for file, want := range map[string]string{
		"Mistral-Small-3.2-24B-Instruct-2506.jinja":  "[TOOL_CALLS]get_weather[CALL_ID]",
		"mistralai-Mistral-Nemo-Instruct-2407.jinja": `[TOOL_CALLS][{"name": "get_weather", "arguments": `,
	} {
		before, after := mistralForced(vendorTemplate(t, file), []byte(`"get_weather"`))
		if !strings.HasPrefix(before, want) {
			t.Errorf("%s: the forced call opens with %q, want %q", file, before, want)
		}
		content, calls := exampleParser(formatMistral).parse(before + `{"city": "Lima"}` + after)
		if content != "" || strings.Join(callStrings(calls), "") != `get_weather {"city":"Lima"}` {
			t.Errorf("%s: the forced call reads as %q, %q", file, content, callStrings(calls))
		}
	}
}
