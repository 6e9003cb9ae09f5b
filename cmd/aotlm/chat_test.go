package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

func TestTemplateCommand(t *testing.T) {
	dir := testutil.Path(t, "tokenizers/qwen2.5")
	msgs := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(msgs, []byte(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`), 0o644)
	code, out, errs := runCLI(t, "template", "-m", dir, "--messages", msgs)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d (%s):\n%q\nwant\n%q", code, errs, out, want)
	}
	code, _, errs = runCLI(t, "template", "-m", filepath.Join(dir, "vocab.json"), "--messages", msgs)
	if code != 1 {
		t.Fatalf("a vocab.json accepted as a template: %d %s", code, errs)
	}
}

// TestRunChat gives a tiny random model the real tok512 tokenizer and a
// template of our own, and checks that --chat feeds exactly the rendered
// template's ids, with no BOS added beyond what the template writes.
func TestRunChat(t *testing.T) {
	tok := testutil.Path(t, "llama2c/tok512-dratman/tok512.model")
	dir := filepath.Join(t.TempDir(), "m")
	if err := tinymodel.WriteLlama(dir, tinyConfig(), 3); err != nil {
		t.Fatal(err)
	}
	cfg := `{"bos_token": "<s>", "eos_token": "</s>",
	  "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}bot:{% endif %}"}`
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644)
	code, out, errs := runCLI(t, "run", "-m", dir, "--tokenizer", tok, "--chat", "--system", "Be kind.",
		"-p", "Tell a story", "-n", "3", "--temp", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep runJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	code, tout, errs := runCLI(t, "tokenize", "-m", tok, "--json", "--",
		"<s>system: Be kind.\nuser: Tell a story\nbot:")
	if code != 0 {
		t.Fatalf("tokenize: %d %s", code, errs)
	}
	var tk struct{ IDs []int }
	json.Unmarshal([]byte(tout), &tk)
	if len(tk.IDs) == 0 || tk.IDs[0] != 1 || !slices.Equal(tk.IDs, rep.PromptIDs) {
		t.Fatalf("chat prompt ids %v, rendered template tokenizes to %v", rep.PromptIDs, tk.IDs)
	}
}

// TestChatCommand: a scripted conversation through `aotlm chat` (stdin,
// --temp 0, --json) gives each turn the ids a fresh session gives for the
// whole rendered conversation, reuses the cache from the second turn on,
// and obeys /reset.
func TestChatCommand(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(compile.CacheEnv, cache)
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	os.WriteFile(tpl, []byte("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"), 0o644)
	users := []string{"Once upon a time", "Lily saw a cat", "The cat ran away"}
	script := strings.Join(users, "\n") + "\n/reset\n" + users[0] + "\n"
	var out, errb bytes.Buffer
	code := runWithInput([]string{"chat", "-m", src, "--chat-template", tpl, "--system", "Tell a story.",
		"--temp", "0", "-n", "16", "--json", "--ar-len", "8"}, strings.NewReader(script), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var turns []chatTurn
	dec := json.NewDecoder(&out)
	for dec.More() {
		var tr chatTurn
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	if len(turns) != 4 || !strings.Contains(errb.String(), "conversation reset") {
		t.Fatalf("%d turns, stderr %q", len(turns), errb.String())
	}
	arts, _ := filepath.Glob(filepath.Join(cache, "*.aot"))
	if len(arts) != 1 {
		t.Fatalf("cache holds %v", arts)
	}
	m, err := aotlm.Open(arts[0], aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tmpl, err := chat.Load(tpl)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "system", Content: "Tell a story."}}
	for k, tr := range turns[:3] {
		msgs = append(msgs, chat.Message{Role: "user", Content: users[k]})
		text, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.NewSession(0)
		want, err := s.Generate(context.Background(), aotlm.Request{Prompt: text, Raw: true, MaxTokens: 16}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tr.PromptIDs, want.PromptIDs) || !slices.Equal(tr.IDs, want.IDs) {
			t.Fatalf("turn %d: chat %v, fresh run %v", k+1, tr.IDs, want.IDs)
		}
		if k > 0 && tr.Reused == 0 {
			t.Errorf("turn %d reused nothing", k+1)
		}
		msgs = append(msgs, chat.Message{Role: "assistant", Content: tr.Text})
	}
	if !slices.Equal(turns[3].IDs, turns[0].IDs) || turns[3].Reused != 0 {
		t.Errorf("after /reset: ids %v (reused %d), first turn %v", turns[3].IDs, turns[3].Reused, turns[0].IDs)
	}
}
