package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
