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

// TestArtifactCarriesChatAndDefaults: a HF folder's chat template and
// generation_config.json travel into the artifact; `run --chat` works on
// the artifact alone, and do_sample=false makes unflagged runs greedy.
// A quantized folder's recipe is kept in the manifest.
func TestArtifactCarriesChatAndDefaults(t *testing.T) {
	tok := testutil.Path(t, "llama2c/tok512-dratman/tok512.model")
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	if err := tinymodel.WriteLlama(hf, tinyConfig(), 4); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(hf, "tokenizer_config.json"), []byte(`{"bos_token": "<s>", "eos_token": "</s>",
	  "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}bot:{% endif %}"}`), 0o644)
	os.WriteFile(filepath.Join(hf, "generation_config.json"), []byte(`{"do_sample": false, "temperature": 0.6, "top_p": 0.9}`), 0o644)
	art := filepath.Join(dir, "m.aot")
	if code, _, errs := runCLI(t, "compile", hf, "--tokenizer", tok, "-o", art, "--ar-len", "4", "--ctx", "64"); code != 0 {
		t.Fatalf("compile: %s", errs)
	}
	code, out, errs := runCLI(t, "inspect", art, "--json")
	if code != 0 {
		t.Fatalf("inspect: %s", errs)
	}
	var man struct {
		ChatTemplate string         `json:"chat_template"`
		Generation   map[string]any `json:"generation"`
	}
	json.Unmarshal([]byte(out), &man)
	if man.ChatTemplate == "" || man.Generation["do_sample"] != false || man.Generation["top_p"] != 0.9 {
		t.Fatalf("manifest: template %q, generation %v", man.ChatTemplate, man.Generation)
	}
	var a, b runJSON
	for i, seed := range []string{"1", "2"} {
		code, out, errs := runCLI(t, "run", "-m", art, "--chat", "-p", "Tell a story", "-n", "6", "--seed", seed, "--json", "--ignore-eos")
		if code != 0 {
			t.Fatalf("run --chat on the artifact: %s", errs)
		}
		json.Unmarshal([]byte(out), map[int]*runJSON{0: &a, 1: &b}[i])
	}
	if len(a.PromptIDs) == 0 || a.PromptIDs[0] != 1 || !slices.Equal(a.IDs, b.IDs) {
		t.Fatalf("prompt %v; seeds gave %v and %v (do_sample=false must be greedy)", a.PromptIDs, a.IDs, b.IDs)
	}
	// a quantized folder's recipe is recorded
	q := filepath.Join(dir, "q")
	if code, _, errs := runCLI(t, "quantize", hf, "-o", q, "--tokenizer", tok, "--recipe", "w8a16"); code != 0 {
		t.Fatalf("quantize: %s", errs)
	}
	qa := filepath.Join(dir, "q.aot")
	if code, _, errs := runCLI(t, "compile", q, "-o", qa, "--ctx", "64"); code != 0 {
		t.Fatalf("compile quantized: %s", errs)
	}
	_, out, _ = runCLI(t, "inspect", qa, "--json")
	var qm struct {
		Recipe struct{ Name string } `json:"recipe"`
	}
	json.Unmarshal([]byte(out), &qm)
	if qm.Recipe.Name != "w8a16" {
		t.Fatalf("recipe in manifest: %+v", qm.Recipe)
	}
}
