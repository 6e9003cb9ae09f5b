package chat

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixedNow is the date strftime_now reports in golden renders.
var fixedNow = time.Date(2024, time.July, 26, 12, 0, 0, 0, time.UTC)

// The conversation below is the one ollama's template tests use
// (template/testdata/*.gotmpl/system-user-assistant-user).
const (
	sysText   = "You are a helpful assistant."
	userText1 = "Hello, how are you?"
	botText1  = "I'm doing great. How can I help you today?"
	userText2 = "I'd like to show off how chat templating works!"
	botText2  = "Sure: this is the second answer."
)

type renderCase struct {
	name string
	msgs []Message
	gen  bool
	vars map[string]any
}

var (
	caseUser = renderCase{name: "user", gen: true, msgs: []Message{{Role: "user", Content: userText1}}}
	caseSUAU = renderCase{name: "system-user-assistant-user", gen: true, msgs: []Message{
		{Role: "system", Content: sysText}, {Role: "user", Content: userText1},
		{Role: "assistant", Content: botText1}, {Role: "user", Content: userText2}}}
	caseUAU = renderCase{name: "user-assistant-user", gen: true, msgs: []Message{
		{Role: "user", Content: userText1}, {Role: "assistant", Content: botText1},
		{Role: "user", Content: userText2}}}
	caseMulti = renderCase{name: "multi-turn-nogen", gen: false, msgs: []Message{
		{Role: "user", Content: userText1}, {Role: "assistant", Content: botText1},
		{Role: "user", Content: userText2}, {Role: "assistant", Content: botText2}}}
	caseNoThink = renderCase{name: "user-nothink", gen: true, vars: map[string]any{"enable_thinking": false},
		msgs: []Message{{Role: "user", Content: userText1}}}
)

// goldenTemplates lists every chat template in the shared test data and the
// conversations rendered for it. Gemma 2 refuses a system turn, so it gets
// user-assistant-user instead.
var goldenTemplates = []struct {
	name  string
	file  string // relative to the shared test data folder
	cases []renderCase
}{
	{"qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti}},
	{"qwen3", "tokenizers/qwen3/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti, caseNoThink}},
	{"qwen3.8", "chat-templates/qwen3.8.chat_template.jinja", []renderCase{caseUser, caseSUAU, caseMulti, caseNoThink}},
	{"llama3.2", "tokenizers/llama3.2/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti}},
	{"gemma2", "tokenizers/gemma2/tokenizer_config.json", []renderCase{caseUser, caseUAU, caseMulti}},
	{"gemma3", "tokenizers/gemma3/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti}},
	{"phi3.5", "tokenizers/phi3.5/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti}},
	{"phi4-mini", "tokenizers/phi4-mini/tokenizer_config.json", []renderCase{caseUser, caseSUAU, caseMulti}},
}

// loadTemplate opens a test data template: a tokenizer_config.json or a
// bare .jinja file (which carries no special tokens).
func loadTemplate(t testing.TB, rel string) (*Template, Specials) {
	t.Helper()
	p := testutil.Path(t, rel)
	if strings.HasSuffix(p, ".jinja") {
		tpl, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return tpl, Specials{}
	}
	tpl, sp, err := FromTokenizerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return tpl, sp
}

func render(t testing.TB, tpl *Template, sp Specials, c renderCase) string {
	t.Helper()
	out, err := tpl.Render(c.msgs, Options{AddGenerationPrompt: c.gen, BOSToken: sp.BOS, EOSToken: sp.EOS, Now: fixedNow, Vars: c.vars})
	if err != nil {
		t.Fatalf("%s/%s: %v", tpl.Name(), c.name, err)
	}
	return out
}

// TestGolden renders every template of the test data for its conversations
// and compares with testdata/golden/<name>-<case>.txt (rewritten with
// -update). The goldens were checked once against Python's jinja2 3.1 with
// Hugging Face's settings (trim_blocks, lstrip_blocks, the same globals);
// TestPublishedFormats pins the families' published formats by hand.
func TestGolden(t *testing.T) {
	for _, g := range goldenTemplates {
		t.Run(g.name, func(t *testing.T) {
			tpl, sp := loadTemplate(t, g.file)
			for _, c := range g.cases {
				got := render(t, tpl, sp, c)
				path := filepath.Join("testdata", "golden", g.name+"-"+c.name+".txt")
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/chat -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("%s: render differs from %s\ngot:  %q\nwant: %q", c.name, path, got, want)
				}
			}
		})
	}
}
