package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// TestArtifactCommands: inspect, tokenize and template take artifacts of
// every KV cache dtype, and give what they give on the source files.
func TestArtifactCommands(t *testing.T) {
	tok := testutil.Path(t, "llama2c/tok512-dratman/tok512.model")
	dir := filepath.Join(t.TempDir(), "m")
	if err := tinymodel.WriteLlama(dir, tinyConfig(), 3); err != nil {
		t.Fatal(err)
	}
	cfg := `{"bos_token": "<s>", "eos_token": "</s>",
	  "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}bot:{% endif %}"}`
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644)
	msgs := filepath.Join(t.TempDir(), "msgs.json")
	os.WriteFile(msgs, []byte(`[{"role":"user","content":"Hi"}]`), 0o644)

	_, wantTok, _ := runCLI(t, "tokenize", "-m", tok, "--json", "--", "Once upon a time")
	_, wantTpl, _ := runCLI(t, "template", "-m", dir, "--messages", msgs)
	for _, kv := range []string{"f32", "f16", "u8"} {
		art := filepath.Join(t.TempDir(), kv+".aot")
		if code, _, errs := runCLI(t, "compile", dir, "--tokenizer", tok, "-o", art, "--ctx", "64", "--kv", kv); code != 0 {
			t.Fatalf("compile --kv %s: %s", kv, errs)
		}
		code, out, errs := runCLI(t, "inspect", art, "--json")
		if code != 0 {
			t.Errorf("inspect --kv %s artifact: exit %d: %s", kv, code, errs)
		}
		var info struct {
			KVCache *struct{ DType string } `json:"kv_cache"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Errorf("inspect --json: %v", err)
		}
		if kv != "f32" && (info.KVCache == nil || info.KVCache.DType != kv) {
			t.Errorf("inspect --kv %s: manifest cache %+v", kv, info.KVCache)
		}
		code, out, errs = runCLI(t, "tokenize", "-m", art, "--json", "--", "Once upon a time")
		if code != 0 || out != wantTok {
			t.Errorf("tokenize on the %s artifact: exit %d (%s): %s, want %s", kv, code, errs, out, wantTok)
		}
		code, out, errs = runCLI(t, "template", "-m", art, "--messages", msgs)
		if code != 0 || out != wantTpl {
			t.Errorf("template on the %s artifact: exit %d (%s): %q, want %q", kv, code, errs, out, wantTpl)
		}
	}
	// stories260K has no chat template: the error says so
	art := filepath.Join(t.TempDir(), "stories.aot")
	if code, _, errs := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"), "-o", art, "--ctx", "64"); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := runCLI(t, "template", "-m", art, "--messages", msgs); code != 1 || !strings.Contains(errs, "no chat template") {
		t.Errorf("template of an artifact without one: exit %d: %s", code, errs)
	}
	_, want, _ := runCLI(t, "tokenize", "-m", testutil.Path(t, "models/stories260K/stories260K.gguf"), "--json", "--", "Once upon a time")
	if code, out, errs := runCLI(t, "tokenize", "-m", art, "--json", "--", "Once upon a time"); code != 0 || out != want {
		t.Errorf("tokenize on the stories artifact: exit %d (%s): %s, want %s", code, errs, out, want)
	}
}
